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
  page reports (:class:`~review_app.analysis.study_harm_model.StudyHarmModel`: the study's reference levels,
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

The measures themselves are :mod:`review_app.analysis.reviewer_measures`; this module combines them
into the report and its alerts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from review_app.analysis.harm_model_design import stripped_text
from review_app.analysis.harm_model_result import HarmModelResult
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import AnalysisInputError
from review_app.analysis.reviewer_measures import (
    cusum_drift,
    gold_accuracy,
    pair_table,
    reviewer_severity,
    time_on_task,
    work_periods,
)
from review_app.analysis.rubric_b import CLARITY
from review_app.analysis.study_harm_model import HARM_MODEL_GROUP, HarmModelSpec, StudyHarmModel

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


# --- the report -----------------------------------------------------------------------------------


def _fit_for_severity(annotations: pd.DataFrame, spec: HarmModelSpec) -> StudyHarmModel:
    """The harm model under ``spec`` when no caller supplied the study's (pure use, e.g. from a file)."""
    try:
        data = spec.data(annotations)
        return StudyHarmModel(spec, data, spec.fit(data))
    except (AnalysisInputError, np.linalg.LinAlgError) as error:
        return StudyHarmModel(spec, note=str(error))


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
