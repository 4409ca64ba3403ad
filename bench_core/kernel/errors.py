"""The errors every medrev command turns into one message and an exit code (kernel: no typer, no rich).

How to refuse bad input (exit 2), from any layer of bench_core or review_app::

    from bench_core.kernel.errors import InputError
    raise InputError(path, line, field, expected="a number of seconds > 0", found=repr(text))

``path`` may be None (an argument: pass ``field="--timeout"``), ``line`` None when the file has no line
(a folder, a whole file). A loader that checks many rows collects ``RowIssue`` values and raises
``DatasetError(issues)`` at the end, so the user sees every bad row (first 20 and a count), not just the
first. A fault of the machine (disk read-only or full, permission denied, database unreachable) is a
``MachineFault`` (one sentence, exit 1); ``machine_fault(exc, path)`` words an ``OSError`` for you.

The top of the command line (``bench_core.cli.errors.MedrevGroup``, used by ``medrev`` and
``python -m bench_core``) maps exceptions to exit codes with ``exit_code(exc)``:

- ``InputError``, ``DatasetError`` and any other ``ValueError`` (the tree's own refusals subclass it):
  the message, exit 2;
- ``MachineFault``, and an ``OSError`` that is not about a missing path: one sentence, exit 1
  (``FileNotFoundError``, ``IsADirectoryError``, ``NotADirectoryError`` are bad input: exit 2);
- anything else: one line naming the exception and a log file holding the traceback, exit 1
  (``--debug`` or ``MEDREV_DEBUG=1`` prints the traceback instead).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path

EXIT_INPUT = 2
EXIT_MACHINE = 1
EXIT_UNEXPECTED = 1

# errno values that mean "the path the user named is wrong", not "the machine refused"
_INPUT_ERRNOS = {errno.ENOENT, errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP, errno.EEXIST}


@dataclass(frozen=True)
class RowIssue:
    """One row that could not be loaded: where it is and what is wrong with it."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f" field {self.field!r}:" if self.field else ""
        return f"{where}:{what} {self.message}"


class DatasetError(ValueError):
    """A file (or folder) refused whole; ``issues`` lists every problem found, not just the first."""

    def __init__(self, issues: list[RowIssue], *, limit: int = 20) -> None:
        self.issues = list(issues)
        shown = "\n".join(f"  - {issue}" for issue in self.issues[:limit])
        more = len(self.issues) - limit
        tail = f"\n  ... and {more} more" if more > 0 else ""
        noun = "problem" if len(self.issues) == 1 else "problems"
        super().__init__(f"{len(self.issues)} {noun} found, nothing was loaded:\n{shown}{tail}")


class InputError(ValueError):
    """Bad input at one place: file (or None for an argument), line, field, what was expected, what was found."""

    def __init__(
        self,
        path: str | Path | None,
        line: int | None = None,
        field: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        *,
        message: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        self.expected = expected
        self.found = found
        self.detail = self._detail(message)
        where = [] if self.path is None else [self.path if line is None else f"{self.path}:{line}"]
        if field:
            where.append(f"field {field!r}" if self.path is not None else field)
        super().__init__(": ".join([*where, self.detail]))

    def _detail(self, message: str | None) -> str:
        what = message or ""
        if self.expected is not None:
            what = (f"{what}; " if what else "") + f"expected {self.expected}"
            if self.found is not None:
                what += f", found {self.found}"
        elif self.found is not None and not what:
            what = f"unexpected {self.found}"
        return what

    def as_issue(self) -> RowIssue:
        """This error as one row problem (for a loader collecting every bad row)."""
        return RowIssue(self.path or "", self.line, self.field, self.detail)


class MachineFault(Exception):
    """The machine refused (disk read-only or full, permission denied, database unreachable): one sentence, exit 1."""


def is_input_os_error(exc: OSError) -> bool:
    """True when an ``OSError`` says the named path is wrong (missing, a folder, not a folder): bad input."""
    return isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError) or exc.errno in _INPUT_ERRNOS


def machine_fault(exc: OSError, path: str | Path | None = None, doing: str | None = None) -> MachineFault:
    """An ``OSError`` as one sentence: what was being done, on which path, and the system's reason."""
    where = path if path is not None else exc.filename
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno == errno.EROFS:
        reason = "the file system is read-only"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        reason = "permission denied"
    elif exc.errno == errno.ENOSPC:
        reason = "the disk is full"
    verb = f"cannot {doing}" if doing else "cannot use"
    target = f" {where}" if where is not None else ""
    return MachineFault(f"{verb}{target}: {reason}.")


def exit_code(exc: BaseException) -> int | None:
    """The exit code for an expected error (2: bad input, 1: machine fault), None for an unexpected one."""
    if isinstance(exc, MachineFault):
        return EXIT_MACHINE
    if isinstance(exc, OSError):
        return EXIT_INPUT if is_input_os_error(exc) else EXIT_MACHINE
    if isinstance(exc, UnicodeError):
        return None  # a decode error met outside a loader's checks names neither file nor line: a bug to log
    if isinstance(exc, ValueError):
        return EXIT_INPUT
    return None


def describe(exc: BaseException) -> str:
    """The one message shown for an expected error (``exit_code`` is not None)."""
    if isinstance(exc, OSError) and not isinstance(exc, MachineFault):
        if is_input_os_error(exc):
            where = exc.filename if exc.filename is not None else ""
            reason = {
                errno.ENOENT: "no such file or folder",
                errno.EISDIR: "is a folder, expected a file",
                errno.ENOTDIR: "a part of the path is a file, expected a folder",
                errno.EEXIST: "a file is in the way (expected a folder, or nothing)",
            }.get(exc.errno or 0, exc.strerror or str(exc))
            return f"{where}: {reason}" if where else reason
        return str(machine_fault(exc))
    return str(exc)
