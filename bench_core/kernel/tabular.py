"""Read JSONL, JSON arrays, CSV and Parquet files as (line number, row dict) pairs.

Loaders work on plain dicts so that the same validation runs whatever the container format;
line numbers are the ones a user sees in an editor (1-based, CSV counting the header as line 1).
"""

from __future__ import annotations

import csv
import io
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import DatasetError, InputError, RowIssue

TABULAR_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
# One record per line: a longer line is a broken file (a binary, a missing newline), not a record.
MAX_LINE_BYTES = 2 * 1024 * 1024
BOM = b"\xef\xbb\xbf"


class Row(dict):
    """One record as a dict, remembering where it came from (``file``, ``line``) so that a bad cell is named."""

    file: str | None = None
    line: int | None = None

    @classmethod
    def at(cls, values: dict[str, Any], file: str | Path, line: int) -> Row:
        row = cls(values)
        row.file, row.line = str(file), line
        return row


def check_regular_file(path: Path) -> None:
    """Refuse a path that is missing, a folder, a named pipe or a device, with its own message (``InputError``)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(path, message="no such file") from None
    except NotADirectoryError:
        raise InputError(path, message="a part of the path is a file, not a folder") from None
    if stat.S_ISDIR(mode):
        raise InputError(path, message="is a folder, expected a file")
    if stat.S_ISFIFO(mode):
        raise InputError(path, message="is a named pipe (FIFO), expected a regular file")
    if not stat.S_ISREG(mode):
        raise InputError(path, message="is not a regular file (a device or socket)")


def read_text_lines(path: Path, *, max_line: int | None = MAX_LINE_BYTES) -> list[str]:
    """The lines of a UTF-8 text file, refused whole (``InputError`` naming file and line) when it starts with a
    byte-order mark, holds a NUL byte, is not UTF-8, or has a line longer than ``max_line`` bytes."""
    check_regular_file(path)
    data = path.read_bytes()
    if data.startswith(BOM):
        raise InputError(
            path, 1, message='starts with a byte-order mark (BOM, "UTF-8 with BOM"); save it as UTF-8 without BOM'
        )
    lines = data.split(b"\n")
    text_lines: list[str] = []
    for number, raw in enumerate(lines, start=1):
        if b"\x00" in raw:
            column = raw.index(b"\x00") + 1
            raise InputError(path, number, message=f"holds a NUL byte at column {column}; a text file never does")
        if max_line is not None and len(raw) > max_line:
            raise InputError(
                path,
                number,
                message=f"the line is {len(raw) / 1e6:.1f} MB long, more than a record may be "
                f"({max_line / 1e6:.0f} MB)",
            )
        try:
            text_lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(
                path,
                number,
                message=f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                "save the file as UTF-8",
            ) from None
    return [line + "\n" for line in text_lines[:-1]] + ([text_lines[-1]] if text_lines and text_lines[-1] else [])


def iter_rows(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    """Yield ``(line, row)`` for every record; unreadable records come back as ``RowIssue``.

    A file that cannot be opened or parsed at all raises ``DatasetError`` or ``InputError`` (a folder, a FIFO,
    a BOM, a NUL byte, bytes that are not UTF-8, a line over ``MAX_LINE_BYTES``: each its own message).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABULAR_SUFFIXES:
        raise DatasetError(
            [RowIssue(str(path), None, None, f"unsupported file type {suffix!r}; use {', '.join(TABULAR_SUFFIXES)}")]
        )
    check_regular_file(path)
    if suffix == ".jsonl":
        yield from _iter_jsonl(path, read_text_lines(path))
    elif suffix == ".json":
        yield from _iter_json_array(path)
    elif suffix == ".csv":
        yield from _iter_csv(path)
    else:
        yield from _iter_parquet(path)


def _iter_jsonl(path: Path, lines: list[str]) -> Iterator[tuple[int, Row | RowIssue]]:
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            yield number, RowIssue(str(path), number, None, f"malformed JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(value, dict):
            yield number, RowIssue(str(path), number, None, "expected a JSON object on this line")
            continue
        yield number, Row.at(value, path, number)


def _iter_json_array(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    lines = read_text_lines(path, max_line=None)  # a JSON array may be one long line
    try:
        value = json.loads("".join(lines))
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and exc.lineno > 1:
            # One complete value per line: JSON Lines under a .json name (e.g. the MedMCQA release).
            yield from _iter_jsonl(path, read_text_lines(path))
            return
        raise DatasetError([RowIssue(str(path), exc.lineno, None, f"malformed JSON ({exc.msg})")]) from exc
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise DatasetError([RowIssue(str(path), None, None, "expected a JSON array of objects")])
    for index, row in enumerate(value, start=1):
        if isinstance(row, dict):
            yield index, Row.at(row, path, index)
        else:
            yield index, RowIssue(str(path), index, None, f"record {index} is not a JSON object")


def _iter_csv(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    handle = io.StringIO("".join(read_text_lines(path)), newline="")
    reader = csv.DictReader(handle)
    try:
        fieldnames = reader.fieldnames
    except csv.Error as exc:
        raise InputError(path, 1, message=f"malformed CSV header ({exc})") from None
    if not fieldnames:
        raise DatasetError([RowIssue(str(path), 1, None, "the file is empty (no header row)")])
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(path, reader.line_num, message=f"malformed CSV ({exc})") from None
        line = reader.line_num
        if None in row:
            yield line, RowIssue(str(path), line, None, "more cells than header columns")
            continue
        yield line, Row.at({k.strip(): v for k, v in row.items() if k is not None}, path, line)


def _iter_parquet(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise DatasetError([RowIssue(str(path), None, None, f"cannot read Parquet file: {exc}")]) from exc
    for index, row in enumerate(table.to_pylist(), start=1):
        yield index, Row.at(row, path, index)


def tabular_files(path: Path) -> list[Path]:
    """The readable files at ``path``: the file itself, or every tabular file in a folder (sorted)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in TABULAR_SUFFIXES and p.is_file())
        if not files:
            raise DatasetError(
                [RowIssue(str(path), None, None, "the folder holds no .jsonl, .json, .csv or .parquet file")]
            )
        return files
    if not path.exists():
        raise DatasetError([RowIssue(str(path), None, None, "no such file or folder")])
    check_regular_file(path)
    return [path]


def cell(row: dict[str, Any], key: str) -> str | None:
    """A cell as stripped text, or None when missing, empty or NaN (CSV and Parquet blanks).

    A list or object where text is expected is refused (``InputError`` naming the row's file, line and field),
    never stored as its Python repr.
    """
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, list | dict | tuple):
        shown = json.dumps(value, ensure_ascii=False, default=str)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        kind = "an object" if isinstance(value, dict) else "a list"
        raise InputError(getattr(row, "file", None), getattr(row, "line", None), key, "text", f"{kind} {shown}")
    text = str(value).strip()
    return text or None
