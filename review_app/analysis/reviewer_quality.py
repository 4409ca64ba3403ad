"""Reviewer quality for study leads: severity, agreement with co-raters, time on task, drift, gold accuracy.

Everything here reads the export's long annotation layout (one row per annotation in force) and
returns numbers per reviewer; nothing is ever shown to reviewers (the service refuses anyone but a
lead). The measures, and the choices behind them:

* **Severity** is the reviewer's random intercept in the study's harm model (worst case ~ model +
  content type + provenance + clarity stratum + (1 | reviewer)), i.e. how much more often than an
  average reviewer they classify a response as worst case, on the log-odds scale. The value is the
  conditional mode of the intercept at the fitted estimates and its interval uses the conditional SD
  from the Laplace approximation (``sigma / sqrt(curvature)``), as ``lme4::ranef(condVar = TRUE)``
  gives them; both are computed here from the fitted coefficients. The fit is the one the Analysis
  page reports (:class:`~review_app.analysis.rubric_b.StudyHarmModel`: the study's reference levels,
  handling of items without a clarity score, penalty, and clarity strata from its own Rubric A
  scores); when the Analysis page has no harm model, there is no severity either.
* **Agreement with co-raters** is pairwise weighted agreement on shared tasks: for every task a
  reviewer shares, every co-rater and every dimension, the ordinal weight of the two scores (the
  weights of Gwet's AC2, 1 for the same score), averaged.
* **Time on task**: median and quartiles of seconds per annotation; outliers are annotations
  outside Tukey's fences (1.5 IQR) of the panel's log seconds, counted as too fast or too slow.
* **Drift** compares the first and the last third of each reviewer's work (by submission time):
  severity from the harm model refitted (same spec) with one intercept per reviewer and third, and agreement
  with co-raters. The drift *test* is a CUSUM of signed disagreement with co-raters: on each shared
  task ``d = mean over co-raters and dimensions of (co-rater score - own score) / (K - 1)``
  (positive: harsher than the co-raters). The chart is the cumulative sum of ``d - mean(d)``;
  the statistic ``max |S| / (s sqrt(n))`` is, without drift, distributed as the supremum of a
  Brownian bridge (Kolmogorov's distribution, with Siegmund's discreteness correction), so a
  lead's threshold is a false-alarm probability per reviewer rather than an arbitrary limit.
  The centring on the reviewer's own mean means a reviewer who is consistently stricter is
  reported by severity, not as drifting.
* **Gold accuracy**: on gold tasks (expected scores known from a consensus or an earlier
  adjudication), the share of dimension scores equal to the expected one (Wilson CI over scores)
  and the share within one point.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from review_app.analysis.agreement import weight_matrix
from review_app.analysis.harm_model import INTERCEPT, HarmModelResult, stripped_text
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.proportions import wilson
from review_app.analysis.rubric_b import CLARITY, HARM_MODEL_GROUP, HarmModelSpec, StudyHarmModel
from review_app.rubrics import get_rubric

PERIODS = ("first", "middle", "last")
MIN_DRIFT_TASKS = 15  # below this many shared tasks the CUSUM test is not run
# A walk observed at n points peaks lower than the continuous Brownian bridge; shifting the statistic
# by 0.5826 / sqrt(n) (Siegmund's correction for discrete boundary crossing) keeps the false-alarm
# rate at its nominal level for the series lengths of a review study (checked in the tests).
DISCRETE_CORRECTION = 0.5826
Z95 = stats.norm.ppf(0.975)
ALERTS_ONLY_NOTE = "severity not computed (alerts only)"  # the note of a report made with severity=False


@dataclass(frozen=True)
class QualityThresholds:
    """What the lead sets: when drift and gold accuracy raise an alert on the Progress page."""

    drift_alpha: float = 0.01  # false-alarm probability of the drift test, per reviewer
    gold_accuracy_min: float = 0.7  # alert below this share of gold scores matched
    min_gold: int = 5  # gold tasks a reviewer must have rated before the gold alert can fire

    def __post_init__(self) -> None:
        if not 0 < self.drift_alpha < 0.5:
            raise AnalysisInputError(f"the drift false-alarm rate must lie in (0, 0.5) (got {self.drift_alpha})")
        if not 0 <= self.gold_accuracy_min <= 1:
            raise AnalysisInputError(f"the gold accuracy threshold must lie in [0, 1] (got {self.gold_accuracy_min})")
        if int(self.min_gold) != self.min_gold or self.min_gold < 1:
            raise AnalysisInputError(
                f"the minimum number of gold tasks must be a whole number >= 1 (got {self.min_gold})"
            )

    def to_dict(self) -> dict[str, float | int]:
        return {"drift_alpha": self.drift_alpha, "gold_accuracy_min": self.gold_accuracy_min, "min_gold": self.min_gold}

    @classmethod
    def from_dict(cls, data: Mapping[str, object] | None) -> QualityThresholds:
        data = dict(data or {})
        defaults = cls()
        return cls(
            drift_alpha=float(data.get("drift_alpha", defaults.drift_alpha)),
            gold_accuracy_min=float(data.get("gold_accuracy_min", defaults.gold_accuracy_min)),
            min_gold=int(data.get("min_gold", defaults.min_gold)),
        )


@dataclass(frozen=True)
class Alert:
    rater: str
    kind: str  # "drift" or "gold"
    message: str


@dataclass(frozen=True)
class Severity:
    """Conditional modes of the reviewer intercepts (log-odds) and their conditional SDs."""

    modes: pd.DataFrame  # index: group; columns severity, sd, ci_low, ci_high, n
    result: HarmModelResult


@dataclass(frozen=True, eq=False)
class ReviewerQuality:
    """Per-reviewer quality table, CUSUM paths for the charts, alerts and notes."""

    table: pd.DataFrame
    cusum: dict[str, pd.DataFrame]
    alerts: tuple[Alert, ...]
    thresholds: QualityThresholds
    notes: tuple[str, ...] = ()
    panel: dict[str, float | None] = field(default_factory=dict)
    harm_model: HarmModelResult | None = None  # the fit severity was read from (the Analysis page's)

    def alerts_for(self, kind: str) -> list[Alert]:
        return [a for a in self.alerts if a.kind == kind]


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


def _fit_for_severity(annotations: pd.DataFrame, spec: HarmModelSpec) -> StudyHarmModel:
    """The harm model under ``spec`` when no caller supplied the study's (pure use, e.g. from a file)."""
    try:
        data = spec.data(annotations)
        return StudyHarmModel(spec, data, spec.fit(data))
    except (AnalysisInputError, np.linalg.LinAlgError) as error:
        return StudyHarmModel(spec, note=str(error))


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


# --- the report -----------------------------------------------------------------------------------


def _period_data(
    annotations: pd.DataFrame, periods: pd.Series, spec: HarmModelSpec, data: pd.DataFrame | None
) -> pd.DataFrame:
    """The harm model's input with one group per reviewer and third (``rater|period``).

    ``data``, the model's input on ``annotations`` (the study fit's), is the same table but for its
    rater column: renaming that column (by annotation id) gives the per-third table without building
    it again from the annotations (a second of a panel-scale report). Built from the annotations when
    ``data`` is None or cannot be matched row for row (no unique annotation ids, a blank rater, or no
    clarity column, which the study fit adds).
    """
    labels = annotations[C.rater].astype(str) + "|" + periods.astype(str)
    ids = annotations.get("annotation_id")
    usable = (
        data is not None
        and ids is not None
        and "annotation_id" in data
        and CLARITY in annotations
        and ids.is_unique
        and not (annotations[C.rater].isna() | (stripped_text(annotations[C.rater]) == "")).any()
    )
    if usable:
        by_id = pd.Series(labels.to_numpy(), index=ids.to_numpy())
        renamed = data["annotation_id"].map(by_id)
        if not renamed.isna().any():
            return data.assign(**{HARM_MODEL_GROUP: renamed.to_numpy(dtype=object)})
    return spec.data(annotations.assign(**{C.rater: labels}))


def _period_severity(
    annotations: pd.DataFrame, periods: pd.Series, spec: HarmModelSpec, data: pd.DataFrame | None = None
) -> tuple[pd.DataFrame | None, str | None]:
    """Severity of each reviewer in their first and last third: the study's harm model (same spec)
    refitted with one intercept per reviewer and third. ``data``: the study fit's input table."""
    try:
        severity = reviewer_severity(_period_data(annotations, periods, spec, data), spec)
    except (AnalysisInputError, np.linalg.LinAlgError) as error:
        return None, f"severity by period not computed: {error}"
    modes = severity.modes
    note = None
    if severity.result.group_variance == 0:
        note = (
            "severity by third of each reviewer's work: the harm model finds no variance between reviewer-thirds "
            "(every estimate is 0); differences between thirds are within chance"
        )
    split = modes.index.to_series().str.rsplit("|", n=1, expand=True)
    modes = modes.assign(rater=split[0].to_numpy(), period=split[1].to_numpy())
    first = modes.loc[modes["period"] == "first"].set_index("rater")
    last = modes.loc[modes["period"] == "last"].set_index("rater")
    joined = pd.DataFrame(
        {
            "severity_first": first["severity"],
            "severity_last": last["severity"],
            "severity_change": last["severity"] - first["severity"],
            "severity_change_se": np.sqrt(first["sd"] ** 2 + last["sd"] ** 2),
        }
    )
    return joined, note


def reviewer_quality(
    annotations: pd.DataFrame,
    *,
    harm: StudyHarmModel | HarmModelSpec | None = None,
    gold_annotations: pd.DataFrame | None = None,
    expected: Mapping[int, Mapping[str, int]] | None = None,
    thresholds: QualityThresholds | None = None,
    severity: bool = True,
) -> ReviewerQuality:
    """Every measure for every reviewer in ``annotations`` (and ``gold_annotations``), with alerts.

    ``severity=False`` leaves out the harm-model measures (severity and its change by third, the
    slow part): alerts need only drift and gold accuracy, so the Progress page's alerts are the same
    without the fits.

    ``harm`` is the study's harm model as the Analysis page fitted it on these annotations (the
    review app passes ``services.study_analysis.harm_model``'s), or only the spec to fit it under
    (None: the paper's defaults). The per-third severity refit uses the same spec.
    """
    thresholds = thresholds or QualityThresholds()
    notes: list[str] = []
    gold_annotations = gold_annotations if gold_annotations is not None else annotations.iloc[0:0]
    everyone = sorted(set(annotations[C.rater].astype(str)) | set(gold_annotations[C.rater].astype(str)))
    table = pd.DataFrame(index=pd.Index(everyone, name=C.rater))
    table["n_annotations"] = annotations.groupby(C.rater).size().reindex(table.index).fillna(0).astype(int)

    panel: dict[str, float | None] = {"agreement": None, "severity_sd": None}
    has_b = (annotations[C.rubric].astype(str) == "B").any() if not annotations.empty else False
    fitted = None
    if not severity:
        notes.append(ALERTS_ONLY_NOTE)
    elif has_b:
        if not isinstance(harm, StudyHarmModel):
            harm = _fit_for_severity(annotations, harm or HarmModelSpec())
        if harm.result is None or harm.data is None:
            notes.append(f"severity not computed: {harm.note or 'the harm model could not be fitted'}")
        else:
            try:
                severity = reviewer_severity(harm.data, harm.spec, result=harm.result)
            except (AnalysisInputError, np.linalg.LinAlgError) as error:
                notes.append(f"severity not computed: {error}")
            else:
                fitted = severity.result
                modes = severity.modes
                table["severity"] = modes["severity"]
                table["severity_ci_low"] = modes["ci_low"]
                table["severity_ci_high"] = modes["ci_high"]
                panel["severity_sd"] = severity.result.group_sd
                if severity.result.group_variance == 0:
                    notes.append(
                        "the harm model estimates no reviewer variance: nobody differs in severity beyond chance"
                    )
    else:
        notes.append("severity needs Rubric B annotations (the harm model); none yet")

    periods = work_periods(annotations) if not annotations.empty else pd.Series(dtype=object)
    if fitted is not None:
        by_period, note = _period_severity(annotations, periods, harm.spec, harm.data)
        if by_period is not None:
            table = table.join(by_period)
        if note:
            notes.append(note)

    pairs = pair_table(annotations) if not annotations.empty else pair_table(annotations.iloc[0:0])
    cusum: dict[str, pd.DataFrame] = {}
    if pairs.empty:
        notes.append("no task has two reviewers yet: agreement and drift need shared tasks")
    else:
        panel["agreement"] = float(pairs["agreement"].mean())
        table["agreement"] = pairs.groupby(C.rater)["agreement"].mean()
        table["shared_tasks"] = pairs.groupby(C.rater).size()
        task_period = (
            pd.Series(
                periods.to_numpy(),
                index=pd.MultiIndex.from_arrays([annotations[C.rater].to_numpy(), annotations[C.task].to_numpy()]),
            )
            if not annotations.empty
            else pd.Series(dtype=object)
        )
        keys = pd.MultiIndex.from_arrays([pairs[C.rater].to_numpy(), pairs[C.task].to_numpy()])
        pairs["period"] = task_period.reindex(keys).to_numpy()
        for period in ("first", "last"):
            table[f"agreement_{period}"] = pairs.loc[pairs["period"] == period].groupby(C.rater)["agreement"].mean()
        stats_rows = {}
        # Per reviewer, by positions into whole columns: slicing a sub-frame per reviewer and converting
        # its timestamps to objects cost most of the report's time without severity at 200 reviewers.
        signed_all = pairs["signed"].to_numpy(dtype=float)
        task_all = pairs[C.task].to_numpy()
        submitted_all = pairs["submitted_at"].array
        for rater, positions in pairs.groupby(C.rater, sort=True).indices.items():
            rows = positions[~np.isnan(signed_all[positions])]
            test = cusum_drift(signed_all[rows])
            stats_rows[rater] = {
                "drift_statistic": test.statistic,
                "drift_p_value": test.p_value,
                "drift_direction": test.direction if test.alarm(thresholds.drift_alpha) else None,
                "drift_alert": test.alarm(thresholds.drift_alpha),
            }
            if test.n:
                kept = rows[: test.n]
                cusum[str(rater)] = pd.DataFrame(
                    {
                        "task": np.arange(1, test.n + 1),
                        C.task: task_all[kept],
                        "submitted_at": submitted_all[kept],
                        "signed": signed_all[kept],
                        "cusum": test.path,
                    }
                )
        table = table.join(pd.DataFrame.from_dict(stats_rows, orient="index"))

    if not annotations.empty or not gold_annotations.empty:
        everything = (
            pd.concat([annotations, gold_annotations], ignore_index=True) if len(gold_annotations) else annotations
        )
        timing = time_on_task(everything)
        table = table.join(timing)
        panel["fast_below_seconds"], panel["slow_above_seconds"] = timing.attrs.get("fences_seconds", (None, None))

    if expected:
        table = table.join(gold_accuracy(gold_annotations, expected))
    for column in ("gold_tasks", "gold_scores", "shared_tasks", "n_too_fast", "n_too_slow"):
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").fillna(0).astype(int)
    if "drift_alert" in table:
        table["drift_alert"] = table["drift_alert"].astype("boolean").fillna(False).astype(bool)
    table["gold_alert"] = False
    if "gold_accuracy" in table:
        enough = table["gold_tasks"] >= thresholds.min_gold
        low = pd.to_numeric(table["gold_accuracy"], errors="coerce") < thresholds.gold_accuracy_min
        table["gold_alert"] = (enough & low).astype(bool)

    alerts = []
    for rater, row in table.iterrows():
        if bool(row.get("drift_alert", False)):
            alerts.append(
                Alert(
                    str(rater),
                    "drift",
                    f"{rater}: scores drifted ({row['drift_direction']} than co-raters later in their work; CUSUM "
                    f"p = {row['drift_p_value']:.3g} < {thresholds.drift_alpha:g})",
                )
            )
        if bool(row["gold_alert"]):
            alerts.append(
                Alert(
                    str(rater),
                    "gold",
                    f"{rater}: {row['gold_accuracy']:.0%} of gold scores matched over {int(row['gold_tasks'])} gold "
                    f"task(s), below {thresholds.gold_accuracy_min:.0%}",
                )
            )
    return ReviewerQuality(
        table=table.reset_index(),
        cusum=cusum,
        alerts=tuple(alerts),
        thresholds=thresholds,
        notes=tuple(notes),
        panel=panel,
        harm_model=fitted,
    )
