"""The one error path of the command line: every command's failure becomes one message and an exit code.

``MedrevGroup`` is the click group class of ``medrev`` (``review_app.cli``) and of ``python -m bench_core``.
It wraps the invocation of every sub-command, so a command raises and never prints its own traceback:

- bad input (``InputError``, ``DatasetError``, any ``ValueError``, a path that does not exist or is a
  folder): ``error: <message>`` on stderr, exit 2;
- a fault of the machine (``MachineFault``, an ``OSError`` such as a read-only disk or a denied
  permission): ``error: <one sentence>``, exit 1;
- Ctrl-C: ``interrupted``, exit 130;
- anything else: one line naming the exception and a log file holding the traceback, exit 1.

``--debug`` (an option of ``medrev`` and of ``medrev bench``: ``medrev --debug bench ...``) or
``MEDREV_DEBUG=1`` prints the traceback too. The exception classes live in ``bench_core.kernel.errors``
(see its docstring for how to
raise them); this module only decides how they are shown.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import typer
import typer.main
from typer.core import TyperGroup
from typer.exceptions import TyperException

from bench_core.kernel.errors import EXIT_UNEXPECTED, describe, exit_code

DEBUG_ENV = "MEDREV_DEBUG"
INTERRUPTED = 130


def debug_enabled() -> bool:
    """True when tracebacks are wanted (``--debug`` given, or MEDREV_DEBUG set to 1/true/yes)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def say(message: str, *, prefix: str = "error: ") -> None:
    """Write ``prefix + message`` to stderr as plain text (no Rich markup: user text is printed as is)."""
    sys.stderr.write(f"{prefix}{message}\n")
    sys.stderr.flush()


def log_dir() -> Path:
    """Where tracebacks of unexpected errors are written: MEDREV_LOG_DIR, else MEDREV_HOME/logs."""
    if os.environ.get("MEDREV_LOG_DIR"):
        return Path(os.environ["MEDREV_LOG_DIR"])
    home = Path(os.environ.get("MEDREV_HOME", Path.home() / ".local" / "share" / "medrev"))
    return home / "logs"


def write_crash_log(exc: BaseException) -> Path | None:
    """Write the traceback of ``exc`` (with the command line) to a new log file; its path, or None if none could be."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    text = f"medrev {' '.join(sys.argv[1:])}\n{_dt.datetime.now().isoformat()}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    for folder in (log_dir(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"medrev-error-{stamp}-{os.getpid()}.log"
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def handle(exc: BaseException, code: int | None = None) -> int:
    """Show ``exc`` as the command line's one message and return the exit code (``code``: already classified)."""
    code = exit_code(exc) if code is None else code
    if debug_enabled():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if code is not None:
        say(describe(exc))
        return code
    log = write_crash_log(exc)
    first = (str(exc).strip().splitlines() or [""])[0]
    where = f"; the traceback is in {log}" if log is not None else ""
    hint = "" if debug_enabled() else " (run again with --debug to see it)"
    say(f"unexpected {type(exc).__name__}: {first}{where}{hint}")
    return EXIT_UNEXPECTED


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr (plain text) and exit with ``code`` (2: bad input, 1: machine fault).

    Called while handling an exception with ``--debug``, its traceback is printed first.
    """
    caught = sys.exc_info()[1]
    if caught is not None and debug_enabled():
        traceback.print_exception(type(caught), caught, caught.__traceback__, file=sys.stderr)
    say(message)
    raise typer.Exit(code)


def debug_option(value: bool) -> None:
    """The ``--debug`` flag of a group's callback: show tracebacks for the rest of this command."""
    if value:
        os.environ[DEBUG_ENV] = "1"


def plain_help(command: Any) -> None:
    """Render the help of ``command`` and every command below it as plain, wrapped text (no Rich boxes)."""
    command.rich_markup_mode = None
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)


DEBUG_HELP = f"Show the traceback of an error (also {DEBUG_ENV}=1)."


class MedrevGroup(TyperGroup):
    """A typer group whose sub-commands' exceptions end in one message and an exit code (see the module).

    Help and usage errors are plain text for the whole tree below it: Rich's boxed help cuts long words
    (``--format medqa|medmcqa|med…``, URLs) at 80 columns, plain help wraps and never cuts.
    """

    # name -> (module, attribute of its typer app, one-line help): sub-groups imported and built only when used,
    # so ``medrev --help`` neither imports nor introspects the commands it does not run (a subclass sets it).
    lazy_commands: ClassVar[dict[str, tuple[str, str, str]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_help(self)

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(name for name in self.lazy_commands if name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            module, attribute, _help = self.lazy_commands[cmd_name]
            group = typer.main.get_command(getattr(importlib.import_module(module), attribute))
            group.name = cmd_name
            plain_help(group)
            self.commands[cmd_name] = group
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list; a lazy group not loaded yet is listed with its one-line help (nothing imported)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(name) for name in names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:
                rows.append((name, self.lazy_commands[name][2]))
            elif not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, TyperException, SystemExit):
            raise  # usage errors and exits are the command line's own, already worded
        except KeyboardInterrupt:
            say("interrupted.", prefix="")
            raise typer.Exit(INTERRUPTED) from None
        except Exception as exc:  # the one place where every command's failure is shown
            raise typer.Exit(handle(exc, self.exit_code(exc))) from None

    def exit_code(self, exc: BaseException) -> int | None:
        """2 for bad input, 1 for a fault of the machine, None for a bug (``kernel.errors.exit_code``).

        A subclass adds the errors of its own package (the ``medrev`` root: the review app's refusals).
        """
        return exit_code(exc)
