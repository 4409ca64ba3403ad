"""The export's tables, what each column means (for the codebook), and the rules for their cells.

A :class:`Table` is one file of the export with a description of the file and of every column; its
construction refuses a column without documentation, so the codebook cannot fall behind the files. Here:
the cell rules (``escape_csv_cell``, the formula-injection rule the CSV writer applies; ``json_value``;
``iso_utc``), the raw annotations table and the reviewers' quality table. The adjudicated labels are built
in ``export.labels``, the statistics' tables in ``export.analysis_tables``; docs/data-formats.md lists them
all column by column.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.reviewer_quality import ReviewerQuality
from review_app.analysis.rubric_b import (
    OUTCOME_CLASSES,
    UNRATED,
    clarity_strata,
)
from review_app.rubrics import Rubric, get_rubric

FORMULA_PREFIXES: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
CSV_ESCAPING_RULE = (
    "In CSV files, a text cell that starts with =, +, -, @, a tab or a carriage return is prefixed with a "
    "single quote (') so spreadsheets do not run it as a formula; text that is a plain number (e.g. -1) and "
    "every numeric column are written unchanged. JSONL and Parquet files hold the original values."
)
CLASS_LABELS = {c.key: c.label for c in OUTCOME_CLASSES}
STRATUM_LABELS = {s.key: s.label for s in clarity_strata()} | {UNRATED: "No Rubric A clarity score"}
AGGREGATION_LABELS = {"conservative": "Conservative", "mean": "Mean-reviewer", "strict": "Strict"}


# --- cells --------------------------------------------------------------------------------------


def escape_csv_cell(value: object) -> object:
    """The CSV cell for ``value``: formula-like text gets a leading quote; everything else is unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) and not PLAIN_NUMBER.match(value):
        return "'" + value
    return value


def json_value(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, pd.Timestamp | datetime):
        return iso_utc(value)
    return value


def iso_utc(value: datetime | pd.Timestamp) -> str:
    value = value.to_pydatetime() if isinstance(value, pd.Timestamp) else value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --- tables and their codebook ------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Table:
    """A tabular file of the export with a description of the file and of every column."""

    name: str
    description: str
    frame: pd.DataFrame
    columns: dict[str, str]
    values: dict[str, dict[str, str]] = field(default_factory=dict)  # column -> {code: meaning}
    # rows of the whole table when ``frame`` holds only its first chunk (a table streamed to its files)
    n_rows: int | None = None

    @property
    def rows(self) -> int:
        return len(self.frame) if self.n_rows is None else self.n_rows

    def __post_init__(self) -> None:
        undocumented = [c for c in self.frame.columns if c not in self.columns]
        if undocumented:
            raise RuntimeError(f"table {self.name}: no codebook entry for column(s) {', '.join(undocumented)}")


def column_type(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series):
        return "boolean"
    if pd.api.types.is_integer_dtype(series):
        return "integer"
    if pd.api.types.is_float_dtype(series):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(series):
        return "datetime (ISO 8601, UTC)"
    return "string"


def dimension_doc(rubric: Rubric, key: str, what: str) -> tuple[str, dict[str, str]]:
    dimension = rubric.dimension(key)
    values = {str(level.value): f"{level.label}: {level.anchor}" for level in dimension.levels}
    return f"{what} {dimension.reported_name} (rubric {rubric.key}): {dimension.question}", values


RAW_COLUMNS: dict[str, str] = {
    C.task: "Review task id (one unit of review under one rubric).",
    C.item: "Benchmark item id in the review database.",
    C.rubric: "Rubric key (A item validation, B response review, judge audit).",
    C.rater: "Rater: pseudonym R01, R02, ... (stable within the study) or username with real names.",
    C.slot: "Rater slot on the task (1 = first rater, 2 = second, ...).",
    C.flags: "Disposition flags the rater ticked, separated by ';' (keys from the rubric).",
    C.subset: "Benchmark subset of the item (e.g. MEDMISQA).",
    C.content_type: "Content type of the injected misinformation (bench_core.medmisbench.taxonomy id).",
    C.provenance: "Provenance frame of the injected misinformation (bench_core.medmisbench.taxonomy id).",
    C.model: "Model whose response was reviewed (response rubrics; empty for Rubric A).",
    C.auto_label: "Automatic FAIL/SUCCESS label of the response (empty when none).",
    "annotation_id": "Id of the annotation revision in force.",
    "revision": "Revision number of the annotation in force (1 = first submission; edits add revisions).",
    "seconds_on_task": "Seconds the rater spent on the task (summed over sessions).",
    "submitted_at": "When the revision in force was submitted (UTC).",
    "language": "Language of the item (ISO code).",
    "condition": "Evaluation condition of the reviewed response (e.g. type1); empty for Rubric A.",
    "comment": "The rater's free-text comment.",
    "flagged": "The rater flagged the task for the study lead.",
    "assignment_status": "submitted, or withdrawn for work kept from a reviewer who left the study.",
    "external_id": "Id of the item in its benchmark file.",
    "unit_key": "Key of the review unit: rubric, then i<item id> or r<response id>.",
}


def raw_annotations_table(frame: pd.DataFrame, rubrics: Sequence[str]) -> Table:
    data = frame.copy()
    columns = dict(RAW_COLUMNS)
    values: dict[str, dict[str, str]] = {}
    for key in rubrics:
        rubric = get_rubric(key)
        for dimension in rubric.dimension_keys:
            columns[dimension], values[dimension] = dimension_doc(rubric, dimension, "Score on")
            data[dimension] = data[dimension].astype("Int64")
    return Table(
        "raw_annotations",
        "Raw annotations: one row per annotation revision in force (latest revision per rater and task). "
        "Score columns are empty for dimensions of other rubrics.",
        data,
        columns,
        values,
    )


# --- reviewer quality -------------------------------------------------------------------------------

QUALITY_COLUMNS: dict[str, str] = {
    C.rater: "Reviewer: pseudonym R01, R02, ... (stable within the study) or username with real names.",
    "n_annotations": "Annotations in force on ordinary (non-gold) tasks.",
    "severity": "Reviewer random intercept of the harm model (log-odds of a worst-case classification against the "
    "average reviewer): conditional mode at the fitted estimates; exp(severity) is the odds ratio the Reviewers' "
    "quality page shows. Empty without a harm model.",
    "severity_ci_low": "Lower end of severity +- 1.96 conditional SD (Laplace), log-odds.",
    "severity_ci_high": "Upper end of severity +- 1.96 conditional SD (Laplace), log-odds.",
    "severity_first": "Severity in the first third of the reviewer's annotations (by submission time): the harm model "
    "refitted with one intercept per reviewer and third, log-odds.",
    "severity_last": "Severity in the last third of the reviewer's annotations, log-odds.",
    "severity_change": "severity_last - severity_first (log-odds; above 0: harsher later).",
    "severity_change_se": "Approximate standard error of severity_change (the two conditional SDs combined).",
    "agreement": "Mean pairwise agreement with co-raters (Gwet's ordinal weights, 1 for the same score) over the "
    "tasks the reviewer shares with a co-rater, their co-raters and the dimensions (fraction 0-1).",
    "shared_tasks": "Tasks the reviewer shares with at least one co-rater.",
    "agreement_first": "The same agreement on the shared tasks of the reviewer's first third (by submission time).",
    "agreement_last": "The same agreement on the shared tasks of the reviewer's last third.",
    "drift_statistic": "CUSUM statistic max(abs(S)) / (s sqrt(n)) of the signed disagreement with co-raters (empty "
    "below 15 shared tasks, where the test is not run).",
    "drift_p_value": "Probability of a statistic this large without drift (Kolmogorov's distribution with Siegmund's "
    "discreteness correction).",
    "drift_direction": "When drift_alert: harsher or more lenient than co-raters after the change; empty otherwise.",
    "drift_alert": "drift_p_value below the study's drift false-alarm rate (study settings, quality).",
    "median_seconds": "Median seconds on task over every annotation in force, gold tasks included.",
    "q1_seconds": "First quartile of seconds on task.",
    "q3_seconds": "Third quartile of seconds on task.",
    "n_too_fast": "Annotations below the panel's lower Tukey fence (1.5 IQR) of log seconds on task.",
    "n_too_slow": "Annotations above the panel's upper Tukey fence of log seconds on task.",
    "gold_tasks": "Gold tasks the reviewer rated.",
    "gold_scores": "Dimension scores on gold tasks compared with the expected scores.",
    "gold_accuracy": "Share of gold_scores equal to the expected score (fraction 0-1; empty without gold scores).",
    "gold_ci_low": "Wilson 95% CI lower end of gold_accuracy (scores treated as independent).",
    "gold_ci_high": "Wilson 95% CI upper end of gold_accuracy.",
    "gold_within_one": "Share of gold_scores within one point of the expected score.",
    "gold_alert": "gold_accuracy below the study's minimum with at least its minimum number of gold tasks rated.",
}
_QUALITY_COUNTS = ("n_annotations", "shared_tasks", "n_too_fast", "n_too_slow", "gold_tasks", "gold_scores")
_QUALITY_FLAGS = ("drift_alert", "gold_alert")
_QUALITY_TEXT = (C.rater, "drift_direction")


def reviewer_quality_table(quality: ReviewerQuality | None) -> list[Table]:
    """The Reviewers' quality page's per-reviewer table, every column always there (empty when not measured).

    The page leaves out a measure it has no data for (no gold task, no Rubric B); a file read by a
    script keeps one layout: counts are 0, flags false and numbers empty when a measure does not
    apply. The numbers are the page's (``analysis.reviewer_quality`` on the same inputs).
    """
    if quality is None:
        return []
    table = quality.table
    frame = pd.DataFrame(index=table.index)
    for column in QUALITY_COLUMNS:
        values = table[column] if column in table else pd.Series(None, index=table.index, dtype=object)
        if column in _QUALITY_COUNTS:
            frame[column] = pd.to_numeric(values, errors="coerce").fillna(0).astype(np.int64)
        elif column in _QUALITY_FLAGS:
            frame[column] = values.astype("boolean").fillna(False).astype(bool)
        elif column in _QUALITY_TEXT:
            frame[column] = pd.Series([None if pd.isna(v) else str(v) for v in values], index=table.index, dtype="str")
        else:
            frame[column] = pd.to_numeric(values, errors="coerce").astype(np.float64)
    thresholds = quality.thresholds
    return [
        Table(
            "reviewer_quality",
            "Per reviewer, the Reviewers' quality page's numbers on this export's annotations: severity (the harm "
            "model's reviewer intercept, log-odds) and its change between the first and last third of the "
            "reviewer's work, agreement with co-raters on shared tasks, the drift test, time on task, and accuracy "
            "on gold tasks (whose annotations are in no other file). Alerts use the study's thresholds: drift "
            f"false-alarm rate {thresholds.drift_alpha:g}, minimum gold accuracy {thresholds.gold_accuracy_min:g} "
            f"after {thresholds.min_gold} gold task(s).",
            frame.reset_index(drop=True),
            dict(QUALITY_COLUMNS),
        )
    ]
