"""Read JSONL, JSON arrays, CSV and Parquet files as (line number, row dict) pairs.

Loaders work on plain dicts so that the same validation runs whatever the container format;
line numbers are the ones a user sees in an editor (1-based, CSV counting the header as line 1).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_core.kernel.errors import DatasetError, RowIssue

TABULAR_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")

Row = dict[str, Any]


def iter_rows(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    """Yield ``(line, row)`` for every record; unreadable records come back as ``RowIssue``.

    A file that cannot be opened or parsed at all raises ``DatasetError``.
    """
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _iter_jsonl(path)
    elif suffix == ".json":
        yield from _iter_json_array(path)
    elif suffix == ".csv":
        yield from _iter_csv(path)
    elif suffix == ".parquet":
        yield from _iter_parquet(path)
    else:
        raise DatasetError(
            [RowIssue(str(path), None, None, f"unsupported file type {suffix!r}; use {', '.join(TABULAR_SUFFIXES)}")]
        )


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    with path.open(encoding="utf-8-sig") as handle:
        for number, text in enumerate(handle, start=1):
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
            yield number, value


def _iter_json_array(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and exc.lineno > 1:
            # One complete value per line: JSON Lines under a .json name (e.g. the MedMCQA release).
            yield from _iter_jsonl(path)
            return
        raise DatasetError([RowIssue(str(path), exc.lineno, None, f"malformed JSON ({exc.msg})")]) from exc
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise DatasetError([RowIssue(str(path), None, None, "expected a JSON array of objects")])
    for index, row in enumerate(value, start=1):
        if isinstance(row, dict):
            yield index, row
        else:
            yield index, RowIssue(str(path), index, None, f"record {index} is not a JSON object")


def _iter_csv(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames:
            raise DatasetError([RowIssue(str(path), 1, None, "the file is empty (no header row)")])
        for row in reader:
            line = reader.line_num
            if None in row:
                yield line, RowIssue(str(path), line, None, "more cells than header columns")
                continue
            yield line, {k.strip(): v for k, v in row.items() if k is not None}


def _iter_parquet(path: Path) -> Iterator[tuple[int, Row | RowIssue]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise DatasetError([RowIssue(str(path), None, None, f"cannot read Parquet file: {exc}")]) from exc
    yield from enumerate(table.to_pylist(), start=1)


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
    return [path]


def cell(row: Row, key: str) -> str | None:
    """A cell as stripped text, or None when missing, empty or NaN (CSV and Parquet blanks)."""
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value != value:
        return None
    text = str(value).strip()
    return text or None
