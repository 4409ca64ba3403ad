"""The harm model's design: its input checked and coded, separated levels found, rows collapsed to cells.

Every fixed effect is categorical (treatment coding against a reference level), the outcome is
0/1 and the group is one random intercept per reviewer; this module turns a frame into that
design (:func:`_build_design`), finds the levels whose annotations are all events or none
(:func:`_detect_separation`), and collapses rows to covariate-pattern-by-group cells
(:func:`_cells`) on which :class:`review_app.analysis.harm_model._Fit` evaluates the likelihood.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from review_app.analysis.harm_model_result import ALL_EVENTS, GIVEN, INTERCEPT, MOST_FREQUENT, NO_EVENTS
from review_app.analysis.layout import AnalysisInputError, RowOffset, is_text_dtype, require_columns, where


@dataclass(frozen=True)
class _Design:
    y: np.ndarray
    X: np.ndarray
    names: list[str]
    columns: list[str | None]
    levels: list[str | None]
    groups: np.ndarray
    n_groups: int
    reference: dict[str, str]
    warnings: list[str]
    dropped_rows: int
    reference_sources: dict[str, str] = field(default_factory=dict)
    factors: dict[str, np.ndarray] = field(default_factory=dict)  # column -> level per (complete) row


@dataclass(frozen=True)
class _Separation:
    terms: dict[int, str]  # design column -> why it is not estimable
    rows: np.ndarray  # rows that keep information once the separated levels are set aside
    warnings: list[str]


def _detect_separation(design: _Design, *, penalised: bool) -> _Separation:
    """Levels whose annotations are all 0 or all 1, found repeatedly until none is left.

    Setting a separated level's rows aside can leave another level without events among the rest
    (its other rows were all in the separated level), so the search repeats on the remaining rows.
    A separated reference level makes the intercept and every term of its column not estimable
    (each is a contrast against a level whose log-odds is infinite).
    """
    y = design.y
    rows = np.ones(len(y), dtype=bool)
    terms: dict[int, str] = {}
    warnings: list[str] = []
    index = {(c, lv): j for j, (c, lv) in enumerate(zip(design.columns, design.levels, strict=True)) if c is not None}
    outcome = "kept and given a finite estimate by the prior" if penalised else "reported as not estimable"
    changed = True
    while changed:
        changed = False
        for column, values in design.factors.items():
            for level in sorted(set(values[rows])):
                mask = rows & (values == level)
                n, events = int(mask.sum()), int(y[mask].sum())
                if 0 < events < n:
                    continue
                reason = NO_EVENTS if events == 0 else ALL_EVENTS
                counted = f"{events} of {n} annotation(s) are events"
                reference = design.reference.get(column)
                if level == reference:
                    why = f"the reference level {column} = {level} has {reason.replace('this level', 'it')}"
                    for j, c in enumerate(design.columns):
                        if (c == column or c is None) and j not in terms:
                            terms[j] = why
                    warnings.append(
                        f"separation: the reference level {column} = {level} has {counted}; the intercept and every "
                        f"{column} term are {outcome}; choose a reference level with and without events"
                    )
                elif (column, level) in index and index[(column, level)] not in terms:
                    terms[index[(column, level)]] = reason
                    warnings.append(
                        f"separation: {column} = {level}: {counted} ({reason}); its odds ratio against {reference} is "
                        f"{outcome}" + ("" if penalised else "; the other terms are estimated without its rows")
                    )
                else:
                    continue
                if not penalised:
                    rows &= ~mask
                    changed = True
        if penalised:
            break
    return _Separation(terms, rows, warnings)


_OUTCOME_WORDS = {"true": 1.0, "false": 0.0, "yes": 1.0, "no": 0.0}


def _outcome_number(value: object) -> object:
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower()
        return _OUTCOME_WORDS.get(text, text)
    return value


def _where(position: int, row_offset: RowOffset) -> str:
    """``line N`` of the file or ``row N`` (0-based) of a frame (see ``layout.where``)."""
    return where(position, row_offset)


def _outcome_values(series: pd.Series, name: str, positions: np.ndarray, row_offset: RowOffset) -> np.ndarray:
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.to_numpy(dtype=float)
    # Each distinct value is read once (an outcome column holds a few over 100,000s of rows); values that
    # compare equal (1, 1.0, True) read as the same number, so this is the cell-by-cell reading.
    codes, uniques = pd.factorize(series, use_na_sentinel=False)
    numbers = pd.to_numeric(pd.Series([_outcome_number(u) for u in uniques], dtype=object), errors="coerce")
    values = numbers.to_numpy(dtype=float)[codes]
    bad = np.isnan(values) | ~np.isin(values, [0.0, 1.0])
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise AnalysisInputError(
            f"outcome column {name!r} must hold 0/1 (or true/false): {_where(int(positions[first]), row_offset)} "
            f"holds {series.iloc[first]!r} ({int(bad.sum())} such value(s) in all)"
        )
    return values


def _default_reference(levels: np.ndarray, counts: np.ndarray) -> str:
    """The most frequent level (``counts`` rows of each of ``levels``), ties broken alphabetically."""
    top = counts.max()
    return sorted(str(level) for level, count in zip(levels, counts, strict=True) if count == top)[0]


def _sorted_text_codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """``pd.factorize(column.astype(str), sort=True)``'s codes and number of levels.

    A column of plain text (the reviewer names) is factorised as it is, converting nothing; other
    columns are converted to text cell by cell first, so that 1 and "1" are one level as ``astype(str)``
    makes them.
    """
    if is_text_dtype(column.dtype):
        codes, uniques = pd.factorize(column, sort=True)
        if all(type(u) is str for u in uniques):
            return codes.astype(np.int64), len(uniques)
    codes, uniques = pd.factorize(column.astype(str), sort=True)
    return codes.astype(np.int64), len(uniques)


def stripped_text(column: pd.Series) -> np.ndarray:
    """``column.astype(str).str.strip()`` as an object array, each distinct value converted once.

    The harm model's factor and group columns hold a handful of distinct texts over 100,000s of
    rows, so converting each distinct value once instead of every cell keeps a fit's preparation
    short. Columns that hold anything but text (where ``astype(str)`` is per value) are converted
    cell by cell.
    """
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    if not all(type(u) is str for u in uniques):
        return column.astype(str).str.strip().to_numpy(dtype=object)
    texts = np.asarray([u.strip() for u in uniques] or [""], dtype=object)
    return texts[codes] if len(codes) else np.asarray([], dtype=object)


def blank_text(frame: pd.DataFrame) -> np.ndarray:
    """Cells that are text and empty once stripped (rows x columns of ``frame``), as a boolean array.

    The same as ``frame.map(lambda v: isinstance(v, str) and not v.strip())``, deciding each distinct
    value of a text column once; a numeric column holds no text, a mixed one is decided cell by cell.
    """
    out = np.zeros(frame.shape, dtype=bool)
    for j in range(frame.shape[1]):
        column = frame.iloc[:, j]
        if pd.api.types.is_numeric_dtype(column.dtype) or len(column) == 0:
            continue  # numbers and booleans: never text
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        if all(type(u) is str or pd.isna(u) for u in uniques):
            out[:, j] = np.asarray([type(u) is str and not u.strip() for u in uniques], dtype=bool)[codes]
        else:
            out[:, j] = [isinstance(v, str) and not v.strip() for v in column]
    return out


def _build_design(
    data: pd.DataFrame,
    outcome: str,
    fixed: list[str],
    group: str,
    reference: dict[str, str],
    *,
    row_offset: RowOffset = 0,
) -> _Design:
    if not isinstance(data, pd.DataFrame):
        raise AnalysisInputError("the harm model needs a pandas DataFrame")
    if len(set(fixed)) != len(fixed):
        raise AnalysisInputError(f"a fixed-effect column is listed twice: {', '.join(fixed)}")
    for name in (outcome, group):
        if name in fixed:
            raise AnalysisInputError(f"column {name!r} cannot be both a fixed effect and the outcome or group")
    if outcome == group:
        raise AnalysisInputError(f"column {outcome!r} cannot be both the outcome and the group")
    require_columns(data, [outcome, *fixed, group], what="harm-model input")
    unknown = sorted(set(reference) - set(fixed))
    if unknown:
        raise AnalysisInputError(
            f"reference level given for {', '.join(map(repr, unknown))}, which is not a fixed-effect column "
            f"(fixed: {', '.join(fixed) or 'none'})"
        )
    warnings: list[str] = []
    used = data[[outcome, *fixed, group]]
    blank = pd.DataFrame(blank_text(used), index=used.index, columns=used.columns)
    complete = ~(used.isna() | blank).any(axis=1)
    dropped = int((~complete).sum())
    if dropped:
        warnings.append(f"dropped {dropped} row(s) with a missing outcome, fixed-effect or group value")
    frame = used.loc[complete]
    if frame.empty:
        raise AnalysisInputError("no complete rows: every row misses the outcome, a fixed effect or the group")
    positions = np.flatnonzero(complete.to_numpy())
    y = _outcome_values(frame[outcome], outcome, positions, row_offset)
    if y.min() == y.max():
        raise AnalysisInputError(
            f"outcome {outcome!r} has no variation (every one of {len(y)} rows is {int(y[0])}); "
            "there is nothing to model"
        )
    names, columns, levels, blocks = [INTERCEPT], [None], [None], [np.ones(len(frame))]
    chosen: dict[str, str] = {}
    sources: dict[str, str] = {}
    factors: dict[str, np.ndarray] = {}
    for column in fixed:
        values = stripped_text(frame[column])
        codes, uniques = pd.factorize(values)
        present = sorted(uniques)
        if column in reference:
            ref = str(reference[column]).strip()
            if ref not in present:
                raise AnalysisInputError(
                    f"unknown reference level {ref!r} for column {column!r}; levels present: {', '.join(present)}"
                )
            sources[column] = GIVEN
        else:
            ref = _default_reference(uniques, np.bincount(codes, minlength=len(uniques)))
            sources[column] = MOST_FREQUENT
        chosen[column] = ref
        factors[column] = values
        code_of = {level: k for k, level in enumerate(uniques)}
        if isinstance(data[column].dtype, pd.CategoricalDtype):
            empty = [str(c) for c in data[column].cat.categories if str(c) not in present]
            if empty:
                warnings.append(f"column {column}: level(s) {', '.join(empty)} have no rows and get no term")
        if len(present) == 1:
            warnings.append(f"column {column} has a single level ({ref}) and contributes no term")
        for level in present:
            if level == ref:
                continue
            names.append(f"{column}[{level}]")
            columns.append(column)
            levels.append(level)
            blocks.append((codes == code_of[level]).astype(float))
    X = np.column_stack(blocks)
    keep = _independent_columns(X)
    if len(keep) < X.shape[1]:
        aliased = [names[j] for j in range(X.shape[1]) if j not in keep]
        warnings.append(
            f"the fixed-effect design is rank deficient: dropped aliased term(s) {', '.join(aliased)} "
            "(their levels coincide with a combination of other terms)"
        )
        X = X[:, keep]
        names = [names[j] for j in keep]
        columns = [columns[j] for j in keep]
        levels = [levels[j] for j in keep]
    groups, n_groups = _sorted_text_codes(frame[group])
    return _Design(
        y=y,
        X=X,
        names=names,
        columns=columns,
        levels=levels,
        groups=groups,
        n_groups=n_groups,
        reference=chosen,
        warnings=warnings,
        dropped_rows=dropped,
        reference_sources=sources,
        factors=factors,
    )


def _row_patterns(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Code of each row's distinct values (its covariate pattern), and the first row of each pattern."""
    pattern = np.zeros(X.shape[0], dtype=np.int64)
    for j in range(X.shape[1]):
        codes, uniques = pd.factorize(X[:, j])
        pattern = pd.factorize(pattern * len(uniques) + codes)[0].astype(np.int64)
    first = np.unique(pattern, return_index=True)[1]
    return pattern, first


def _independent_columns(X: np.ndarray) -> list[int]:
    """Indices of a maximal set of linearly independent columns, keeping earlier columns first.

    The ranks are taken on X's distinct rows, each scaled by the square root of its count: that
    matrix has X's Gram matrix, so X's singular values (the rank test's numbers, against the same
    tolerance), with one row per covariate pattern instead of one per annotation.
    """
    pattern, first = _row_patterns(X)
    distinct = X[first]
    weighted = distinct * np.sqrt(np.bincount(pattern, minlength=len(first)))[:, None]
    keep: list[int] = []
    for j in range(X.shape[1]):
        trial = [*keep, j]
        tolerance = 1e-8 * max(1.0, np.abs(distinct[:, trial]).max())
        if np.linalg.matrix_rank(weighted[:, trial], tol=tolerance) == len(keep) + 1:
            keep.append(j)
    return keep


def _cells(
    y: np.ndarray, X: np.ndarray, groups: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows collapsed to cells of one covariate pattern and one group: (X, group, rows, events) per cell.

    Every fixed effect is categorical, so the linear predictor takes one value per cell and the
    Bernoulli log-likelihood of a cell's rows is ``events * eta - rows * log(1 + exp(eta))``: the
    likelihood, its gradient and its curvature depend on the data only through these counts. A
    study of 100,000 annotations by 200 reviewers has a few thousand cells, so every evaluation of
    the fit works on those instead of on the rows (the numbers are the same sums, added in another
    order).
    """
    pattern = _row_patterns(X)[0]
    _, first, inverse = np.unique(pattern * n_groups + groups, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rows = np.bincount(inverse).astype(float)
    events = np.bincount(inverse, weights=y)
    return X[first], groups[first], rows, events
