"""Publication export of a review study (SPEC 2.5): labels, raw annotations, analysis tables, codebook, manifest.

What the export promises:

* **One snapshot.** Every table comes from one read transaction (REPEATABLE READ on PostgreSQL; a
  SQLite read transaction is a snapshot under WAL), so labels, raw annotations and statistics
  describe the same moment, recorded in the manifest as ``snapshot_utc``.
* **The dashboard's numbers.** Raw annotations are :func:`annotations_frame`; the statistics are
  :func:`review_app.services.study_analysis.analyse` on that frame, as on the lead pages.
* **Pseudonyms by default.** Raters appear as R01, R02, ... and adjudicators as L01, L02, ... (the
  study's stable numbering); ``real_names=True`` writes usernames. Display names, emails, password
  hashes and reviewer profiles are never read for an export.
* **Safe CSV.** A *text* cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
  return gets a leading single quote, so a spreadsheet shows it as text instead of running it as a
  formula; text that is a plain number (``-1``, ``+2.5``) is left alone because a spreadsheet
  reads it as that number, not a formula. Numeric columns are never touched, so scores such as
  -1 stay numbers and the CSV files feed ``medrev stats`` unchanged. JSONL and Parquet hold the
  values as they are (they are not opened by spreadsheets).
* **All or nothing.** Files are written to a hidden temporary folder next to the destination,
  then moved into place with one rename; a failed export leaves no folder behind. The destination
  must not exist or be empty, so an export never mixes with an older one.

The tables and their column documentation are built in ``export_tables``, their LaTeX versions in
``export_latex``; this module reads the snapshot, writes the files, the codebook and the manifest.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import platform
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, exists, func, or_
from sqlmodel import Session, select

from bench_core.kernel.latex import packages
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import is_text_dtype
from review_app.analysis.reviewer_quality import QualityThresholds, ReviewerQuality, reviewer_quality
from review_app.analysis.rubric_b import StudyHarmModel
from review_app.db.engine import read_session, write_session
from review_app.db.models import Annotation, GoldTask, Item, ModelResponse, Reviewer, Study, Task, utcnow
from review_app.rubrics import Rubric, get_rubric
from review_app.services import audit, compute_workers
from review_app.services.actors import LEAD_ROLES, SYSTEM, Actor, acting_user, as_actor, require_study_lead
from review_app.services.adjudication import latest_adjudications
from review_app.services.annotations import (
    TASK_TARGETS,
    adjudicator_labels,
    excluded_tasks,
    get_study_row,
    load_annotations,
)
from review_app.services.errors import InvalidInput
from review_app.services.export_latex import latex_tables
from review_app.services.export_tables import (
    CSV_ESCAPING_RULE,
    FORMULA_PREFIXES,
    LabelsBuilder,
    Table,
    agreement_table,
    column_type,
    escape_csv_cell,
    harm_model_input_table,
    harm_model_refit,
    harm_model_table,
    iso_utc,
    json_value,
    labels_width,
    raw_annotations_table,
    reviewer_quality_table,
    rubric_a_tables,
    rubric_b_tables,
)
from review_app.services.quality import SETTINGS_KEY as QUALITY_SETTINGS
from review_app.services.study_analysis import (
    DEFAULT_N_BOOT,
    PENDING_RULE,
    AnalysisOptions,
    StudyAnalysis,
    analyse,
    check_pending,
    first_model,
    is_pending,
    leave_out_pending,
    rated_counts,
)
from review_app.services.study_cache import CACHE

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

EXPORT_FORMATS: tuple[str, ...] = ("csv", "jsonl", "parquet")
CODEBOOK_MD = "codebook.md"
CODEBOOK_JSON = "codebook.json"
MANIFEST = "manifest.json"
# Raw annotations formats the export's own process writes, after the labels; the compute worker writes
# the others while the labels are streamed (see ``_statistics``).
RAW_FORMATS_HERE: tuple[str, ...] = ("parquet",)
# Rows read from the database and written to the files at a time: the export's memory for the large
# tables (labels: one row per task) is one chunk, whatever the study's size.
CHUNK_ROWS = 10_000

ProgressCallback = Callable[[float, str], None]
"""Called with the fraction done (0 to 1) and what the export is doing, for a progress bar."""


class _Progress:
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

    def span(self, start: float, end: float) -> _Progress:
        """A progress for a sub-stage that fills [start, end] of this one."""
        width = self.end - self.start
        return _Progress(self.callback, self.start + width * start, self.start + width * end)


# --- writing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportedFile:
    path: str  # relative to the export folder, '/'-separated
    sha256: str
    bytes: int
    table: str | None = None
    format: str | None = None
    rows: int | None = None


@dataclass(frozen=True)
class ExportResult:
    study: str
    out_dir: Path
    files: tuple[ExportedFile, ...]
    notes: tuple[str, ...]
    pseudonymised: bool
    snapshot_utc: str

    def __str__(self) -> str:
        who = "pseudonymised reviewers" if self.pseudonymised else "REAL reviewer usernames"
        lines = [f"exported study {self.study!r} to {self.out_dir} ({len(self.files) + 1} files, {who})"]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


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


def _codebook(
    tables: list[Table], formats: tuple[str, ...], latex: dict[str, str], refit: dict[str, Any] | None = None
) -> dict[str, Any]:
    files = []
    for table in tables:
        files.append(
            {
                "table": table.name,
                "files": [f"{table.name}.{fmt}" for fmt in formats],
                "description": table.description,
                "rows": table.rows,
                "columns": [
                    {
                        "name": column,
                        "type": column_type(table.frame[column]),
                        "description": table.columns[column],
                        **({"values": table.values[column]} if column in table.values else {}),
                    }
                    for column in table.frame.columns
                ],
            }
        )
    return {
        "tables": files,
        "latex": {
            name: f"booktabs table ready to paste into a paper (preamble: \\usepackage{{{','.join(packages(source))}}})"
            for name, source in sorted(latex.items())
        },
        "csv_escaping": CSV_ESCAPING_RULE,
        "missing_values": "Empty CSV cells, JSON null and Parquet null mean 'no value'.",
        "harm_model": refit,
    }


def _codebook_markdown(codebook: dict[str, Any], study: str) -> str:
    lines = [f"# Codebook: export of study {study}", "", codebook["missing_values"], "", codebook["csv_escaping"], ""]
    for table in codebook["tables"]:
        lines += [f"## {table['table']}", "", table["description"], ""]
        lines += [f"Files: {', '.join(f'`{f}`' for f in table['files'])}; {table['rows']} rows.", ""]
        lines += ["| column | type | description |", "| --- | --- | --- |"]
        for column in table["columns"]:
            text = column["description"]
            if "values" in column:
                text += " Values: " + "; ".join(f"`{k}` = {v}" for k, v in column["values"].items())
            lines.append(f"| `{column['name']}` | {column['type']} | {text.replace('|', '/')} |")
        lines.append("")
    if codebook["latex"]:
        lines += ["## LaTeX tables", ""]
        lines += [f"- `{name}`: {text}" for name, text in codebook["latex"].items()]
        lines.append("")
    refit = codebook.get("harm_model")
    if refit:
        lines += [
            "## Refitting the harm model",
            "",
            f"Model: `{refit['formula']}` ({refit['estimation']}). Input: `harm_model_input.csv` (rows with "
            "`in_model` true).",
            "",
            "Reference levels (the first level of each factor; odds ratios compare every other level with it):",
            "",
            *(
                f"- `{column}`: `{level}` ({refit['reference_sources'].get(column, 'given')})"
                for column, level in refit["reference_levels"].items()
            ),
            "",
            f"Penalty: {refit['penalty']} ({refit['penalty_description']}).",
            "",
        ]
        if refit["separated_terms"]:
            lines += [f"Separated terms: {', '.join(f'`{t}`' for t in refit['separated_terms'])}.", ""]
        lines += [*(f"{note}" for note in refit["notes"]), ""] if refit["notes"] else []
        lines += ["In R:", "", "```r", refit["r_code"].rstrip(), "```", "", "With medrev:", "", "```sh"]
        lines += [refit["medrev_command"], "```", ""]
    lines += [
        "## manifest.json",
        "",
        "SHA-256 checksums and sizes of every other file, row counts, software versions, snapshot time, study "
        "settings, database backend and whether reviewers are pseudonymised.",
        "",
    ]
    return "\n".join(lines)


def _software() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("medrev", "pandas", "numpy", "scipy", "statsmodels", "krippendorff", "pyarrow"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def _medrev_version() -> str:
    try:
        return metadata.version("medrev")
    except metadata.PackageNotFoundError:
        from review_app import __version__

        return __version__


@contextmanager
def snapshot_session(engine: Engine) -> Iterator[Session]:
    """A read-only session whose reads all see one moment of the database."""
    bind = engine
    if engine.dialect.name == "postgresql":
        bind = engine.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    with Session(bind, expire_on_commit=False) as session:
        yield session


def _tasks_query(study_id: int, rubric: Rubric, *, rated_only: bool = False):
    """The study's tasks of one rubric in pool order (gold tasks left out: they serve quality only),
    as the columns the labels table needs (no item or response bodies).

    ``rated_only``: only tasks with an annotation (or no planned rater), the ones that can be
    complete: an export that leaves the pending tasks out reads the rated tasks, not every task of
    the pool (160,000 of 1,000,000 in the panel-scale benchmark).
    """
    query = select(
        Task.id,
        Item.id,
        Item.external_id,
        Task.unit_key,
        Item.subset,
        Item.language,
        Item.content_type,
        Item.provenance,
        Task.target_raters,
    ).join(Item, Item.id == Task.item_id)
    if rubric.needs_response:
        query = query.add_columns(ModelResponse.model, ModelResponse.condition, ModelResponse.auto_label).outerjoin(
            ModelResponse, ModelResponse.id == Task.response_id
        )
    query = query.where(*_study_tasks(study_id, rubric))
    if rated_only:
        query = query.where(or_(Task.target_raters <= 0, exists().where(Annotation.task_id == Task.id)))
    return query.order_by(Task.pool_rank, Task.id)


def _study_tasks(study_id: int, rubric: Rubric) -> tuple:
    return (
        Task.study_id == study_id,
        Task.rubric == rubric.key,
        Task.id.not_in(select(GoldTask.task_id).where(GoldTask.study_id == study_id)),  # quality only
        Task.id.not_in(excluded_tasks(study_id)),  # a lead excluded them on the Flags page
    )


_TASK_KEYS = (C.task, C.item, "external_id", "unit_key", C.subset, "language", C.content_type, C.provenance)


def _task_chunks(
    session: Session, study_id: int, rubric: Rubric, *, rated_only: bool = False
) -> Iterator[pd.DataFrame]:
    """The rows of :func:`_tasks_query`, ``CHUNK_ROWS`` at a time, streamed from the database (a server-side
    cursor on PostgreSQL), so the study's tasks are never all in memory. Read through the session's
    connection as plain tuples (the ORM's row processing cost more than the query at a million tasks);
    straight from the driver's cursor (the columns are plain integers and text, which SQLAlchemy
    returns unchanged: its result rows cost 2.4 s at a million tasks). A chunk is one
    block of Python objects, filled from the rows in one step (a Series per column cost 4 s).
    """
    keys = [*_TASK_KEYS, "target_raters"]
    if rubric.needs_response:
        keys = [*keys, C.model, "condition", C.auto_label]
    connection = session.connection()
    query = _tasks_query(study_id, rubric, rated_only=rated_only)
    if connection.dialect.name == "sqlite":  # no server-side cursor: SQLAlchemy buffers no row ahead
        result = connection.execute(query)
        with result:
            yield from _blocks(iter(lambda: result.cursor.fetchmany(CHUNK_ROWS), []), keys)
        return
    # PostgreSQL: a server-side cursor of the driver's own, in the snapshot's transaction (SQLAlchemy's
    # streamed results cost 3 s more at 160,000 tasks, and its buffered cursor reads a row ahead)
    compiled = query.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    with connection.connection.driver_connection.cursor(name=f"medrev_export_{rubric.key.lower()}") as cursor:
        cursor.execute(str(compiled), compiled.params)
        yield from _blocks(iter(lambda: cursor.fetchmany(CHUNK_ROWS), []), keys)


def _blocks(batches: Iterator[Sequence[Sequence[Any]]], keys: list[str]) -> Iterator[pd.DataFrame]:
    for rows in batches:
        block = np.empty((len(rows), len(keys)), dtype=object)
        block[:] = rows
        yield pd.DataFrame(block, columns=keys, copy=False)


def _task_stats(session: Session, study_id: int, rubric: Rubric) -> tuple[int, int, int]:
    """(tasks, highest target rater count, tasks planning a rater) of one rubric, as the labels table
    counts them, in one pass over the rubric's tasks."""
    n, most, planned = session.execute(
        select(
            func.count(),
            func.coalesce(func.max(Task.target_raters), 1),
            func.count().filter(Task.target_raters > 0),
        ).where(*_study_tasks(study_id, rubric))
    ).one()
    return int(n), int(most), int(planned)


@dataclass(frozen=True, eq=False)
class _Snapshot:
    study: Study
    frame: pd.DataFrame
    labels: list[Table]  # the first chunk of each labels table (its columns and types) with its row count
    files: list[ExportedFile]
    counts: dict[str, int]
    database: dict[str, Any]
    snapshot_utc: str
    first_model: str | None = None
    pending: dict[str, Any] | None = None
    analysis: Future[_Statistics] | None = None  # the statistics of ``frame``, computed alongside the labels


_rated_counts = rated_counts  # annotations in force per task id, as the Analysis page counts them
_is_pending = is_pending  # PENDING_RULE, shared with the Analysis page


def _rated_tasks(frame: pd.DataFrame, targets: np.ndarray, rated: pd.Series) -> pd.DataFrame:
    """One row per task with annotations in force (the frame's tasks): its rubric, whether it planned a
    rater and whether it is pending (``PENDING_RULE``), from ``targets`` (each frame row's task's
    planned raters, read with the frame's rows)."""
    first = ~frame[C.task].duplicated().to_numpy()  # a task's rows share its rubric and planned raters
    ids = frame[C.task].to_numpy()[first]
    planned = targets[first]
    return pd.DataFrame(
        {
            C.task: ids,
            C.rubric: frame[C.rubric].to_numpy()[first],
            "planned": planned > 0,
            "pending": _is_pending(ids, planned, rated),
        }
    )


def _pending_tasks(
    session: Session,
    study_id: int,
    rubric_keys: list[str],
    planned: dict[str, int],
    rated_tasks: pd.DataFrame,
    among: set[int],
) -> tuple[dict[str, int], set[int]]:
    """Per rubric, how many tasks are pending (``PENDING_RULE``), and which of the tasks in ``among`` are.

    ``planned``: per rubric, the tasks planning a rater (``_task_stats``). A task without any annotation
    is pending when it plans a rater, so the database counts those without returning them (most of a
    large pool: 840,000 of 1,000,000 tasks): the tasks planning a rater less those of them with
    annotations. The tasks with annotations are the frame's (``rated_tasks``), compared as arrays.
    Adjudicated tasks without annotations (rare) are looked up by id.
    """
    counts: dict[str, int] = {}
    found = set(rated_tasks.loc[rated_tasks["pending"], C.task].tolist())
    unrated_wanted = sorted(among - set(rated_tasks[C.task].tolist()))
    for key in rubric_keys:
        mine = rated_tasks.loc[rated_tasks[C.rubric] == key]
        counts[key] = planned[key] - int(mine["planned"].sum()) + int(mine["pending"].sum())
        tasks = _study_tasks(study_id, get_rubric(key))
        for part in range(0, len(unrated_wanted), 10_000):
            ids = unrated_wanted[part : part + 10_000]
            found.update(
                session.execute(select(Task.id).where(*tasks, Task.id.in_(ids), Task.target_raters > 0)).scalars()
            )
    return counts, found


def _read_snapshot(
    engine: Engine,
    study_name: str,
    pseudonymise: bool,
    work: Path,
    formats: tuple[str, ...],
    progress: _Progress,
    pending: str = "exclude",
    start_analysis: Callable[[pd.DataFrame, Study, str | None, _QualityInputs], Future[_Statistics]] | None = None,
) -> _Snapshot:
    """Read the study in one snapshot, streaming its labels tables into ``work`` while the snapshot is open.

    With ``pending="exclude"`` the tasks still pending (``PENDING_RULE``) leave the annotations, the
    decisions and the labels tables. ``start_analysis`` is called with the final annotations frame
    before the labels are streamed, so the statistics can run meanwhile (see :func:`export_study`).
    """
    from review_app.db.migrate import current_revision

    with snapshot_session(engine) as session:
        snapshot_utc = iso_utc(utcnow())
        study = get_study_row(session, study_name)
        frame = load_annotations(session, study, pseudonymise=pseudonymise, read_only=True, task_targets=True)
        rated = _rated_counts(frame)
        targets = frame.pop(TASK_TARGETS).to_numpy()
        rated_tasks = _rated_tasks(frame, targets, rated)
        if pending == "exclude":
            # the frame's pending tasks are known now: the statistics start before the rest is read (the
            # Analysis page leaves the same tasks out with the same function)
            frame = leave_out_pending(frame, targets, rated)
        model = first_model(session, study.id)
        quality = _quality_inputs(session, study, pseudonymise)
        analysis = start_analysis(frame, study, model, quality) if start_analysis is not None else None
        decisions = latest_adjudications(session, study.id)
        adjudicators = adjudicator_labels(session, study.id, pseudonymise=pseudonymise)
        n_excluded = len(set(session.exec(excluded_tasks(study.id)).all()))
        stats = {key: _task_stats(session, study.id, get_rubric(key)) for key in study.rubric_keys}
        planned = {key: tasks_planning for key, (_n, _most, tasks_planning) in stats.items()}
        among = set(rated.index.tolist()) | set(decisions)
        pending_by_rubric, pending_ids = _pending_tasks(
            session, study.id, study.rubric_keys, planned, rated_tasks, among
        )
        n_pending = sum(pending_by_rubric.values())
        leave_out = pending == "exclude" and n_pending > 0
        if leave_out:
            decisions = {t: d for t, d in decisions.items() if t not in pending_ids}
        stats = {key: (n - pending_by_rubric[key] if leave_out else n, most) for key, (n, most, _) in stats.items()}
        n_tasks = sum(n for n, _most in stats.values())
        progress(0.1, "Reading the study")
        labels: list[Table] = []
        files: list[ExportedFile] = []
        written = 0
        for key in study.rubric_keys:
            rubric = get_rubric(key)
            rows = frame.loc[frame[C.rubric] == key]
            builder = LabelsBuilder(key, rows, decisions, adjudicators, labels_width(rows, stats[key][1]))
            outputs = [TableFile(work, f"adjudicated_labels_{key}", fmt) for fmt in formats]
            first: Table | None = None
            for chunk in _task_chunks(session, study.id, rubric, rated_only=leave_out):
                if leave_out:
                    ids, targets = chunk[C.task].to_numpy(np.int64), chunk["target_raters"].to_numpy(np.int64)
                    chunk = chunk.loc[~_is_pending(ids, targets, rated)]
                written += len(chunk)
                table = builder.table(chunk, n_rows=stats[key][0])
                first = first or table
                write_chunk(outputs, table.frame)
                progress(0.1 + 0.9 * written / max(n_tasks, 1), f"Writing labels: {written:,} of {n_tasks:,} tasks")
            first = first or builder.table([], n_rows=0)
            for out in outputs:
                path = out.close(empty=first.frame.iloc[:0])
                files.append(_file(work, path, table=first.name, format=out.fmt, rows=out.rows))
            labels.append(first)
    return _Snapshot(
        study=study,
        frame=frame,
        labels=labels,
        files=files,
        counts={
            "tasks": n_tasks,
            "annotations_in_force": len(frame),
            "raters_with_annotations": int(frame[C.rater].nunique()),
            "adjudicated_tasks": len(decisions),
            "pending_tasks": n_pending,
            "excluded_tasks": n_excluded,
        },
        database={
            "backend": engine.dialect.name,
            "driver": engine.dialect.driver,
            "schema_revision": current_revision(engine),
        },
        snapshot_utc=snapshot_utc,
        first_model=model,
        pending={"tasks": n_pending, "excluded": pending == "exclude", "rule": PENDING_RULE},
        analysis=analysis,
    )


def _file(work: Path, path: Path, **info: Any) -> ExportedFile:
    return ExportedFile(path.relative_to(work).as_posix(), _sha256(path), path.stat().st_size, **info)


def _prepare_destination(out_dir: Path) -> Path:
    out_dir = Path(out_dir).expanduser().absolute()
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InvalidInput(
            f"{out_dir} already exists and is not an empty folder; choose a new folder (exports are never merged "
            "into or written over an existing one)"
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return out_dir


def export_study(
    engine: Engine,
    study_name: str,
    out_dir: Path | str,
    *,
    formats: Sequence[str] | str = EXPORT_FORMATS,
    real_names: bool = False,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    actor: Actor | Reviewer | int = SYSTEM,
    actor_id: int | None = None,
    progress: ProgressCallback | None = None,
    pending: str = "exclude",
) -> ExportResult:
    """Write the publication export of a study into ``out_dir`` (a new or empty folder).

    Files: ``raw_annotations``, ``adjudicated_labels_<rubric>`` per rubric, ``reviewer_quality`` (the
    Reviewers' quality page's table on the export's annotations and gold tasks), ``agreement``,
    ``rubric_a_summary``/``rubric_a_flags``, ``rubric_b_outcomes``/``rubric_b_strata``/
    ``rubric_b_auto_label``, ``harm_model`` and ``harm_model_input`` when the data support them, each
    in every requested format; ``latex/*.tex``; ``codebook.md`` and ``codebook.json`` (with the lme4
    call that refits the harm model); ``manifest.json``. The analysis uses the study's saved analysis
    options (references, tie rule, unrated items, penalty), as the analysis page does.

    Only a lead of the study or an admin may export it (``actor``; the command line is
    ``SYSTEM``; ``actor_id=`` is the older spelling). Tasks still pending (``PENDING_RULE``) are left
    out unless ``pending="include"`` (SPEC 2.5: excluded unless the lead includes them); either way
    the manifest says how many there are and whether they were left out (``pending`` and
    ``counts.pending_tasks``). Tasks a lead excluded on the Flags page are never exported
    (``counts.excluded_tasks``).
    """
    formats = parse_formats(formats)
    check_pending(pending)
    acting = as_actor(actor_id if actor_id is not None else actor)
    lead_id = check_exporter(engine, study_name, acting)
    destination = _prepare_destination(Path(out_dir))
    report = _Progress(progress)
    report(0.0, "Reading the study")
    compute_workers.prestart(engine, (__name__,))  # none yet: its start overlaps the snapshot's read
    work = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", suffix=".partial", dir=destination.parent))
    # The statistics run while the labels tables are streamed: same inputs, same numbers. They run in a
    # compute worker process (see ``_statistics``), waited on by a thread of this one.
    statistics = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medrev-export-analysis")

    in_worker = tuple(fmt for fmt in formats if fmt not in RAW_FORMATS_HERE)

    def start_analysis(
        frame: pd.DataFrame, study: Study, model: str | None, quality: _QualityInputs
    ) -> Future[_Statistics]:
        options = AnalysisOptions.from_settings(study.settings)
        return statistics.submit(
            _statistics,
            engine,
            frame,
            study.rubric_keys,
            study.name,
            n_boot,
            seed,
            options,
            model,
            work,
            in_worker,
            quality=quality,
        )

    try:
        snapshot = _read_snapshot(
            engine,
            study_name,
            not real_names,
            work,
            formats,
            report.span(0.0, 0.45),
            pending=pending,
            start_analysis=start_analysis,
        )
        study = snapshot.study
        files: list[ExportedFile] = list(snapshot.files)

        def add(path: Path, **info: Any) -> None:
            files.append(_file(work, path, **info))

        report(0.45, "Computing the analysis and writing the raw annotations")
        raw, raw_files = _raw_annotations(
            snapshot.frame, study.rubric_keys, work, [f for f in formats if f not in in_worker]
        )
        computed = snapshot.analysis.result()
        analysis = replace(computed.analysis, annotations=snapshot.frame)
        files += sorted([*computed.files, *raw_files], key=lambda file: formats.index(file.format))
        tables = [*reviewer_quality_table(computed.quality), agreement_table(analysis)]
        tables += [*rubric_a_tables(analysis), *rubric_b_tables(analysis)]
        tables += [*harm_model_table(analysis), *harm_model_input_table(analysis)]
        latex = latex_tables(analysis)
        writing = report.span(0.85, 0.95)
        total = max(sum(table.rows for table in tables) * len(formats), 1)
        done = 0
        for table in tables:
            for fmt in formats:
                step = writing.span(done / total, (done + table.rows) / total)
                add(write_table(table, work, fmt, step), table=table.name, format=fmt, rows=table.rows)
                done += table.rows
        tables = [*snapshot.labels, raw, *tables]
        report(0.95, "Writing the codebook and manifest")
        if latex:
            (work / "latex").mkdir()
            for name, source in sorted(latex.items()):
                path = work / "latex" / name
                path.write_text(source, encoding="utf-8")
                add(path, format="latex")
        refit = harm_model_refit(analysis, "harm_model_input.csv" if "csv" in formats else "harm_model_input.<format>")
        codebook = _codebook(tables, formats, {f"latex/{n}": s for n, s in latex.items()}, refit)
        (work / CODEBOOK_JSON).write_text(json.dumps(codebook, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        add(work / CODEBOOK_JSON, format="json")
        (work / CODEBOOK_MD).write_text(_codebook_markdown(codebook, study.name), encoding="utf-8")
        add(work / CODEBOOK_MD, format="markdown")
        notes = [*analysis.notes]
        if snapshot.pending["tasks"]:
            notes.insert(0, pending_sentence(snapshot.pending["tasks"], excluded=pending == "exclude"))
        manifest = {
            "medrev_version": _medrev_version(),
            "snapshot_utc": snapshot.snapshot_utc,
            "study": {
                "name": study.name,
                "description": study.description,
                "rubrics": study.rubric_keys,
                "status": study.status,
                "created_at": iso_utc(study.created_at),
                "settings": study.settings,
            },
            "database": snapshot.database,
            "pseudonymised": not real_names,
            "formats": list(formats),
            "counts": snapshot.counts,
            "pending": snapshot.pending,
            "analysis": analysis.parameters,
            "harm_model": _harm_summary(analysis),
            "csv_escaping": CSV_ESCAPING_RULE,
            "notes": notes,
            "warnings": analysis.warnings(),
            "software": _software(),
            "files": [file.__dict__ for file in files],
            "checksums": "sha256 of every file listed under files; manifest.json itself is not listed",
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n")
        os.chmod(work, 0o755)
        if destination.exists():
            destination.rmdir()  # empty, checked above; rename needs the name free on every platform
        os.replace(work, destination)
    except BaseException:
        statistics.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(work, ignore_errors=True)
        raise
    statistics.shutdown()
    with write_session(engine) as session:
        audit.record(
            session,
            actor_id=lead_id,
            action="study.export",
            entity="study",
            entity_id=study.id,
            study_id=study.id,
            after={
                "formats": list(formats),
                "pseudonymised": not real_names,
                "snapshot_utc": snapshot.snapshot_utc,
                "files": len(files) + 1,
                "pending_tasks": snapshot.pending["tasks"],
                "pending_excluded": pending == "exclude",
            },
        )
    report(1.0, "Export written")
    return ExportResult(
        study=study.name,
        out_dir=destination,
        files=tuple(files),
        notes=tuple(notes),
        pseudonymised=not real_names,
        snapshot_utc=snapshot.snapshot_utc,
    )


def _raw_annotations(
    frame: pd.DataFrame, rubric_keys: list[str], work: Path, formats: list[str]
) -> tuple[Table, list[ExportedFile]]:
    """The raw annotations table written in ``formats`` here, and the table without its rows (its
    columns and types, for the codebook: the full copy is as large as the frame)."""
    table = raw_annotations_table(frame if formats else frame.iloc[:0], rubric_keys)
    files = [
        _file(work, write_table(table, work, fmt), table=table.name, format=fmt, rows=table.rows) for fmt in formats
    ]
    return replace(table, frame=table.frame.iloc[:0], n_rows=len(frame)), files


@dataclass(frozen=True, eq=False)
class _QualityInputs:
    """What the reviewer-quality table needs besides the export's frame, read in the export's snapshot:
    the gold tasks' annotations (in no file of the export), their expected scores and the study's
    alert thresholds."""

    gold: pd.DataFrame
    expected: dict[int, dict[str, Any]]
    thresholds: QualityThresholds


def _quality_inputs(session: Session, study: Study, pseudonymise: bool) -> _QualityInputs:
    gold = load_annotations(session, study, pseudonymise=pseudonymise, gold="only")
    expected = {
        int(g.task_id): dict(g.expected_scores)
        for g in session.exec(select(GoldTask).where(GoldTask.study_id == study.id))
    }
    return _QualityInputs(gold, expected, QualityThresholds.from_dict(study.settings.get(QUALITY_SETTINGS)))


@dataclass(frozen=True, eq=False)
class _Statistics:
    """What the export's worker job gives back: the analysis, the raw annotations files it wrote
    (one per format it was given), and the reviewers' quality."""

    analysis: StudyAnalysis
    files: list[ExportedFile]
    quality: ReviewerQuality | None = None


def _statistics(
    engine: Engine,
    frame: pd.DataFrame,
    rubric_keys: list[str],
    study_name: str,
    n_boot: int,
    seed: int,
    options: AnalysisOptions,
    model: str | None,
    work: Path,
    formats: tuple[str, ...],
    *,
    quality: _QualityInputs | None = None,
) -> _Statistics:
    """:func:`analyse` of the export's frame, the raw annotations files in ``formats`` and, with
    ``quality``, the reviewers' quality, in a compute worker process (``compute_workers``).

    The statistics are ~1.5 s of CPU at full scale and the raw annotations as CSV and JSONL ~1.4 s
    more, holding the GIL: in this process they took that time from the labels streaming (the
    export's longest part). In a worker (the second core) they do not. The worker gets the
    snapshot's frame itself (it must not read the database again: another moment), writes into the
    export's temporary folder (removed whole if the export fails), and sends back the analysis
    without the frame's rows, which this process has already. The raw Parquet file (0.3 s, mostly
    outside the GIL) is written here once the labels are (``RAW_FORMATS_HERE``), so that both
    processes finish about together.
    """
    return compute_workers.run(
        engine,
        _statistics_job,
        frame,
        rubric_keys,
        study_name,
        n_boot,
        seed,
        options,
        model,
        str(work),
        formats,
        quality=quality,
    )


def _statistics_job(
    _engine: Engine,
    frame: pd.DataFrame,
    rubric_keys: list[str],
    study_name: str,
    n_boot: int,
    seed: int,
    options: AnalysisOptions,
    model: str | None,
    work: str,
    formats: tuple[str, ...],
    *,
    quality: _QualityInputs | None = None,
) -> _Statistics:
    """The export's statistics on ``frame``, and its raw annotations table written to ``work`` (a worker job).

    The reviewers' quality reads severity from the analysis's own harm model (the fit the
    ``harm_model`` file reports), as the Reviewers' quality page reads it from the Analysis page's.
    """
    analysis = analyse(
        frame, rubric_keys, study=study_name, n_boot=n_boot, seed=seed, options=options, first_model=model
    )
    reviewers = None
    if quality is not None:
        harm = StudyHarmModel(options.harm_spec(model), analysis.harm_input, analysis.harm_model)
        reviewers = reviewer_quality(
            frame, harm=harm, gold_annotations=quality.gold, expected=quality.expected, thresholds=quality.thresholds
        )
    folder = Path(work)
    files: list[ExportedFile] = []
    if formats:
        table = raw_annotations_table(frame, rubric_keys)
        for fmt, path in zip(formats, write_tables(table, folder, formats), strict=True):
            files.append(_file(folder, path, table=table.name, format=fmt, rows=table.rows))
    return _Statistics(analysis=replace(analysis, annotations=frame.iloc[:0]), files=files, quality=reviewers)


def check_exporter(engine: Engine, study_name: str, actor: Actor) -> int | None:
    """The exporting account's id (None for the system) if it leads the study or is an admin, else PermissionDenied."""
    with read_session(engine) as session:
        me = acting_user(session, actor, roles=LEAD_ROLES)
        require_study_lead(session, me, get_study_row(session, study_name))
    return me.id if me is not None else None


def pending_sentence(n: int, *, excluded: bool) -> str:
    """One sentence on the tasks still pending, for the Export page and the manifest's notes."""
    tasks = "task is" if n == 1 else "tasks are"
    what = "left out of this export" if excluded else "included with the ratings they have so far"
    return f"{n} {tasks} still pending (fewer ratings than planned); they are {what}."


def pending_tasks(engine: Engine, study_name: str, *, actor: Actor | Reviewer | int) -> int:
    """How many of the study's exportable tasks are still pending (``PENDING_RULE``), for the Export page."""
    check_exporter(engine, study_name, as_actor(actor))
    # One pass over the study's tasks and annotations (1.4 s at 1,000,000 tasks), so once per data
    # version: the Export page shows it on every rerun.
    return CACHE.get(
        engine, study_name, ("pending_tasks",), lambda _v: _count_pending(engine, study_name), reads_database=True
    )


def _count_pending(engine: Engine, study_name: str) -> int:
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        rated = (
            select(Annotation.task_id, func.count(func.distinct(Annotation.assignment_id)).label("n"))
            .join(Task, Task.id == Annotation.task_id)
            .where(Task.study_id == study.id)
            .group_by(Annotation.task_id)
            .subquery()
        )
        count = session.exec(
            select(func.count())
            .select_from(Task)
            .outerjoin(rated, rated.c.task_id == Task.id)
            .where(
                Task.study_id == study.id,
                Task.rubric.in_(study.rubric_keys),
                Task.id.not_in(select(GoldTask.task_id).where(GoldTask.study_id == study.id)),
                Task.id.not_in(excluded_tasks(study.id)),
                func.coalesce(rated.c.n, 0) < Task.target_raters,
            )
        ).one()
    return int(count)


def _harm_summary(analysis: StudyAnalysis) -> dict[str, Any]:
    result = analysis.harm_model
    if result is None:
        reason = next((n for n in analysis.notes if n.startswith("harm model")), "harm model not applicable")
        return {"fitted": False, "reason": reason}
    data = result.to_dict()
    data.pop("terms")
    return {"fitted": True, **data}


@dataclass(frozen=True)
class ExportArchive:
    filename: str
    data: bytes
    result: ExportResult


def export_name(study_name: str) -> str:
    """``medrev-export-<study>-<UTC time>``: the folder or zip name of an export made now."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", study_name).strip("-") or "study"
    return f"medrev-export-{slug}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"


def export_archive(
    engine: Engine,
    study_name: str,
    *,
    formats: Sequence[str] | str = EXPORT_FORMATS,
    real_names: bool = False,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    actor: Actor | Reviewer | int = SYSTEM,
    actor_id: int | None = None,
    progress: ProgressCallback | None = None,
    pending: str = "exclude",
) -> ExportArchive:
    """The export as one zip, for a download button (same content as :func:`export_study`).

    The files are written to a temporary folder and compressed into a temporary zip file a block at a
    time; only the finished (compressed) zip is read into memory, because the download button needs it.
    """
    name = export_name(study_name)
    report = _Progress(progress)
    with tempfile.TemporaryDirectory() as tmp:
        result = export_study(
            engine,
            study_name,
            Path(tmp) / name,
            formats=formats,
            real_names=real_names,
            n_boot=n_boot,
            seed=seed,
            actor=actor,
            actor_id=actor_id,
            progress=report.span(0.0, 0.9),
            pending=pending,
        )
        zipped = Path(tmp) / f"{name}.zip"
        paths = [path for path in sorted(result.out_dir.rglob("*")) if path.is_file()]
        total = max(sum(path.stat().st_size for path in paths), 1)
        done = 0
        with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in paths:
                archive.write(path, f"{name}/{path.relative_to(result.out_dir).as_posix()}")
                done += path.stat().st_size
                report.span(0.9, 1.0)(done / total, "Compressing the zip")
        data = zipped.read_bytes()
    return ExportArchive(filename=f"{name}.zip", data=data, result=result)
