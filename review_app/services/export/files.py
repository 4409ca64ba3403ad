"""The export's files: each table written as CSV (with formula escaping), JSON Lines or Parquet, a chunk at a time.

* **Safe CSV.** A *text* cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
  return gets a leading single quote, so a spreadsheet shows it as text instead of running it as a
  formula; text that is a plain number (``-1``, ``+2.5``) is left alone because a spreadsheet
  reads it as that number, not a formula. Numeric columns are never touched, so scores such as
  -1 stay numbers and the CSV files feed ``medrev stats`` unchanged. JSONL and Parquet hold the
  values as they are (they are not opened by spreadsheets).
* **Streamed.** A table is written a chunk of ``CHUNK_ROWS`` rows at a time in every format at once, and
  the bytes are those of the whole table written in one go, so an export's memory does not grow with
  the study (the formats are described in docs/data-formats.md).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from review_app.analysis.layout import is_text_dtype
from review_app.services.errors import InvalidInput
from review_app.services.export.tables import FORMULA_PREFIXES, Table, escape_csv_cell, iso_utc, json_value

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

EXPORT_FORMATS: tuple[str, ...] = ("csv", "jsonl", "parquet")
# Rows read from the database and written to the files at a time: the export's memory for the large
# tables (labels: one row per task) is one chunk, whatever the study's size.
CHUNK_ROWS = 10_000

ProgressCallback = Callable[[float, str], None]
"""Called with the fraction done (0 to 1) and what the export is doing, for a progress bar."""


class Progress:
    """Maps the export's stages onto one 0-1 bar: each stage owns a span, advanced by rows written."""

    def __init__(self, callback: ProgressCallback | None, start: float = 0.0, end: float = 1.0) -> None:
        self.callback = callback
        self.start, self.end = start, end
        self.last = -1.0

    def __call__(self, fraction: float, text: str) -> None:
        if self.callback is None:
            return
        value = self.start + (self.end - self.start) * min(max(fraction, 0.0), 1.0)
        if value - self.last >= 0.005 or fraction >= 1.0 or fraction == 0.0:
            self.last = value
            self.callback(value, text)

    def span(self, start: float, end: float) -> Progress:
        """A progress for a sub-stage that fills [start, end] of this one."""
        width = self.end - self.start
        return Progress(self.callback, self.start + width * start, self.start + width * end)


@dataclass(frozen=True)
class ExportedFile:
    """One file of an export as its manifest lists it (with its checksum, so a reader can verify it)."""

    path: str  # relative to the export folder, '/'-separated
    sha256: str
    bytes: int
    table: str | None = None
    format: str | None = None
    rows: int | None = None


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"csv,parquet"`` -> ("csv", "parquet"), refusing unknown formats by name."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    formats = tuple(dict.fromkeys(p.strip().lower() for p in parts if p.strip()))
    unknown = [f for f in formats if f not in EXPORT_FORMATS]
    if unknown or not formats:
        raise InvalidInput(
            f"unknown export format(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(EXPORT_FORMATS)}"
        )
    return formats


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _text_frame(frame: pd.DataFrame, fmt: str) -> pd.DataFrame:
    """A chunk as CSV/JSONL write it: datetimes as ISO UTC text, and (CSV) formula-like text escaped."""
    text = frame.copy()
    for column in text.columns:
        if pd.api.types.is_datetime64_any_dtype(text[column]):
            text[column] = text[column].map(lambda v: None if pd.isna(v) else iso_utc(v))
    if fmt == "csv":
        for column in text.columns:
            if is_text_dtype(text[column].dtype):
                values = text[column].tolist()
                if any(type(v) is str and v.startswith(FORMULA_PREFIXES) for v in values):  # else nothing to escape
                    text[column] = [escape_csv_cell(v) for v in values]
    return text


def _json_column(series: pd.Series) -> list[Any]:
    """The column's values as JSON takes them (``json_value`` of each cell), converted a column at a time."""
    if pd.api.types.is_bool_dtype(series) and not isinstance(series.dtype, pd.BooleanDtype):
        return series.tolist()
    if pd.api.types.is_integer_dtype(series):
        values = series.astype(object).tolist()
        return [None if v is pd.NA else int(v) for v in values] if series.hasnans else values
    if pd.api.types.is_float_dtype(series) and not isinstance(series.dtype, pd.api.extensions.ExtensionDtype):
        finite = np.isfinite(series.to_numpy())
        values = series.tolist()
        return values if finite.all() else [v if ok else None for v, ok in zip(values, finite, strict=True)]
    return [v if v is None or type(v) is str else json_value(v) for v in series.tolist()]


_CSV_SPECIAL = re.compile(r'[,"\r\n]')  # a CSV cell with one of these is quoted (csv.QUOTE_MINIMAL)


def _csv_quoted(texts: list[str]) -> list[str]:
    """Cells as the csv module writes them in a row of several cells (pandas' ``to_csv`` uses it)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    out = []
    for text in texts:
        if _CSV_SPECIAL.search(text) is None:
            out.append(text)
            continue
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([text, ""])
        out.append(buffer.getvalue()[:-2])  # drop the ",\n" of the empty second cell
    return out


def _encode_distinct(values: pd.Series | pd.Index | np.ndarray, fmt: str) -> list[str] | None:
    """The CSV or JSON text of each value (no missing values among them), or None for values of mixed or
    unusual Python types (the caller then formats every cell on its own)."""
    dtype = values.dtype
    if pd.api.types.is_bool_dtype(dtype) and not isinstance(dtype, pd.BooleanDtype):
        words = ("True", "False") if fmt == "csv" else ("true", "false")
        return [words[0] if v else words[1] for v in np.asarray(values, dtype=bool)]
    if pd.api.types.is_integer_dtype(dtype):
        return [str(v) for v in np.asarray(values, dtype=np.int64).tolist()]
    if pd.api.types.is_float_dtype(dtype) and not isinstance(dtype, pd.api.extensions.ExtensionDtype):
        numbers = np.asarray(values, dtype=float)
        if fmt == "csv":  # pandas formats a float column with numpy's str (the shortest repr)
            return numbers.astype(str).tolist()
        return [repr(v) if math.isfinite(v) else "null" for v in numbers.tolist()]
    if pd.api.types.is_datetime64_any_dtype(dtype):
        texts = [iso_utc(v) for v in values]
    elif isinstance(dtype, pd.StringDtype) or (
        pd.api.types.is_object_dtype(dtype) and pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty")
    ):
        texts = list(values)
    else:
        return None
    if fmt == "csv":
        return _csv_texts(texts)
    return [encode_basestring(t) for t in texts]


# a text that starts a cell with a formula prefix (cells joined by NUL, which text cells do not hold)
_FORMULA_START = re.compile("(?:^|\x00)[" + re.escape("".join(FORMULA_PREFIXES)) + "]")


def _csv_texts(texts: list[str]) -> list[str]:
    """``escape_csv_cell`` then CSV quoting of each text; texts are checked all at once first, because
    ids and keys (distinct on every row) almost never need either. Every text starts the joined string
    or follows a NUL, so none that needs escaping is missed (a NUL inside a text can only send the
    texts to the cell-by-cell path, which gives the same result)."""
    joined = "\x00".join(texts)
    if _FORMULA_START.search(joined) is None and _CSV_SPECIAL.search(joined) is None:
        return texts
    return _csv_quoted([escape_csv_cell(t) for t in texts])


# Whole numbers spanning fewer values than this (scores, counts, versions: a labels table has tens of
# millions such cells) are formatted once each and picked by index; ids each on their own
_SMALL_RANGE = 4096


def _int_texts(numbers: np.ndarray) -> np.ndarray:
    """``str`` of each whole number, as an object array (numpy's ``astype(str)`` took twice as long)."""
    texts = np.empty(numbers.size, dtype=object)
    texts[:] = list(map(str, numbers.tolist()))
    return texts


def _column_cells(series: pd.Series, fmt: str, shared: dict[str, Any] | None = None) -> np.ndarray:
    """Each cell of a column as its CSV or JSON text (an object array).

    Each distinct value is formatted once (a column of a million rows has a handful of distinct scores,
    statuses or raters); whole numbers and booleans are formatted as arrays directly (ids are all
    distinct: counting distinct values would only cost). ``shared``: what the same column's cells in
    the other text format found (its distinct values, its ids' texts), filled by the first format's
    call and used by the next (see :func:`write_chunk`).
    """
    shared = {} if shared is None else shared
    dtype = series.dtype
    missing_text = "" if fmt == "csv" else "null"
    if pd.api.types.is_integer_dtype(dtype) or (
        pd.api.types.is_bool_dtype(dtype) and not isinstance(dtype, pd.BooleanDtype)
    ):
        missing = series.isna().to_numpy()
        if pd.api.types.is_integer_dtype(dtype):
            numbers = series.to_numpy(dtype=np.int64, na_value=0)
            if numbers.size and int(numbers.max()) - int(numbers.min()) < _SMALL_RANGE:
                low = int(numbers.min())
                table = np.array([*map(str, range(low, int(numbers.max()) + 1)), missing_text], dtype=object)
                codes = numbers - low
                if missing.any():
                    codes[missing] = len(table) - 1
                return table[codes]
            if "ints" not in shared:  # a whole number's text is the same in CSV and JSON
                shared["ints"] = _int_texts(numbers)
            cells = shared["ints"]
        else:
            words = ("True", "False") if fmt == "csv" else ("true", "false")
            codes = np.where(series.to_numpy(dtype=bool), 0, 1)
            if missing.any():
                codes[missing] = 2
            return np.array([*words, missing_text], dtype=object)[codes]
        if missing.any():
            cells = cells.copy()
            cells[missing] = missing_text
        return cells
    if "factorized" not in shared:
        mixed = pd.api.types.is_object_dtype(dtype) and pd.api.types.infer_dtype(series, skipna=True) not in (
            "string",
            "empty",
        )
        shared["factorized"] = (None, None) if mixed else pd.factorize(series, use_na_sentinel=True)
    codes, distinct = shared["factorized"]
    encoded = None if distinct is None else _encode_distinct(distinct, fmt)
    if encoded is None:  # mixed Python objects: each cell on its own, as the in-memory writer did
        if fmt == "csv":
            texts = _text_frame(series.to_frame(), "csv").iloc[:, 0].tolist()
            cells = _csv_quoted(["" if v is None or v is pd.NA or v != v else str(v) for v in texts])
        else:
            dumps = json.JSONEncoder(ensure_ascii=False).encode
            cells = [dumps(v) for v in _json_column(_text_frame(series.to_frame(), "jsonl").iloc[:, 0])]
        array = np.empty(len(cells), dtype=object)
        array[:] = cells
        return array
    codes = np.where(codes < 0, len(encoded), codes)  # missing: the last text
    return np.array([*encoded, missing_text], dtype=object)[codes]


def _lines(names: list[str], fmt: str, columns: list[np.ndarray], n: int) -> str:
    """The text of ``n`` rows whose cells (as texts) are ``columns``: CSV lines, or JSON objects with the
    names as keys.

    Built as one list holding, row after row, each cell's text after what comes before it in the line
    (a comma, or the ``{"key": `` / ``, "key": `` of JSON) and the line's end, filled a column at a time
    by slice assignment and joined once: twice as fast as a %-format per row.
    """
    if not names:
        return ("\n" if fmt == "csv" else "{}\n") * n
    if fmt == "csv":
        before = ["", *([","] * (len(names) - 1))]
        end = "\n"
    else:
        keys = [encode_basestring(name) for name in names]
        before = [f"{{{keys[0]}: ", *(f", {key}: " for key in keys[1:])]
        end = "}\n"
    width = 2 * len(names) + 1
    parts: list[str | None] = [None] * (n * width)
    for j, cells in enumerate(columns):
        parts[2 * j :: width] = [before[j]] * n
        parts[2 * j + 1 :: width] = cells.tolist()
    parts[width - 1 :: width] = [end] * n
    return "".join(parts)


class TableFile:
    """One table file written a chunk at a time: CSV (formula escaping), JSONL or Parquet.

    Every chunk must have the columns and dtypes of the first one. The CSV and JSONL bytes are those
    of the whole table written at once by pandas' ``to_csv`` and ``json.dumps`` per row (the in-memory
    writer); they are built a column at a time, each distinct value of a column formatted once, and
    the lines built by :func:`_lines`. Parquet gets one row group per chunk (same values and types),
    with ``schema`` when the whole table is known (:func:`parquet_schema` of it), else the first chunk's.
    """

    def __init__(self, folder: Path, name: str, fmt: str, schema: pa.Schema | None = None) -> None:
        self.path = folder / f"{name}.{fmt}"
        self.fmt = fmt
        self.rows = 0
        self._handle = None if fmt == "parquet" else self.path.open("w", encoding="utf-8", newline="")
        self._parquet: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = schema
        self._header = False

    def write(self, frame: pd.DataFrame, shared: dict[str, dict[str, Any]] | None = None) -> None:
        """Append ``frame``'s rows. ``shared``: per column, what another format's file found writing the
        same chunk (see :func:`write_chunk`)."""
        if self.fmt == "parquet":
            self._write_parquet(frame)
        elif self.fmt == "csv" and len(frame.columns) < 2:  # a lone empty cell is quoted: leave it to pandas
            text = _text_frame(frame, "csv")
            text.to_csv(self._handle, index=False, header=not self._header, lineterminator="\n")
            self._header = True
        else:
            names = [str(name) for name in frame.columns]
            if self.fmt == "csv" and not self._header:
                csv.writer(self._handle, lineterminator="\n").writerow(names)
                self._header = True
            if len(frame):
                shared = {} if shared is None else shared
                columns = [
                    _column_cells(frame[name], self.fmt, shared.setdefault(str(name), {})) for name in frame.columns
                ]
                self._handle.write(_lines(names, self.fmt, columns, len(frame)))
        self.rows += len(frame)

    def _write_parquet(self, frame: pd.DataFrame) -> None:
        import pyarrow as pa  # here: the module imports without pyarrow
        import pyarrow.parquet as pq

        if self._schema is None:
            # all empty in the first chunk: text columns (later chunks may hold text)
            self._schema = parquet_schema(frame, null_as_text=True)
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, self._schema)
        self._parquet.write_table(pa.Table.from_pandas(frame, schema=self._schema, preserve_index=False))

    def close(self, empty: pd.DataFrame | None = None) -> Path:
        """Finish the file; ``empty`` (the table's columns, no rows) writes the header of a table with no rows."""
        if self.rows == 0 and empty is not None:
            self.write(empty)
        if self._handle is not None:
            self._handle.close()
        if self._parquet is not None:
            self._parquet.close()
        return self.path


def write_chunk(outputs: Sequence[TableFile], frame: pd.DataFrame) -> None:
    """Append one chunk to several files of the same table (CSV, JSONL, Parquet): the CSV and JSON texts of
    a column are made from one search of its distinct values, and its ids' texts are made once."""
    shared: dict[str, dict[str, Any]] = {}
    for out in outputs:
        out.write(frame, shared)


def write_tables(
    table: Table, folder: Path, formats: Sequence[str], progress: ProgressCallback | None = None
) -> list[Path]:
    """Write ``table`` as ``folder/<name>.<fmt>`` in each of ``formats`` (CSV with formula escaping, JSONL,
    Parquet), a chunk of rows at a time in all of them (:func:`write_chunk`): the converted copy CSV and
    JSONL need is one chunk, not the whole table. The Parquet file's types are those of the whole table."""
    frame = table.frame
    outputs = [
        TableFile(folder, table.name, fmt, parquet_schema(frame) if fmt == "parquet" else None) for fmt in formats
    ]
    names = ", ".join(out.path.name for out in outputs)
    for start in range(0, len(frame), CHUNK_ROWS):
        write_chunk(outputs, frame.iloc[start : start + CHUNK_ROWS])
        if progress is not None:
            progress(min(start + CHUNK_ROWS, len(frame)) / max(len(frame), 1), f"Writing {names}")
    return [out.close(empty=frame.iloc[:0]) for out in outputs]


def parquet_schema(frame: pd.DataFrame, *, null_as_text: bool = False) -> pa.Schema:
    """The Arrow schema of a table's Parquet file: the file's types do not depend on the pandas release.

    Text is ``string`` (pandas 3 keeps text as ``large_string``, pandas 2 as Python objects that pyarrow
    writes as ``string``) and times are ``timestamp[ns]`` (pandas 3 infers microseconds from Python
    datetimes, pandas 2 always used nanoseconds). ``null_as_text``: a column with no value at all is text
    (a chunked file's first chunk, whose later chunks may hold text), not Arrow's ``null``.
    """
    import pyarrow as pa

    schema = pa.Schema.from_pandas(frame, preserve_index=False)
    for i, arrow_field in enumerate(schema):
        kind = arrow_field.type
        if pa.types.is_large_string(kind) or (null_as_text and pa.types.is_null(kind)):
            schema = schema.set(i, arrow_field.with_type(pa.string()))
        elif pa.types.is_timestamp(kind) and kind.unit != "ns":
            schema = schema.set(i, arrow_field.with_type(pa.timestamp("ns", tz=kind.tz)))
    return schema


def write_table(table: Table, folder: Path, fmt: str, progress: ProgressCallback | None = None) -> Path:
    """:func:`write_tables` in one format."""
    return write_tables(table, folder, (fmt,), progress)[0]


def exported_file(work: Path, path: Path, **info: Any) -> ExportedFile:
    """The manifest's entry for ``path``, a file written under the export folder ``work``."""
    return ExportedFile(path.relative_to(work).as_posix(), _sha256(path), path.stat().st_size, **info)
