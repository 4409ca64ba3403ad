"""What is wrong with an import file before its rows are read: its kind, its bytes, its cells.

The row readers (``bench_core.kernel.tabular``) assume a regular file of UTF-8 text. A lead's
file is often something else: a named pipe or a folder under a file's name, a Latin-1 export
from a spreadsheet, UTF-16 text, a binary file renamed ``.csv``, two files joined with a
byte-order mark between them, a runaway line of megabytes. Each of these is reported here with
its own message naming the file and line, before a reader meets it as a ``UnicodeDecodeError``
or PostgreSQL as a NUL byte it cannot store. Cells must be plain values: a list or an object
where text is expected is refused (it was stored as its Python ``repr``).

Byte-level problems refuse the file even with ``--skip-bad-rows``: a file in the wrong encoding
is wrong as a whole, and skipping the lines that happen to fail would import the rest garbled.
"""

from __future__ import annotations

import codecs
import json
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import RowIssue
from bench_core.kernel.tabular import TABULAR_SUFFIXES

NUL = b"\x00"
BOM = "\ufeff"
MAX_LINE_BYTES = 1_000_000  # no item, response or roster line comes near this; a longer one is not a row
TEXT_SUFFIXES = (".jsonl", ".json", ".csv")
_UNICODE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _kind_of(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def file_problem(path: Path) -> RowIssue | None:
    """Why ``path`` cannot be read as one import file (missing, a folder, a pipe, unreadable), or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return RowIssue(str(path), None, None, "no such file")
    except OSError as exc:
        return RowIssue(str(path), None, None, f"cannot be read ({exc.strerror or exc})")
    kind = _kind_of(mode)
    if kind == "a folder":
        return RowIssue(str(path), None, None, "is a folder where a file was expected")
    if kind is not None:
        return RowIssue(str(path), None, None, f"is {kind}, not a file: save the data to a file and import that")
    if path.suffix.lower() not in TABULAR_SUFFIXES:
        return RowIssue(
            str(path),
            None,
            None,
            f"unsupported file type {path.suffix or '(none)'!r}; use {', '.join(TABULAR_SUFFIXES)}",
        )
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        return RowIssue(str(path), None, None, f"cannot be read ({exc.strerror or exc})")
    return None


def source_files(path: Path) -> tuple[list[Path], list[RowIssue]]:
    """The files an import at ``path`` reads (the file, or a folder's tabular files) and what is wrong with them.

    A folder's entries with a tabular name that are not regular files (a pipe, a sub-folder named
    ``x.jsonl``) are reported, never silently left out.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return [], [RowIssue(str(path), None, None, "no such file or folder")]
    except OSError as exc:
        return [], [RowIssue(str(path), None, None, f"cannot be read ({exc.strerror or exc})")]
    if not stat.S_ISDIR(mode):
        problem = file_problem(path)
        return ([], [problem]) if problem else ([path], [])
    try:
        entries = sorted(p for p in path.iterdir() if p.suffix.lower() in TABULAR_SUFFIXES)
    except OSError as exc:
        return [], [RowIssue(str(path), None, None, f"the folder cannot be listed ({exc.strerror or exc})")]
    files, issues = [], []
    for entry in entries:
        problem = file_problem(entry)
        if problem is None:
            files.append(entry)
        else:
            issues.append(problem)
    if not entries:
        issues.append(RowIssue(str(path), None, None, "the folder holds no .jsonl, .json, .csv or .parquet file"))
    return files, issues


def byte_problems(path: Path, *, limit: int = 200) -> list[RowIssue]:
    """Encoding problems of a text file, one per line at most: NUL bytes, bytes that are not UTF-8,
    a UTF-16/UTF-32 byte-order mark, a byte-order mark inside the file, lines over ``MAX_LINE_BYTES``.

    A UTF-8 byte-order mark at the very start (what spreadsheet programs write) is accepted. An
    empty file (no bytes, or only blank lines) is a problem too: an import of nothing is a mistake.
    Parquet files are binary and are checked by their reader.
    """
    if path.suffix.lower() not in TEXT_SUFFIXES:
        return []
    name = str(path)
    issues: list[RowIssue] = []
    content = False
    with path.open("rb") as handle:
        head = handle.read(4)
        for bom, encoding in _UNICODE_BOMS:
            if head.startswith(bom):
                return [
                    RowIssue(
                        name,
                        1,
                        None,
                        f"the file is {encoding} text (it starts with a {encoding} byte-order mark): "
                        "save it as UTF-8 and import it again",
                    )
                ]
        handle.seek(0)
        number = 0
        while len(issues) < limit:
            line = handle.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            number += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                size = len(line) + _skip_rest_of_line(handle)
                issues.append(
                    RowIssue(
                        name,
                        number,
                        None,
                        f"line is {size / 1_000_000:.1f} MB long; a row may be at most "
                        f"{MAX_LINE_BYTES // 1_000_000} MB (is this the right file?)",
                    )
                )
                content = True
                continue
            if NUL in line:
                issues.append(
                    RowIssue(
                        name,
                        number,
                        None,
                        f"holds a NUL byte (column {line.index(NUL) + 1}): this is a binary file or UTF-16 text, "
                        "not UTF-8 text",
                    )
                )
                content = True
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                issues.append(
                    RowIssue(
                        name,
                        number,
                        None,
                        f"byte 0x{line[exc.start]:02x} at column {exc.start + 1} is not UTF-8 (a Latin-1 or "
                        "Windows-1252 file?): save the file as UTF-8",
                    )
                )
                content = True
                continue
            body = text[1:] if number == 1 and text.startswith("\ufeff") else text
            if "\ufeff" in body:
                issues.append(
                    RowIssue(
                        name,
                        number,
                        None,
                        f"a byte-order mark (U+FEFF) at column {body.index(BOM) + 1} inside the file (were "
                        "two files joined?): remove it",
                    )
                )
            content = content or bool(body.strip())
    if not content and not issues:
        issues.append(RowIssue(name, None, None, "the file is empty (no rows to import)"))
    return issues


def _skip_rest_of_line(handle) -> int:
    skipped = 0
    while True:
        chunk = handle.readline(1 << 20)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped


def nested_cells(row: dict[str, Any], columns: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(column, problem) for every cell of ``row`` (or only ``columns``) holding a list or an object.

    Import files hold one plain value per cell; a structured value would otherwise be stored as
    its Python ``repr`` (``"['Discharge', 'home']"``) and shown to reviewers as if it were text.
    """
    wanted = None if columns is None else {c.lower() for c in columns}
    found = []
    for key, value in row.items():
        if wanted is not None and str(key).strip().lower() not in wanted:
            continue
        if isinstance(value, (list, dict, tuple)):
            what = "an object" if isinstance(value, dict) else "a list"
            shown = json.dumps(value, ensure_ascii=False, default=str)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            found.append((str(key), f"holds {what} ({shown}) where a single value was expected"))
    return found
