"""The long "raw annotations" layout the analysis reads, and the checks that guard it.

The export writes one row per annotation in force with these columns; the analysis functions take
the same names by default and accept others by parameter, so a CSV from another tool can be
analysed without renaming. Every check raises :class:`AnalysisInputError` with a message that names
the column (and, where it helps, the row and value), which the CLI turns into exit code 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


class AnalysisInputError(ValueError):
    """The input data do not have the shape or values an analysis needs."""


@dataclass(frozen=True)
class AnnotationColumns:
    """Column names of the long annotation layout (one row per annotation in force).

    Score columns are named after the rubric's dimension keys (``review_app.rubrics``) and hold
    0/1/2 or NaN; they are not listed here because they come from the rubric.
    """

    task: str = "task_id"
    item: str = "item_id"
    rubric: str = "rubric"
    rater: str = "rater"
    slot: str = "slot"
    flags: str = "flags"
    subset: str = "subset"
    content_type: str = "content_type"
    provenance: str = "provenance"
    model: str = "model"
    auto_label: str = "auto_label"


DEFAULT_COLUMNS = AnnotationColumns()


def require_columns(data: pd.DataFrame, columns: Iterable[str], *, what: str = "input") -> None:
    """Refuse a frame that lacks any of ``columns``, naming the missing ones and those present."""
    missing = [c for c in columns if c not in data.columns]
    if missing:
        present = ", ".join(map(str, data.columns)) or "(none)"
        raise AnalysisInputError(f"{what} has no column(s) {', '.join(map(repr, missing))}; columns present: {present}")


RowOffset = int | Sequence[int]


def where(position: int, row_offset: RowOffset) -> str:
    """Where frame row ``position`` came from: ``line N`` of the file, or ``row N`` (0-based) of a bare frame.

    ``row_offset`` is either the line of position 0 (2 for a CSV with a header and one line per record) or,
    when records span lines or blank lines are skipped, the file line of every frame row.
    """
    if isinstance(row_offset, int):
        return f"line {position + row_offset}" if row_offset else f"row {position}"
    return f"line {row_offset[position]}"


def numeric_scores(
    data: pd.DataFrame, column: str, *, allowed: Sequence[float] | None = None, row_offset: RowOffset = 0
) -> pd.Series:
    """The column as floats with NaN for missing, refusing text and values outside ``allowed``.

    Empty strings and blanks count as missing (a CSV writes a missing score as an empty cell).
    ``row_offset`` turns a frame position into the line number the user sees (2 for a CSV with a
    header), so the message can point at the offending line.
    """
    raw = data[column]
    if raw.dtype == bool:
        raise AnalysisInputError(f"column {column!r} holds true/false values, expected numeric scores")
    if raw.dtype.kind in "iuf":
        # Already numbers (the annotations frame, a CSV column pandas parsed): nothing to clean or
        # refuse as text (checking each value is per-cell Python work, slow at a million scores).
        values = raw
    else:
        cleaned = raw.map(lambda v: np.nan if isinstance(v, str) and not v.strip() else v)
        values = pd.to_numeric(cleaned, errors="coerce")
        bad = values.isna() & cleaned.notna()
        if bad.any():
            position = int(np.flatnonzero(bad.to_numpy())[0])
            raise AnalysisInputError(
                f"column {column!r} must be numeric: {where(position, row_offset)} holds {raw.iloc[position]!r} "
                f"({int(bad.sum())} non-numeric value(s) in all)"
            )
    values = values.astype(float)
    if allowed is not None:
        outside = values.notna() & ~values.isin([float(a) for a in allowed])
        if outside.any():
            position = int(np.flatnonzero(outside.to_numpy())[0])
            allowed_text = ", ".join(_fmt(a) for a in allowed)
            raise AnalysisInputError(
                f"column {column!r}: {where(position, row_offset)} holds {_fmt(values.iloc[position])}, "
                f"outside the categories {{{allowed_text}}}"
            )
    return values


def is_text_dtype(dtype: object) -> bool:
    """Whether a column's dtype holds text: pandas' string dtypes (``str``, pandas 3's default for text,
    and ``string``) or ``object`` (pandas 2's text, which may also hold other Python objects)."""
    return isinstance(dtype, pd.StringDtype) or pd.api.types.is_object_dtype(dtype)


def split_flags(value: object) -> tuple[str, ...]:
    """Flag keys from a semicolon-joined cell (empty, NaN or None mean no flags)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ()
    return tuple(part.strip() for part in str(value).split(";") if part.strip())


def select_rubric(data: pd.DataFrame, rubric_key: str, columns: AnnotationColumns = DEFAULT_COLUMNS) -> pd.DataFrame:
    """Rows of one rubric when the layout carries a rubric column; the whole frame otherwise.

    A frame whose rows are all of that rubric comes back as it is, not copied (an analysis selects the
    rubric's rows, then each of its parts selects them again): callers only read the rows.
    """
    if columns.rubric in data.columns:
        keep = data[columns.rubric].astype(str) == rubric_key
        return data if keep.all() else data.loc[keep]
    return data


def _fmt(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)
