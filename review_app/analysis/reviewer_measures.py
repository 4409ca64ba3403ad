"""The per-reviewer measures a lead's quality report is built from: severity, shared-task pairs,
the drift test, time on task and gold accuracy.

Each reads the export's long annotation layout and returns numbers per reviewer (or per pair of
ratings); :func:`review_app.analysis.reviewer_quality.reviewer_quality` puts them into one table
with alerts. The choices behind each measure are in that module's docstring and in
``docs/methods.md`` (Reviewer quality and drift).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from review_app.analysis.agreement import weight_matrix
from review_app.analysis.harm_model_design import stripped_text
from review_app.analysis.harm_model_result import INTERCEPT, HarmModelResult
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.proportions import wilson
from review_app.analysis.study_harm_model import HarmModelSpec
from review_app.rubrics import get_rubric

PERIODS = ("first", "middle", "last")
MIN_DRIFT_TASKS = 15  # below this many shared tasks the CUSUM test is not run
# A walk observed at n points peaks lower than the continuous Brownian bridge; shifting the statistic
# by 0.5826 / sqrt(n) (Siegmund's correction for discrete boundary crossing) keeps the false-alarm
# rate at its nominal level for the series lengths of a review study (checked in the tests).
DISCRETE_CORRECTION = 0.5826
Z95 = stats.norm.ppf(0.975)


@dataclass(frozen=True)
class Severity:
    """Conditional modes of the reviewer intercepts (log-odds) and their conditional SDs."""

    modes: pd.DataFrame  # index: group; columns severity, sd, ci_low, ci_high, n
    result: HarmModelResult


# --- severity -----------------------------------------------------------------------------------


def conditional_modes(data: pd.DataFrame, result: HarmModelResult) -> pd.DataFrame:
    """Each group's random intercept (conditional mode) and conditional SD at the fitted estimates.

    ``data`` is the model's input (outcome, fixed-effect columns, group). The linear predictor is
    rebuilt from the fitted terms, then for each group the mode of ``sum(y eta - log(1 + e^eta)) -
    u^2 / 2`` with ``eta = x b + sigma u`` is found by Newton steps; the intercept is ``sigma u`` and
    its conditional SD ``sigma / sqrt(H)``, ``H = sigma^2 sum mu (1 - mu) + 1`` (Laplace).
    """
    if "in_model" in data:  # rows the fit left out (e.g. items without a clarity score)
        data = data.loc[data["in_model"].astype(bool)]
    used = data[[result.outcome, *result.fixed, result.group]]
    blank = np.column_stack([stripped_text(used[c]) == "" for c in used.columns]) if len(used) else False
    frame = used.loc[~(used.isna().to_numpy() | blank).any(axis=1)]
    # Under maximum likelihood a separated level has no finite estimate and its rows left the fit (they
    # carry no information about a reviewer: mu is 0 or 1 in the limit), so they leave here too. A term
    # that is only "not identifiable" once those rows are gone was aliased: its rows stayed in the fit
    # and its effect is carried by the other terms, so it contributes 0. A penalised fit keeps every
    # row and gives separated terms finite estimates, which are used as they are.
    intercept = result.term(INTERCEPT)
    if not math.isfinite(intercept.estimate):
        raise AnalysisInputError(
            f"severity needs an estimable intercept; {intercept.separation or 'it is not estimable'}: choose another "
            "reference level (Analysis page) or the penalised fit"
        )
    xb = np.full(len(frame), intercept.estimate)
    stripped: dict[str, np.ndarray] = {}
    for term in result.terms:
        if term.column is None:
            continue
        if term.column not in stripped:
            stripped[term.column] = stripped_text(frame[term.column])
        at_level = stripped[term.column] == term.level
        if math.isfinite(term.estimate):
            xb = xb + term.estimate * at_level
        elif not (term.separation or "").startswith("not identifiable"):
            xb = np.where(at_level, np.nan, xb)
    keep = ~np.isnan(xb)
    frame, xb = frame.loc[keep], xb[keep]
    y = pd.to_numeric(frame[result.outcome]).to_numpy(dtype=float)
    codes, groups = pd.factorize(frame[result.group].astype(str), sort=True)
    sigma = math.sqrt(result.group_variance)
    u = np.zeros(len(groups))
    for _ in range(100):
        mu = expit(xb + sigma * u[codes])
        grad = sigma * np.bincount(codes, weights=y - mu, minlength=len(groups)) - u
        curv = sigma**2 * np.bincount(codes, weights=mu * (1 - mu), minlength=len(groups)) + 1
        step = grad / curv
        u = u + step
        if np.max(np.abs(step), initial=0) < 1e-10:
            break
    mu = expit(xb + sigma * u[codes])
    curv = sigma**2 * np.bincount(codes, weights=mu * (1 - mu), minlength=len(groups)) + 1
    severity = sigma * u
    sd = sigma / np.sqrt(curv)
    return pd.DataFrame(
        {
            "severity": severity,
            "sd": sd,
            "ci_low": severity - Z95 * sd,
            "ci_high": severity + Z95 * sd,
            "n": np.bincount(codes, minlength=len(groups)),
        },
        index=pd.Index(groups, name=result.group),
    )


def reviewer_severity(
    data: pd.DataFrame, spec: HarmModelSpec | None = None, *, result: HarmModelResult | None = None
) -> Severity:
    """Every reviewer's severity in a harm model.

    ``data`` is the model's input table (:meth:`HarmModelSpec.data`); ``result`` the fit on it when
    the caller has it (the Analysis page's), otherwise it is fitted under ``spec`` (the paper's
    defaults when None; raises AnalysisInputError if it cannot be fitted).
    """
    if result is None:
        result = (spec or HarmModelSpec()).fit(data)
    return Severity(conditional_modes(data, result), result)


# --- periods, pairs and agreement ---------------------------------------------------------------


def work_periods(annotations: pd.DataFrame) -> pd.Series:
    """first / middle / last third of each reviewer's own annotations, by submission time."""
    order = annotations.sort_values(
        ["submitted_at", "annotation_id"] if "annotation_id" in annotations else "submitted_at"
    )
    rank = order.groupby(C.rater).cumcount()
    size = order.groupby(C.rater)[C.rater].transform("size")
    third = np.minimum((3 * rank.to_numpy()) // np.maximum(size.to_numpy(), 1), 2)
    return pd.Series(np.asarray(PERIODS, dtype=object)[third], index=order.index).reindex(annotations.index)


def _positions(values: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each score's index in the dimension's ``values`` (vectorised; a score off the scale raises KeyError)."""
    order = np.argsort(values, kind="stable")
    found = order[np.clip(np.searchsorted(values[order], scores), 0, len(values) - 1)]
    off = values[found] != scores
    if off.any():
        raise KeyError(float(scores[off][0]))
    return found


def pair_table(annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per reviewer and shared task: weighted agreement and signed difference with co-raters.

    Columns: rater, task_id, submitted_at (the reviewer's), agreement (mean ordinal weight over
    co-raters and dimensions), signed (mean of (co-rater - own) / (K - 1) over dimensions with an
    ordered 0..K-1 scale; NaN for the judge label), n_coraters.
    """
    records = []
    for rubric_key, rows in annotations.groupby(C.rubric, sort=True):
        rubric = get_rubric(str(rubric_key))
        shared = rows.loc[rows.groupby(C.task)[C.rater].transform("nunique") >= 2]
        if shared.empty:
            continue
        base = shared[[C.task, C.rater, "submitted_at", *rubric.dimension_keys]]
        pairs = base.merge(base, on=C.task, suffixes=("", "_co"))
        pairs = pairs.loc[pairs[C.rater] != pairs[f"{C.rater}_co"]]
        agree_parts, signed_parts = [], []
        for dimension in rubric.dimensions:
            own, co = pairs[dimension.key].to_numpy(), pairs[f"{dimension.key}_co"].to_numpy()
            valid = ~(np.isnan(own) | np.isnan(co))
            values = np.asarray(dimension.values, dtype=float)
            weights = weight_matrix(values, "ordinal")
            w = np.full(len(pairs), np.nan)
            if valid.any():
                i, j = _positions(values, own[valid]), _positions(values, co[valid])
                w[valid] = weights[i, j]
            agree_parts.append(w)
            if values.min() == 0 and np.array_equal(values, np.arange(len(values))):
                signed_parts.append(np.where(valid, (co - own) / (len(values) - 1), np.nan))
        with np.errstate(invalid="ignore"):
            pairs = pairs.assign(
                agreement=np.nanmean(np.vstack(agree_parts), axis=0) if agree_parts else np.nan,
                signed=np.nanmean(np.vstack(signed_parts), axis=0) if signed_parts else np.nan,
            )
        grouped = pairs.groupby([C.rater, C.task], sort=False)
        records.append(
            pd.DataFrame(
                {
                    "submitted_at": grouped["submitted_at"].first(),
                    "agreement": grouped["agreement"].mean(),
                    "signed": grouped["signed"].mean(),
                    "n_coraters": grouped[f"{C.rater}_co"].nunique(),
                }
            ).reset_index()
        )
    if not records:
        return pd.DataFrame(columns=[C.rater, C.task, "submitted_at", "agreement", "signed", "n_coraters"])
    return pd.concat(records, ignore_index=True).sort_values([C.rater, "submitted_at", C.task], ignore_index=True)


# --- drift ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DriftTest:
    """CUSUM of signed disagreement over one reviewer's shared tasks."""

    n: int
    statistic: float | None
    p_value: float | None
    direction: str | None  # "harsher" or "more lenient" after the change point
    change_at: int | None  # index (0-based) of the last task before the change
    path: np.ndarray

    def alarm(self, alpha: float) -> bool:
        return self.p_value is not None and self.p_value < alpha


def cusum_drift(signed: np.ndarray) -> DriftTest:
    """The retrospective CUSUM test on one reviewer's series (see the module notes)."""
    x = np.asarray(signed, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return DriftTest(0, None, None, None, None, np.zeros(0))
    path = np.cumsum(x - x.mean())
    sd = x.std(ddof=1) if n > 1 else 0.0
    if n < MIN_DRIFT_TASKS or sd <= 0:
        return DriftTest(n, None, None, None, None, path)
    statistic = float(np.max(np.abs(path)) / (sd * math.sqrt(n)))
    p_value = float(stats.kstwobign.sf(statistic + DISCRETE_CORRECTION / math.sqrt(n)))
    k = int(np.argmax(np.abs(path)))
    before, after = x[: k + 1], x[k + 1 :]
    direction = None
    if len(after):
        direction = "harsher" if after.mean() > before.mean() else "more lenient"
    return DriftTest(n, statistic, p_value, direction, k, path)


def drift_limit(alpha: float, n: int, sd: float) -> float:
    """The |CUSUM| at which the drift test of ``n`` tasks reaches false-alarm rate ``alpha`` (for charts)."""
    if n < 2:
        return 0.0
    return float((stats.kstwobign.isf(alpha) - DISCRETE_CORRECTION / math.sqrt(n)) * sd * math.sqrt(n))


# --- time on task and gold ----------------------------------------------------------------------


def time_on_task(annotations: pd.DataFrame) -> pd.DataFrame:
    """Per reviewer: median and quartiles of seconds, and counts outside the panel's Tukey fences."""
    seconds = annotations["seconds_on_task"].astype(float)
    logs = np.log(np.maximum(seconds.to_numpy(), 1.0))
    q1, q3 = np.percentile(logs, [25, 75]) if len(logs) else (0.0, 0.0)
    low, high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    frame = pd.DataFrame({C.rater: annotations[C.rater].to_numpy(), "seconds": seconds.to_numpy(), "log": logs})
    grouped = frame.groupby(C.rater)
    out = pd.DataFrame(
        {
            "median_seconds": grouped["seconds"].median(),
            "q1_seconds": grouped["seconds"].quantile(0.25),
            "q3_seconds": grouped["seconds"].quantile(0.75),
            "n_too_fast": (frame["log"] < low).groupby(frame[C.rater]).sum(),
            "n_too_slow": (frame["log"] > high).groupby(frame[C.rater]).sum(),
        }
    )
    out.attrs["fences_seconds"] = (float(math.exp(low)), float(math.exp(high)))
    return out


def gold_accuracy(gold_annotations: pd.DataFrame, expected: Mapping[int, Mapping[str, int]]) -> pd.DataFrame:
    """Per reviewer on gold tasks: tasks, scores compared, exact share (Wilson CI) and share within one."""
    rows = []
    for record in gold_annotations.itertuples(index=False):
        wanted = expected.get(int(getattr(record, C.task)), {})
        for dimension, value in wanted.items():
            given = getattr(record, dimension, np.nan)
            if given is None or (isinstance(given, float) and math.isnan(given)):
                continue
            rows.append(
                (getattr(record, C.rater), getattr(record, C.task), float(given) == value, abs(given - value) <= 1)
            )
    columns = ["gold_tasks", "gold_scores", "gold_accuracy", "gold_ci_low", "gold_ci_high", "gold_within_one"]
    if not rows:
        return pd.DataFrame(columns=columns, index=pd.Index([], name=C.rater))
    frame = pd.DataFrame(rows, columns=[C.rater, C.task, "exact", "within_one"])
    out = []
    for rater, part in frame.groupby(C.rater, sort=True):
        share = wilson(int(part["exact"].sum()), len(part))
        out.append(
            {
                C.rater: rater,
                "gold_tasks": int(part[C.task].nunique()),
                "gold_scores": len(part),
                "gold_accuracy": share.rate,
                "gold_ci_low": share.ci_low,
                "gold_ci_high": share.ci_high,
                "gold_within_one": float(part["within_one"].mean()),
            }
        )
    return pd.DataFrame(out).set_index(C.rater)
