"""Inter-rater agreement per score: Gwet's AC1/AC2, Krippendorff's ordinal alpha, percent agreement.

Inputs are long (one row per rating: unit, rater, score) because review tasks are rated by a
changing pair of reviewers out of a panel (partial overlap) and some ratings are missing; only the
per-unit counts of each category enter the coefficients, so who rated what does not matter beyond
"one rating per rater and unit".

Choices that change the numbers, made once here:

* **Full category set.** Gwet's chance agreement and the ordinal/linear/quadratic weights depend on
  the *possible* categories, not the ones used; tools that infer them from the data (irrCAC unless
  told) silently change AC2 when nobody used a score. The categories are therefore always passed
  (default the rubric scale 0, 1, 2) and a score outside them is refused.
* **Units.** By default only units with at least two ratings enter (``min_ratings=2``), as the
  review protocol reports agreement "on dual-rated tasks"; the units set aside are counted
  (``n_units_dropped``: units with at least one rating but fewer than ``min_ratings``). Gwet's own
  formulas (and irrCAC) also use singly rated units for the category propensities; pass
  ``min_ratings=1`` to get his published numbers (raw4raters, ordinal AC2 0.89894).
* **Point estimate, SE and CI** are Gwet's, computed here as irrCAC 0.4.4's ``CAC.gwet`` computes
  them (its statements, run on the per-unit category counts, so memory grows with ratings, not
  units x raters): Gwet's linearisation variance of AC1/AC2, conditional on the raters and
  accounting for the sampling of units, with a Student-t interval on ``n_units - 1`` degrees of
  freedom (Gwet 2014, ch. 5). The coefficient cannot leave [-1, 1], so both ends of the interval
  are clipped to it (irrCAC caps only the upper end; with few units its lower end can fall below
  -1). irrCAC itself is not imported: it pins an old scientific stack and computes wrong numbers
  under pandas 3; ``tests/oracles/irrcac_oracle.py`` runs it in an environment of its own and the
  tests compare every coefficient, SE and CI with it.
* **Bootstrap CI** (optional, ``n_boot > 0``): units resampled with replacement, percentile interval,
  seeded; computed with a vectorised implementation of the same formula (checked against the above).
* **Krippendorff's alpha** is the ``krippendorff`` package's ordinal alpha (rank-based distances,
  Krippendorff 2011) with the value domain set to the categories. irrCAC's "Krippendorff's alpha
  with ordinal weights" is a different coefficient and is not used.
* **Percent agreement** is exact (unweighted) pairwise agreement averaged over units; the weighted
  version that enters AC2 is ``pa_weighted``.

The per-unit counts are read from the ratings in :mod:`review_app.analysis.agreement_counts`; the
results are :mod:`review_app.analysis.agreement_result`; ``docs/methods.md`` gives the formulas.
"""

from __future__ import annotations

import math
import warnings as _warnings
from collections.abc import Sequence
from dataclasses import replace

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats

from review_app.analysis.agreement_counts import DEFAULT_CATEGORIES, unit_counts
from review_app.analysis.agreement_result import AgreementReport, AgreementResult, _label
from review_app.analysis.layout import (
    DEFAULT_COLUMNS,
    AnalysisInputError,
    AnnotationColumns,
    RowOffset,
    require_columns,
    select_rubric,
)
from review_app.rubrics import Rubric, get_rubric

WEIGHT_SCHEMES: tuple[str, ...] = ("ordinal", "linear", "quadratic", "identity")
BINARY_CATEGORIES: tuple[int, ...] = (0, 1)


def weight_matrix(categories: Sequence[float], weights: str) -> np.ndarray:
    """Gwet's weight matrix for the full category set (rows and columns in category order).

    Gwet (2014, ch. 3): with categories sorted, ``identity`` is the unit matrix (AC1); ``linear`` is
    ``1 - |x_k - x_l| / (x_max - x_min)`` and ``quadratic`` ``1 - ((x_k - x_l) / (x_max - x_min))^2`` on the
    category values; ``ordinal`` uses ranks only: with ``n = |k - l| + 1``, ``1 - C(n, 2) / C(q, 2)``
    (1, 2/3, 0 on three categories). These are irrCAC's definitions (``irrCAC.weights``), checked
    against it by ``tests/oracles/irrcac_oracle.py``.
    """
    if weights not in WEIGHT_SCHEMES:
        raise AnalysisInputError(f"unknown weights {weights!r}; choose one of {', '.join(WEIGHT_SCHEMES)}")
    values = np.asarray(sorted(float(c) for c in categories), dtype=float)
    q = len(values)
    if weights == "identity":
        return np.eye(q)
    if weights == "ordinal":
        ranks = np.arange(q)
        n = np.abs(ranks[:, None] - ranks[None, :]) + 1
        dissimilarity = n * (n - 1) / 2
        return 1 - dissimilarity / dissimilarity.max()
    span = values.max() - values.min()
    distance = np.abs(values[:, None] - values[None, :]) / span
    return 1 - distance if weights == "linear" else 1 - distance**2


def gwet_coefficient(counts: np.ndarray, weights: np.ndarray, unit_weights: np.ndarray | None = None) -> float:
    """Gwet's AC1/AC2 from a units x categories count table (Gwet 2014, eq. 3.19 and 3.20).

    ``unit_weights`` multiplies each unit (a bootstrap resample is a vector of multiplicities), so
    the same code gives the point estimate and every bootstrap replicate.
    """
    q = counts.shape[1]
    r = counts.sum(axis=1)
    m = np.ones(len(counts)) if unit_weights is None else np.asarray(unit_weights, dtype=float)
    m = m * (r >= 1)
    two = (r >= 2) & (m > 0)
    weighted = counts @ weights.T
    with np.errstate(divide="ignore", invalid="ignore"):
        pa_unit = np.where(two, (counts * (weighted - 1)).sum(axis=1) / (r * (r - 1)), 0.0)
        share = np.where(r[:, None] > 0, counts / r[:, None], 0.0)
    pa = float((m * pa_unit).sum() / (m * two).sum())
    pi = (m[:, None] * share).sum(axis=0) / m.sum()
    pe = float(weights.sum() * (pi * (1 - pi)).sum() / (q * (q - 1)))
    return (pa - pe) / (1 - pe)


def _bootstrap(
    counts: np.ndarray, weights: np.ndarray, n_boot: int, seed: int, confidence: float
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    n = len(counts)
    replicates = np.empty(n_boot)
    chunk = max(1, min(n_boot, 2_000_000 // max(n, 1)))
    done = 0
    while done < n_boot:
        size = min(chunk, n_boot - done)
        multiplicity = rng.multinomial(n, np.full(n, 1 / n), size=size)
        for b in range(size):
            replicates[done + b] = gwet_coefficient(counts, weights, multiplicity[b])
        done += size
    tail = (1 - confidence) / 2
    low, high = np.nanquantile(replicates, [tail, 1 - tail])
    return _clip(float(low)), _clip(float(high))


def _clip(value: float) -> float:
    """Agreement coefficients live in [-1, 1]; so do their confidence limits."""
    return min(max(value, -1.0), 1.0)


def _exact_agreement(counts: np.ndarray) -> float | None:
    r = counts.sum(axis=1)
    two = r >= 2
    if not two.any():
        return None
    per_unit = (counts[two] * (counts[two] - 1)).sum(axis=1) / (r[two] * (r[two] - 1))
    return float(per_unit.mean())


def _alpha_ordinal(counts: np.ndarray, categories: Sequence[float], warnings: list[str]) -> float | None:
    """Krippendorff's ordinal alpha from per-unit value counts (the package's own ``value_counts`` input)."""
    if int((counts.sum(axis=0) > 0).sum()) < 2:
        warnings.append("Krippendorff's alpha is undefined: every rating has the same value (no expected disagreement)")
        return None
    try:
        with np.errstate(divide="ignore", invalid="ignore"):
            value = krippendorff.alpha(
                value_counts=counts,
                value_domain=[float(c) for c in categories],
                level_of_measurement="ordinal",
            )
    except ValueError as error:
        warnings.append(f"Krippendorff's alpha is undefined: {error}")
        return None
    return float(value) if np.isfinite(value) else None


def gwet_estimate(
    counts: np.ndarray, categories: Sequence[float], weights: str, confidence: float
) -> dict[str, object]:
    """Gwet's AC1/AC2 with its linearisation SE, p-value and Student-t CI, from a units x categories count table.

    Gwet (2014, ch. 5), for an infinite population of units (no finite-population correction) and
    rounded to 15 digits. The statements follow irrCAC 0.4.4's ``CAC(...).gwet()["est"]`` in its
    order, so the numbers are irrCAC's (``tests/oracles/irrcac_oracle.py`` compares them on many
    tables), except that the interval uses SciPy's current Student-t quantile, exact where the SciPy
    1.12 irrCAC pins erred by up to 8e-9 (relative). The units x raters table (tasks x reviewers:
    gigabytes with a large panel) is never built, and irrCAC is not needed at run time.
    """
    digits = 15
    q = len(categories)
    weights_mat = weight_matrix(categories, weights)
    agree_mat = np.zeros(shape=(len(counts), q))
    agree_mat[:, :] = counts
    n = len(agree_mat)
    f = 0.0
    agree_mat_w = np.transpose(np.matmul(weights_mat, agree_mat.T))
    ri_vec = agree_mat.sum(axis=1)
    sum_q = (agree_mat * (agree_mat_w - 1)).sum(axis=1)
    n2more = sum(ri_vec >= 2)
    pa = sum(sum_q[ri_vec >= 2] / (ri_vec * (ri_vec - 1))[ri_vec >= 2]) / n2more
    pi_vec = (np.repeat(1 / n, n).reshape(n, 1) * (agree_mat / np.repeat(ri_vec, q).reshape(n, q))).T.sum(axis=1)
    weights_mat_sum = np.sum(np.sum(weights_mat))
    pe = weights_mat_sum * sum(pi_vec * (1 - pi_vec)) / (q * (q - 1))
    ac1 = (pa - pe) / (1 - pe)
    den_ivec = ri_vec * (ri_vec - 1)
    den_ivec = den_ivec - (den_ivec == 0)
    pa_ivec = sum_q / den_ivec
    pe_r2 = pe * (ri_vec >= 2)
    ac1_ivec = (n / n2more) * (pa_ivec - pe_r2) / (1 - pe)
    pe_ivec = (weights_mat_sum / (q * (q - 1))) * np.matmul(agree_mat, (1 - pi_vec)) / ri_vec
    ac1_ivec_x = ac1_ivec - 2 * (1 - ac1) * (pe_ivec - pe) / (1 - pe)
    var_ac1 = (1 - f) / (n * (n - 1)) * sum((ac1_ivec_x - ac1) ** 2)
    stderr = np.sqrt(var_ac1)
    if stderr == 0.0:
        stderr = 1e-15
    p_value = 2 * (1 - stats.t.cdf(abs(ac1 / stderr), n - 1))
    lcb, ucb = stats.t.interval(confidence, df=n - 1, scale=stderr, loc=ac1)
    ucb = min(1, ucb)
    return {
        "pa": round(pa, digits),
        "pe": round(pe, digits),
        "se": round(stderr, digits),
        "coefficient_value": np.round(ac1, digits),
        "confidence_interval": (round(lcb, digits), round(ucb, digits)),
        "p_value": p_value,
    }


def agreement(
    data: pd.DataFrame,
    score: str,
    *,
    unit: str = DEFAULT_COLUMNS.task,
    rater: str = DEFAULT_COLUMNS.rater,
    weights: str = "ordinal",
    categories: Sequence[float] = DEFAULT_CATEGORIES,
    min_ratings: int = 2,
    confidence: float = 0.95,
    n_boot: int = 0,
    seed: int = 0,
    row_offset: RowOffset = 0,
) -> AgreementResult:
    """Agreement on ``score`` across units rated at least ``min_ratings`` times (see module notes)."""
    if weights not in WEIGHT_SCHEMES:
        raise AnalysisInputError(f"unknown weights {weights!r}; choose one of {', '.join(WEIGHT_SCHEMES)}")
    categories = tuple(sorted(float(c) for c in categories))
    if len(set(categories)) != len(categories) or len(categories) < 2:
        raise AnalysisInputError(f"categories must be at least two distinct values (got {categories})")
    if isinstance(min_ratings, bool) or int(min_ratings) != min_ratings or min_ratings < 1:
        raise AnalysisInputError(f"min_ratings must be a whole number of at least 1 (got {min_ratings})")
    if not 0.9 <= confidence <= 0.99:
        raise AnalysisInputError(f"confidence must lie in [0.90, 0.99] (got {confidence})")
    if n_boot < 0:
        raise AnalysisInputError(f"n_boot must not be negative (got {n_boot})")
    table = unit_counts(
        data, unit, rater, score, categories=categories, min_ratings=int(min_ratings), row_offset=row_offset
    )
    n_dropped = table.n_units_dropped
    counts = table.counts.astype(float)
    usage = {c: int(counts[:, k].sum()) for k, c in enumerate(categories)}
    warnings: list[str] = []
    empty = AgreementResult(
        score=score,
        weights=weights,
        categories=categories,
        n_units=len(counts),
        n_raters=table.n_raters,
        n_ratings=int(counts.sum()),
        coefficient=None,
        se=None,
        ci_low=None,
        ci_high=None,
        p_value=None,
        pa_weighted=None,
        pe=None,
        percent_agreement=None,
        alpha_ordinal=None,
        category_counts=usage,
        confidence=confidence,
        min_ratings=int(min_ratings),
        n_units_dropped=n_dropped,
    )
    if not (counts.sum(axis=1) >= 2).any():
        warnings.append(f"no unit has two or more ratings of {score!r}: agreement is undefined")
        return _with(empty, warnings=tuple(warnings))
    unused = [_label(c) for c, n in usage.items() if n == 0]
    if unused:
        warnings.append(f"score(s) {', '.join(unused)} never used; the full category set is kept for AC2")
    w = weight_matrix(categories, weights)
    coefficient = gwet_coefficient(counts, w)
    se = ci_low = ci_high = p_value = pa = pe = None
    if len(counts) >= 2:
        with _warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            _warnings.simplefilter("ignore", RuntimeWarning)
            est = gwet_estimate(counts, categories, weights, confidence)
        coefficient = float(est["coefficient_value"])
        se = float(est["se"]) if est["se"] > 1e-14 else 0.0
        ci_low, ci_high = (_clip(float(v)) for v in est["confidence_interval"])
        p_value = float(est["p_value"]) if se > 0 else None
        pa, pe = float(est["pa"]), float(est["pe"])
    else:
        warnings.append("only one unit: the standard error and confidence interval are undefined")
    boot = _bootstrap(counts, w, n_boot, seed, confidence) if n_boot and len(counts) >= 2 else None
    return _with(
        empty,
        coefficient=float(coefficient) if math.isfinite(coefficient) else None,
        se=se,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        pa_weighted=pa,
        pe=pe,
        percent_agreement=_exact_agreement(counts),
        alpha_ordinal=_alpha_ordinal(table.counts, categories, warnings),
        bootstrap_ci=boot,
        n_boot=n_boot if boot else 0,
        warnings=tuple(warnings),
    )


def _with(result: AgreementResult, **changes: object) -> AgreementResult:
    return replace(result, **changes)


def binary_agreement(
    data: pd.DataFrame,
    outcome: str,
    *,
    unit: str = DEFAULT_COLUMNS.task,
    rater: str = DEFAULT_COLUMNS.rater,
    min_ratings: int = 2,
    confidence: float = 0.95,
    n_boot: int = 0,
    seed: int = 0,
) -> AgreementResult:
    """Gwet's AC1 for a 0/1 outcome per rating (worst-case class, correct final answer, ...)."""
    return agreement(
        data,
        outcome,
        unit=unit,
        rater=rater,
        weights="identity",
        categories=BINARY_CATEGORIES,
        min_ratings=min_ratings,
        confidence=confidence,
        n_boot=n_boot,
        seed=seed,
    )


def agreement_report(
    annotations: pd.DataFrame,
    rubric: Rubric | str,
    *,
    columns: AnnotationColumns = DEFAULT_COLUMNS,
    weights: str = "ordinal",
    binary_outcomes: Sequence[str] = (),
    min_ratings: int = 2,
    confidence: float = 0.95,
    n_boot: int = 0,
    seed: int = 0,
) -> AgreementReport:
    """Agreement on every dimension of ``rubric`` (with its own categories) and on binary outcomes.

    ``binary_outcomes`` names 0/1 columns already in ``annotations`` (Rubric B's ``worst_case`` and
    ``correct`` from :func:`review_app.analysis.rubric_b.classify_annotations`), scored with AC1.
    """
    rubric = get_rubric(rubric) if isinstance(rubric, str) else rubric
    data = select_rubric(annotations, rubric.key, columns)
    require_columns(data, [columns.task, columns.rater, *rubric.dimension_keys, *binary_outcomes], what="annotations")
    results = [
        agreement(
            data,
            dimension.key,
            unit=columns.task,
            rater=columns.rater,
            weights=weights,
            categories=dimension.values,
            min_ratings=min_ratings,
            confidence=confidence,
            n_boot=n_boot,
            seed=seed,
        )
        for dimension in rubric.dimensions
    ]
    results.extend(
        binary_agreement(
            data,
            outcome,
            unit=columns.task,
            rater=columns.rater,
            min_ratings=min_ratings,
            confidence=confidence,
            n_boot=n_boot,
            seed=seed,
        )
        for outcome in binary_outcomes
    )
    return AgreementReport(rubric=rubric.key, results=tuple(results))
