"""What is wrong with an import file before its rows are read: its kind, its bytes, its cells.

The checks themselves live once, in ``bench_core.kernel.tabular`` (a folder, a pipe or a device
where a file belongs; a byte-order mark, NUL bytes, bytes that are not UTF-8, a line over
``MAX_LINE_BYTES``; a list or object where text belongs). The readers raise at the first
problem; an import wants to name every bad row and to tell file faults (never skipped) from bad
rows (``--skip-bad-rows`` leaves them out), so this module runs the same checks and returns
``RowIssue`` lists instead. It adds what only an import needs: a folder's non-file entries are
named, UTF-16/UTF-32 text gets its own message, a byte-order mark inside a file (two files
joined) is named with its line, and an empty file is refused (an import of nothing is a mistake).

Byte-level problems refuse the file even with ``--skip-bad-rows``: a file in the wrong encoding
is wrong as a whole, and skipping the lines that happen to fail would import the rest garbled.
"""

from __future__ import annotations

import codecs
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import InputError, RowIssue
from bench_core.kernel.tabular import TABULAR_SUFFIXES, cell, check_regular_file, read_text_lines

TEXT_SUFFIXES = (".jsonl", ".json", ".csv")
BOM = "\ufeff"
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def file_problem(path: Path) -> RowIssue | None:
    """Why ``path`` cannot be read as one import file (missing, a folder, a pipe, a device, its type), or None."""
    try:
        check_regular_file(path)
    except InputError as exc:
        return exc.as_issue()
    except OSError as exc:
        return RowIssue(str(path), None, None, f"cannot be read ({exc.strerror or exc})")
    if path.suffix.lower() not in TABULAR_SUFFIXES:
        shown = path.suffix or "(none)"
        return RowIssue(str(path), None, None, f"unsupported file type {shown!r}; use {', '.join(TABULAR_SUFFIXES)}")
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
    except NotADirectoryError:
        return [], [RowIssue(str(path), None, None, "a part of the path is a file, not a folder")]
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


def byte_problems(path: Path) -> list[RowIssue]:
    """What keeps a text file from being read as UTF-8 rows (the readers' own check, plus UTF-16/UTF-32 text,
    a byte-order mark inside the file and an empty file); Parquet files are binary and checked by their reader.
    """
    if path.suffix.lower() not in TEXT_SUFFIXES:
        return []
    name = str(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        return [RowIssue(name, None, None, f"cannot be read ({exc.strerror or exc})")]
    for bom, encoding in _WIDE_BOMS:
        if head.startswith(bom):
            return [
                RowIssue(
                    name,
                    1,
                    None,
                    f"the file is {encoding} text (it starts with a {encoding} byte-order mark): save it as UTF-8 "
                    "and import it again",
                )
            ]
    try:
        lines = read_text_lines(path)
    except InputError as exc:
        return [exc.as_issue()]
    issues = [
        RowIssue(
            name,
            number,
            None,
            f"a byte-order mark (U+FEFF) at column {text.index(BOM) + 1} inside the "
            "file (were two files joined?): remove it",
        )
        for number, text in enumerate(lines, start=1)
        if BOM in text
    ]
    if not issues and not any(text.strip() for text in lines):
        issues.append(RowIssue(name, None, None, "the file is empty (no rows to import)"))
    return issues


def nested_cells(row: dict[str, Any], columns: Iterable[str] | None = None) -> list[RowIssue]:
    """A problem for every cell of ``row`` (or only ``columns``) holding a list or an object.

    Import files hold one plain value per cell; a structured value would otherwise be stored as
    its Python ``repr`` (``"['Discharge', 'home']"``) and shown to reviewers as if it were text.
    The check is the readers' own (``tabular.cell``), run on every cell so that all are named.
    """
    wanted = None if columns is None else {c.lower() for c in columns}
    found = []
    for key in row:
        if wanted is not None and str(key).strip().lower() not in wanted:
            continue
        try:
            cell(row, key)
        except InputError as exc:
            found.append(exc.as_issue())
    return found
