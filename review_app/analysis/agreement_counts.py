"""The per-unit category counts agreement is computed from, read from long ratings with their checks.

Every coefficient needs only how many raters put each unit in each category (:func:`unit_counts`);
the units x raters table (:func:`ratings_matrix`) is kept for the reference computations the tests
and benchmarks compare with. Both refuse what would silently change a coefficient: a score outside
the category set, a scored row without a unit or rater, a rater scoring one unit twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from review_app.analysis.layout import (
    AnalysisInputError,
    RowOffset,
    numeric_scores,
    require_columns,
    where,
)

DEFAULT_CATEGORIES: tuple[int, ...] = (0, 1, 2)


def ratings_matrix(
    data: pd.DataFrame,
    unit: str,
    rater: str,
    score: str,
    *,
    categories: Sequence[float] = DEFAULT_CATEGORIES,
    row_offset: RowOffset = 0,
) -> pd.DataFrame:
    """Units x raters table of scores (NaN where a rater did not rate a unit).

    Refuses non-numeric scores, scores outside ``categories`` and a rater scoring one unit twice
    (the export holds only the annotation revision in force, so a duplicate is a data error).
    """
    units, raters, values, positions = _scored_rows(data, unit, rater, score, categories, row_offset)
    _refuse_repeats(units, raters, units, raters, positions, score, row_offset)
    long = pd.DataFrame({"unit": units, "rater": raters, "score": values})
    return long.pivot(index="unit", columns="rater", values="score")


def _scored_rows(
    data: pd.DataFrame, unit: str, rater: str, score: str, categories: Sequence[float], row_offset: RowOffset
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Units, raters, scores and frame positions of the scored rows, after the checks every table of them needs.

    The columns exist, scores are numbers within ``categories`` and every scored row names its unit and
    rater; the positions let a later refusal name the row's line.
    """
    require_columns(data, [unit, rater, score], what="agreement input")
    values = numeric_scores(data, score, allowed=categories, row_offset=row_offset).to_numpy(dtype=float)
    keep = ~np.isnan(values)
    units, raters, positions = data[unit].to_numpy()[keep], data[rater].to_numpy()[keep], np.flatnonzero(keep)
    if pd.isna(units).any() or pd.isna(raters).any():
        _refuse_missing_ids(units, raters, positions, unit, rater, score, row_offset)
    return units, raters, values[keep], positions


def _refuse_missing_ids(
    units: np.ndarray,
    raters: np.ndarray,
    positions: np.ndarray,
    unit: str,
    rater: str,
    score: str,
    row_offset: RowOffset,
) -> None:
    """Refuse a scored row without a unit or a rater, naming its line (or frame row) and the empty column."""
    for column, values in ((unit, units), (rater, raters)):
        missing = pd.isna(values)
        if missing.any():
            first = int(np.flatnonzero(missing)[0])
            raise AnalysisInputError(
                f"column {column!r}: {where(int(positions[first]), row_offset)} has a score in {score!r} but no "
                f"{column!r} ({int(missing.sum())} such row(s) in all); every scored row needs a unit ({unit!r}) "
                f"and a rater ({rater!r})"
            )


def _refuse_repeats(
    unit_keys: np.ndarray,
    rater_keys: np.ndarray,
    units: np.ndarray,
    raters: np.ndarray,
    positions: np.ndarray,
    score: str,
    row_offset: RowOffset,
) -> None:
    """Refuse a rater scoring one unit twice, naming the first and the repeated line.

    ``unit_keys``/``rater_keys`` identify the pairs (the values themselves or codes of them), ``units``
    and ``raters`` are the values the message shows, ``positions`` each row's frame position.
    """
    repeated = pd.DataFrame({"unit": unit_keys, "rater": rater_keys}).duplicated(keep="first").to_numpy()
    if not repeated.any():
        return
    again = int(np.flatnonzero(repeated)[0])
    first = int(np.flatnonzero((unit_keys == unit_keys[again]) & (rater_keys == rater_keys[again]))[0])
    who, what = (x.item() if isinstance(x, np.generic) else x for x in (raters[again], units[again]))
    raise AnalysisInputError(
        f"column {score!r}: {where(int(positions[again]), row_offset)}: rater {who!r} scored unit {what!r} more "
        f"than once (first at {where(int(positions[first]), row_offset)}); keep one annotation (the revision in "
        "force) per rater and unit"
    )


@dataclass(frozen=True)
class UnitCounts:
    """Per-unit category counts of one score: the only input the coefficients need.

    ``counts`` is units x categories (int64), units in sorted order (the order of
    :func:`ratings_matrix`'s rows); memory is linear in the number of units, whatever the number of
    raters, unlike the units x raters table (1,000 raters made that table, and Krippendorff's
    units x raters x values indicator, gigabytes).
    """

    units: np.ndarray
    counts: np.ndarray
    n_raters: int
    n_units_dropped: int


def unit_counts(
    data: pd.DataFrame,
    unit: str,
    rater: str,
    score: str,
    *,
    categories: Sequence[float] = DEFAULT_CATEGORIES,
    min_ratings: int = 1,
    row_offset: RowOffset = 0,
) -> UnitCounts:
    """Units rated at least ``min_ratings`` times and how many raters put each in each category.

    The same checks as :func:`ratings_matrix` (numeric scores within ``categories``, one rating per
    rater and unit), done on the long rows, so nothing of size units x raters is ever built.
    """
    categories = tuple(sorted(float(c) for c in categories))
    units, raters, values, positions = _scored_rows(data, unit, rater, score, categories, row_offset)
    if units.dtype.kind in "iu":  # task ids: sorting the ids is cheaper than hashing then sorting them
        unit_index, unit_codes = np.unique(units, return_inverse=True)
    else:
        unit_codes, unit_index = pd.factorize(units, sort=True)
    rater_codes, _ = pd.factorize(raters)
    _refuse_repeats(unit_codes, rater_codes, units, raters, positions, score, row_offset)
    q = len(categories)
    category_codes = np.searchsorted(np.asarray(categories), values)
    counts = np.bincount(unit_codes * q + category_codes, minlength=len(unit_index) * q).reshape(-1, q)
    rated = counts.sum(axis=1)
    kept = rated >= min_ratings
    n_dropped = int(((rated >= 1) & ~kept).sum())
    n_raters = int(np.unique(rater_codes[kept[unit_codes]]).size) if len(unit_codes) else 0
    return UnitCounts(np.asarray(unit_index)[kept], counts[kept].astype(np.int64), n_raters, n_dropped)


def category_counts(matrix: pd.DataFrame, categories: Sequence[float]) -> np.ndarray:
    """Units x categories: how many raters put each unit in each category."""
    values = matrix.to_numpy(dtype=float)
    return np.stack([(values == c).sum(axis=1) for c in categories], axis=1).astype(float)
