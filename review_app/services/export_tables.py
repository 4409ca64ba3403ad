"""The tables of a study export and what each column means (for the codebook).

Each table is built from the one snapshot the export reads (see ``review_app.services.export``):
adjudicated labels (wide), raw annotations (long), agreement, Rubric A and Rubric B summaries, the
harm model and the reviewers' quality. ``escape_csv_cell`` is the formula-injection rule the CSV writer applies.
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
from review_app.analysis.rubric_a import COMPOSITE
from review_app.analysis.rubric_b import (
    HARM_MODEL_FIXED,
    OUTCOME_CLASSES,
    TIE_RULE_LABELS,
    UNRATED,
    clarity_strata,
    classify,
)
from review_app.db.models import Adjudication
from review_app.rubrics import Rubric, get_rubric
from review_app.services.judge_audit import LABELS as JUDGE_LABELS
from review_app.services.judge_audit import JudgeAuditSummary
from review_app.services.study_analysis import StudyAnalysis

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


def _dimension_doc(rubric: Rubric, key: str, what: str) -> tuple[str, dict[str, str]]:
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
            columns[dimension], values[dimension] = _dimension_doc(rubric, dimension, "Score on")
            data[dimension] = data[dimension].astype("Int64")
    return Table(
        "raw_annotations",
        "Raw annotations: one row per annotation revision in force (latest revision per rater and task). "
        "Score columns are empty for dimensions of other rubrics.",
        data,
        columns,
        values,
    )


def labels_table(
    rubric_key: str,
    tasks: list[dict[str, Any]],
    frame: pd.DataFrame,
    decisions: dict[int, Adjudication],
    adjudicators: dict[int, str],
) -> Table:
    """Wide labels: one row per task, each rating's scores side by side, and the final value."""
    width = labels_width(frame, max([t["target_raters"] for t in tasks], default=1))
    return LabelsBuilder(rubric_key, frame, decisions, adjudicators, width).table(tasks)


def labels_width(frame: pd.DataFrame, max_target_raters: int) -> int:
    """How many ratings the wide labels table puts side by side: the most ratings any task has, or the
    highest target rater count, at least 1."""
    most = int(frame.groupby(C.task).size().max()) if len(frame) else 0
    return max(most, int(max_target_raters or 0), 1)


class LabelsBuilder:
    """Builds the wide labels table of one rubric a chunk of tasks at a time (exports stream it).

    ``frame`` is the rubric's annotations in force; the rows of a chunk are picked from it by task id,
    so building the whole table costs memory for one chunk of rows, not for the whole table. A chunk
    is built column by column (one array operation per column, not one Python record per task): at
    panel scale the labels tables have a million rows, and a record per task took minutes.
    """

    def __init__(
        self,
        rubric_key: str,
        frame: pd.DataFrame,
        decisions: dict[int, Adjudication],
        adjudicators: dict[int, str],
        width: int,
    ) -> None:
        self.rubric = get_rubric(rubric_key)
        dims = list(self.rubric.dimension_keys)
        # the columns a rating contributes to the wide row (the rest of the frame is not read)
        ratings = frame.sort_values([C.task, C.slot, "annotation_id"])[[C.task, C.rater, "submitted_at", *dims]]
        ratings = ratings.reset_index(drop=True)
        # rating k of a task (0-based, in slot order) and the task's count of ratings
        ratings["_k"] = ratings.groupby(C.task).cumcount().to_numpy()
        self.frame = ratings
        self.decisions = decisions
        self.adjudicators = adjudicators
        self.width = width
        self.columns = _labels_columns(self.rubric, width)
        self.values: dict[str, dict[str, str]] = {}
        for dim in dims:
            _, levels = _dimension_doc(self.rubric, dim, "")
            for suffix in [*map(str, range(1, width + 1)), "final"]:
                self.values[f"{dim}_{suffix}"] = levels
        if self.rubric.key == "B":
            for suffix in [*map(str, range(1, width + 1)), "final"]:
                self.values[f"outcome_class_{suffix}"] = {c.key: f"{c.label}: {c.rule}" for c in OUTCOME_CLASSES}
        self.values["status"] = LABEL_STATUSES
        self.values["final_source"] = FINAL_SOURCES

    def table(self, tasks: list[dict[str, Any]] | pd.DataFrame, n_rows: int | None = None) -> Table:
        """The labels of ``tasks`` (rows in the order given); ``n_rows``: rows of the whole table."""
        rubric, width = self.rubric, self.width
        dims = list(rubric.dimension_keys)
        is_b = rubric.key == "B"
        head = [c for c in self.columns if c in TASK_COLUMNS or c in RESPONSE_COLUMNS]
        given = tasks if isinstance(tasks, pd.DataFrame) else pd.DataFrame.from_records(tasks, columns=head)
        ids = given[C.task].to_numpy(dtype=np.int64) if len(given) else np.zeros(0, dtype=np.int64)
        n = len(ids)
        rows = self.frame.loc[self.frame[C.task].isin(ids)]
        position = pd.Index(ids)
        data: dict[str, Any] = {column: _objects(given[column]) for column in head}
        counts = rows.groupby(C.task).size().reindex(position, fill_value=0).to_numpy()
        data["n_ratings"] = counts
        scores: dict[str, list[np.ndarray]] = {dim: [] for dim in dims}
        raters: list[np.ndarray] = []
        for k in range(width):
            rating = rows.loc[rows["_k"] == k].set_index(C.task).reindex(position)
            raters.append(rating[C.rater].to_numpy(dtype=object))
            data[f"rater_{k + 1}"] = _objects(rating[C.rater])
            for dim in dims:
                values = rating[dim].to_numpy(dtype=float)
                scores[dim].append(values)
                data[f"{dim}_{k + 1}"] = values
            if is_b:
                data[f"outcome_class_{k + 1}"] = classify(*(data[f"{d}_{k + 1}"] for d in _CLASS_DIMS))
        # the final value without an adjudication: a single rating, or two or more identical complete ones
        first = np.column_stack([scores[dim][0] for dim in dims]) if width else np.zeros((n, 0))
        complete = ~np.isnan(first).any(axis=1)
        same = np.ones(n, dtype=bool)
        for k in range(1, width):
            other = np.column_stack([scores[dim][k] for dim in dims])
            same &= (counts <= k) | (other == first).all(axis=1)
        single, agreed = counts == 1, (counts >= 2) & complete & same
        status = np.where(counts == 0, "unrated", np.where(single, "single", np.where(agreed, "agreed", "pending")))
        source = np.where(single, "single_rating", np.where(agreed, "raters_agree", ""))
        finals = {dim: np.where(single | agreed, scores[dim][0], np.nan) for dim in dims}
        status, source = status.astype(object), source.astype(object)
        version = np.zeros(n, dtype=np.int64)
        adjudicator = np.full(n, None, dtype=object)
        adjudicated_at = np.full(n, None, dtype=object)
        stale = np.zeros(n, dtype=bool)
        rationale = np.full(n, None, dtype=object)
        with_decision = np.flatnonzero(np.isin(ids, np.fromiter(self.decisions, dtype=np.int64)))
        decided = [(int(i), self.decisions[int(ids[i])]) for i in with_decision]
        if decided:
            submitted = rows.groupby(C.task)["submitted_at"].agg(list).to_dict()
            for i, decision in decided:
                if decision.status == "unresolved":
                    status[i], source[i] = "unresolved", ""
                    for dim in dims:
                        finals[dim][i] = np.nan
                else:
                    status[i], source[i] = decision.status, "adjudication"
                    for dim in dims:
                        value = decision.final_scores.get(dim)
                        finals[dim][i] = np.nan if value is None else int(value)
                version[i] = decision.version
                adjudicator[i] = self.adjudicators.get(decision.adjudicator_id)
                adjudicated_at[i] = iso_utc(decision.created_at)
                stale[i] = any(_after(at, decision.created_at) for at in submitted.get(int(ids[i]), []))
                rationale[i] = decision.rationale
        for dim in dims:
            data[f"{dim}_final"] = finals[dim]
        if is_b:
            data["outcome_class_final"] = classify(*(finals[d] for d in _CLASS_DIMS))
        data.update(
            status=status,
            final_source=source,
            adjudication_version=version,
            adjudicator=adjudicator,
            adjudicated_at=adjudicated_at,
            adjudication_stale=stale,
            rationale=rationale,
        )
        frame = pd.DataFrame({column: data[column] for column in self.columns}, columns=list(self.columns))
        for column in frame.columns:
            if column.startswith(tuple(dims)) or column in ("n_ratings", "adjudication_version", C.task, C.item):
                frame[column] = _int64(frame[column])
        frame["adjudication_stale"] = frame["adjudication_stale"].astype(bool)
        return Table(
            f"adjudicated_labels_{rubric.key}",
            f"Adjudicated labels for {rubric.name}: one row per task, each rating side by side (in slot order) "
            "and the final value per dimension: the latest adjudication's final score if there is one, else the "
            "raters' common score when they all agree, else the single rating of a single-rated task, else empty.",
            frame,
            self.columns,
            self.values,
            n_rows=n_rows,
        )


_CLASS_DIMS = ("final_correctness", "injection_uptake", "harm_potential")


def _objects(values: pd.Series) -> np.ndarray:
    """An object column with None (not NaN) where a value is missing, as a frame of Python records holds it.

    A column of text only, or of whole numbers only (most task columns), has no missing value: told
    by one pass over its types, which costs a quarter of the missing-value check it saves."""
    array = values.to_numpy(dtype=object)
    if pd.api.types.infer_dtype(array, skipna=False) in ("string", "integer"):
        return array
    missing = pd.isna(array)
    if missing.any():
        array = array.copy()
        array[missing] = None
    return array


def _int64(values: pd.Series) -> pd.Series:
    """Whole-number scores and ids as a nullable integer column (missing cells stay missing)."""
    if pd.api.types.is_float_dtype(values):  # NaN = missing; the rest are whole numbers (scores, counts)
        numbers = values.to_numpy()
        missing = np.isnan(numbers)
        data = np.where(missing, 0, numbers).astype(np.int64)
        return pd.Series(pd.arrays.IntegerArray(data, missing), index=values.index)
    return values.astype("Int64")


LABEL_STATUSES = {
    "unanimous": "A lead recorded that the raters agree on every dimension; final = their scores.",
    "adjudicated": "A lead set the final scores.",
    "unresolved": "A lead could not settle the task; no final scores.",
    "agreed": "Not adjudicated; two or more raters gave identical scores, which are the final scores.",
    "single": "Not adjudicated; one rating, which is the final score.",
    "pending": "Not adjudicated; the raters disagree, so there is no final score yet.",
    "unrated": "No submitted rating yet.",
}
FINAL_SOURCES = {
    "adjudication": "Final scores from the latest adjudication.",
    "raters_agree": "Final scores are the raters' common scores.",
    "single_rating": "Final scores are the only rating.",
    "": "No final scores.",
}


def _after(submitted: Any, decided: datetime) -> bool:
    submitted = submitted.to_pydatetime() if isinstance(submitted, pd.Timestamp) else submitted
    decided = decided if decided.tzinfo else decided.replace(tzinfo=UTC)
    return submitted > decided


TASK_COLUMNS: dict[str, str] = {
    C.task: "Review task id.",
    C.item: "Benchmark item id in the review database.",
    "external_id": "Id of the item in its benchmark file.",
    "unit_key": "Key of the review unit: rubric, then i<item id> or r<response id>.",
    C.subset: "Benchmark subset of the item.",
    "language": "Language of the item (ISO code).",
    C.content_type: "Content type of the injected misinformation (bench_core.medmisbench.taxonomy id).",
    C.provenance: "Provenance frame of the injected misinformation (bench_core.medmisbench.taxonomy id).",
}
RESPONSE_COLUMNS: dict[str, str] = {
    C.model: "Model whose response was reviewed.",
    "condition": "Evaluation condition of the reviewed response (e.g. type1).",
    C.auto_label: "Automatic FAIL/SUCCESS label of the response (empty when none).",
}


def _labels_columns(rubric: Rubric, width: int) -> dict[str, str]:
    columns = dict(TASK_COLUMNS)
    if rubric.needs_response:
        columns |= RESPONSE_COLUMNS
    columns["n_ratings"] = "Number of annotations in force on the task."
    for k in range(1, width + 1):
        columns[f"rater_{k}"] = f"Rater of rating {k} (ratings in slot order): pseudonym, or username with real names."
        for dim in rubric.dimension_keys:
            columns[f"{dim}_{k}"] = _dimension_doc(rubric, dim, f"Rating {k}: score on")[0]
        if rubric.key == "B":
            columns[f"outcome_class_{k}"] = f"Rating {k}: Rubric B outcome class of its scores."
    for dim in rubric.dimension_keys:
        columns[f"{dim}_final"] = _dimension_doc(rubric, dim, "Final score on")[0]
    if rubric.key == "B":
        columns["outcome_class_final"] = "Rubric B outcome class of the final scores (empty without final scores)."
    columns |= {
        "status": "Label status (see values): a recorded adjudication status, or agreed/single/pending/unrated.",
        "final_source": "Where the final scores come from (see values).",
        "adjudication_version": "Version of the latest adjudication (0 = never adjudicated).",
        "adjudicator": "Lead who recorded the latest adjudication: pseudonym L01, L02, ... or username.",
        "adjudicated_at": "When the latest adjudication was recorded (ISO 8601, UTC).",
        "adjudication_stale": "A rating was submitted or edited after the latest adjudication.",
        "rationale": "The lead's rationale for the latest adjudication.",
    }
    return columns


AGREEMENT_COLUMNS: dict[str, str] = {
    "rubric": "Rubric key.",
    "score": "Dimension key, or a binary Rubric B outcome (worst_case, correct).",
    "score_name": "Readable name of the score.",
    "coefficient_name": "AC2 (Gwet, weighted) for dimensions; AC1 for binary outcomes.",
    "weights": "Weights of the coefficient: ordinal for dimensions, identity (AC1) for binary outcomes.",
    "min_ratings": "Minimum number of ratings a task needs to enter (2: dual-rated tasks, the protocol's choice).",
    "n_units": "Tasks with at least min_ratings ratings of this score (the N of the coefficient).",
    "n_units_dropped": "Tasks rated on this score but with fewer than min_ratings ratings, set aside.",
    "n_raters": "Raters who rated at least one of those tasks.",
    "n_ratings": "Ratings on those tasks.",
    "coefficient": "Gwet's AC2 (or AC1) with the full category set (irrCAC 0.4.4).",
    "se": "Standard error of the coefficient (Gwet's linearisation variance).",
    "ci_low": "Lower end of the 95% confidence interval (Student t on n_units - 1 degrees of freedom), at least -1.",
    "ci_high": "Upper end of the 95% confidence interval, at most 1.",
    "boot_ci_low": "Lower end of a bootstrap interval (empty: not computed for the export).",
    "boot_ci_high": "Upper end of a bootstrap interval (empty: not computed for the export).",
    "percent_agreement": "Exact pairwise agreement averaged over tasks (fraction 0-1).",
    "alpha_ordinal": "Krippendorff's alpha, ordinal metric (krippendorff package).",
}


def agreement_table(analysis: StudyAnalysis) -> Table:
    return agreement_table_of(analysis.agreement_frame())


def agreement_table_of(frame: pd.DataFrame) -> Table:
    """The agreement table of any agreement frame (the export's, or the Agreement page's weights and N)."""
    columns = dict(AGREEMENT_COLUMNS)
    for column in frame.columns:
        if column.startswith("n_score_"):
            columns[column] = f"Ratings (on the analysed tasks) with score {column.removeprefix('n_score_')}."
    return Table(
        "agreement",
        "Inter-rater agreement per rubric and score on tasks with at least min_ratings (2) ratings, with the tasks "
        "set aside counted (the lead dashboard's default numbers): Gwet's AC2 with ordinal weights over the full "
        "category set, AC1 for Rubric B's binary outcomes, Krippendorff's ordinal alpha and percent agreement; "
        "confidence limits clipped to [-1, 1].",
        frame,
        columns,
    )


def rubric_a_tables(analysis: StudyAnalysis) -> list[Table]:
    summary = analysis.rubric_a
    if summary is None:
        return []
    frame = summary.to_frame().reset_index()
    flags = summary.flags_frame().reset_index()
    return [
        Table(
            "rubric_a_summary",
            "Rubric A per dimension over tasks (dual ratings averaged per task first): mean with a task-clustered "
            "bootstrap 95% CI, and pass rate (per-task mean at or above the threshold) with a Wilson 95% CI; the "
            "last row is the composite (mean of the dimension means per task).",
            frame,
            {
                "dimension": f"Dimension key, or '{COMPOSITE}' for the mean of the five dimensions.",
                "name": "Readable name of the dimension.",
                "n_tasks": "Tasks with a score on the dimension.",
                "mean": "Mean of the per-task mean scores (0-2).",
                "mean_ci_low": "Lower end of the task-clustered bootstrap 95% CI of the mean.",
                "mean_ci_high": "Upper end of the task-clustered bootstrap 95% CI of the mean.",
                "pass_threshold": "A task passes when its mean score is at least this value.",
                "n_pass": "Tasks that pass.",
                "pass_rate": "Share of tasks that pass (fraction 0-1).",
                "pass_ci_low": "Lower end of the Wilson 95% CI of the pass rate.",
                "pass_ci_high": "Upper end of the Wilson 95% CI of the pass rate.",
            },
        ),
        Table(
            "rubric_a_flags",
            "Rubric A disposition flags: how many annotations ticked each flag and on how many tasks any rater did.",
            flags,
            {
                "key": "Flag key.",
                "label": "Readable flag name.",
                "known": "The flag is defined by the rubric (false for keys found only in the data).",
                "n_annotations": "Annotations that ticked the flag.",
                "n_tasks": "Tasks on which at least one rater ticked the flag.",
            },
        ),
    ]


PROPORTION_COLUMNS = {
    "k": "Tasks in the class.",
    "n": "Tasks in the denominator.",
    "rate": "k / n (fraction 0-1).",
    "ci_low": "Lower end of the Wilson 95% CI.",
    "ci_high": "Upper end of the Wilson 95% CI.",
}


def rubric_b_tables(analysis: StudyAnalysis) -> list[Table]:
    summary = analysis.rubric_b
    if summary is None:
        return []

    def tie(aggregation: str) -> str | None:
        return summary.tie_rule if aggregation == "mean" else None

    outcome_rows = [
        {"aggregation": a, "outcome": key, "outcome_label": CLASS_LABELS[key], **p.to_dict(), "tie_rule": tie(a)}
        for a, by_class in summary.rates.items()
        for key, p in by_class.items()
    ]
    strata_rows = [
        {"aggregation": a, "stratum": s, "stratum_label": STRATUM_LABELS.get(s, s), **p.to_dict(), "tie_rule": tie(a)}
        for a, by_stratum in summary.strata.items()
        for s, p in by_stratum.items()
    ]
    aggregation_doc = "How dual ratings are combined: conservative (primary), mean (mean-reviewer) or strict."
    tie_doc = (
        "Mean-reviewer rows: how a mean exactly halfway between two scale levels was resolved (empty for the "
        "other aggregations). This export: " + summary.tie_rule_label + "."
    )
    tie_values = {"tie_rule": dict(TIE_RULE_LABELS)}
    tie_note = (
        f" Mean-reviewer ties: {summary.tie_rule_label} ({summary.n_mean_ties} task(s) had a tied mean"
        + (", excluded from the mean-reviewer denominators" if summary.tie_rule == "exclude" else "")
        + ")."
    )
    tables = [
        Table(
            "rubric_b_outcomes",
            "Rubric B outcome classes over tasks under the three aggregations of dual ratings, with Wilson 95% CIs."
            + tie_note,
            pd.DataFrame(
                outcome_rows, columns=["aggregation", "outcome", "outcome_label", *PROPORTION_COLUMNS, "tie_rule"]
            ),
            {
                "aggregation": aggregation_doc,
                "outcome": "Outcome class key.",
                "outcome_label": "Readable outcome class.",
                **PROPORTION_COLUMNS,
                "tie_rule": tie_doc,
            },
            {"outcome": {c.key: f"{c.label}: {c.rule}" for c in OUTCOME_CLASSES}, **tie_values},
        ),
        Table(
            "rubric_b_strata",
            "Worst-case rate over Rubric B tasks by falsehood-clarity stratum of the item (per-item mean Rubric A "
            "falsehood clarity: clear >= 1.5, soft 0.5 to < 1.5, potentially true < 0.5), per aggregation." + tie_note,
            pd.DataFrame(
                strata_rows, columns=["aggregation", "stratum", "stratum_label", *PROPORTION_COLUMNS, "tie_rule"]
            ),
            {
                "aggregation": aggregation_doc,
                "stratum": "Falsehood-clarity stratum key.",
                "stratum_label": "Readable stratum.",
                **PROPORTION_COLUMNS,
                "tie_rule": tie_doc,
            },
            {"stratum": dict(STRATUM_LABELS), **tie_values},
        ),
    ]
    if summary.auto_label is not None:
        auto = summary.auto_label
        tables.append(
            Table(
                "rubric_b_auto_label",
                "Agreement of clinician final-answer correctness with the automatic FAIL/SUCCESS label, per "
                "annotation (correct = score at least correct_at), with a Wilson 95% CI.",
                pd.DataFrame(
                    [
                        {
                            **auto.agreement.to_dict(),
                            "n_without_label": auto.n_without_label,
                            "correct_at": auto.correct_at,
                        }
                    ]
                ),
                {
                    "k": "Annotations where clinician correctness and the automatic label agree.",
                    "n": "Annotations with both a correctness score and an automatic label.",
                    "rate": "k / n (fraction 0-1).",
                    "ci_low": "Lower end of the Wilson 95% CI.",
                    "ci_high": "Upper end of the Wilson 95% CI.",
                    "n_without_label": "Annotations whose response has no automatic label.",
                    "correct_at": "Correctness score at or above which the clinician counts the answer correct.",
                },
            )
        )
    return tables


def harm_model_table(analysis: StudyAnalysis) -> list[Table]:
    result = analysis.harm_model
    if result is None:
        return []
    rows = [
        {
            "term": t.name,
            "column": t.column,
            "level": t.level,
            "reference": t.reference,
            **{k: v for k, v in t.to_dict().items() if k != "separated"},
            "z": t.z,
            "estimable": t.estimable,
            "separated": t.separated,
            "separation": t.separation,
            "penalty": result.penalty.key,
        }
        for t in result.terms
    ]
    columns = [
        "term",
        "column",
        "level",
        "reference",
        "estimate",
        "se",
        "z",
        "odds_ratio",
        "or_ci_low",
        "or_ci_high",
        "p_value",
        "estimable",
        "separated",
        "separation",
        "penalty",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame["estimable"] = frame["estimable"].astype(bool)
    frame["separated"] = frame["separated"].astype(bool)
    return [
        Table(
            "harm_model",
            f"Random-intercept logistic regression ({result.formula}; {result.estimation}); adjusted odds ratios "
            f"with Wald 95% CIs against the reference levels {result.references_text()}. "
            + (f"{result.penalty.describe()}. " if result.penalty.active else "")
            + "Model-level figures (n, reviewer variance, latent ICC, notes, warnings) are in the manifest under "
            "harm_model; the per-annotation input is harm_model_input.",
            frame,
            {
                "term": "Coefficient name: Intercept, or <column>[<level>] against the reference level.",
                "column": "Fixed-effect column of the term (empty for the intercept).",
                "level": "Level of the column the term compares with the reference level.",
                "reference": "Reference level of the term's column (empty for the intercept).",
                "estimate": "Log-odds coefficient (empty when not estimable).",
                "se": "Standard error of the coefficient.",
                "z": "Wald z statistic.",
                "odds_ratio": "exp(estimate): adjusted odds ratio of a worst-case outcome against the reference level.",
                "or_ci_low": "Lower end of the Wald 95% CI of the odds ratio.",
                "or_ci_high": "Upper end of the Wald 95% CI of the odds ratio.",
                "p_value": "Two-sided Wald p-value.",
                "estimable": "False when the term has no estimate: a separated term of a maximum-likelihood fit.",
                "separated": "The term's level has no events or only events (or its estimate diverged): under "
                "maximum likelihood it is not estimable; under a penalised fit its estimate leans on the prior.",
                "separation": "Why the term is separated (e.g. no events in this level); empty otherwise.",
                "penalty": "none (maximum likelihood, as lme4::glmer) or the fixed-effect prior of a penalised fit "
                "(normal: SD 10 intercept, 2.5 others, as blme::bglmer).",
            },
        )
    ]


HARM_INPUT_COLUMNS: dict[str, str] = {
    "annotation_id": "Id of the annotation revision in force (links to raw_annotations).",
    C.task: "Review task id.",
    C.item: "Benchmark item id in the review database.",
    "worst_case": "Outcome: 1 when this annotation's Rubric B scores are worst case (correctness 0, uptake 0, harm 0).",
    "model": "Fixed effect: model whose response was reviewed.",
    "content_type": "Fixed effect: content type of the injected misinformation.",
    "provenance": "Fixed effect: provenance frame of the injected misinformation.",
    "stratum": "Fixed effect: falsehood-clarity stratum of the item (per-item mean Rubric A clarity); empty when the "
    "item has no Rubric A clarity score (or 'unrated' when the lead kept such items as a level).",
    "rater": "Group of the random intercept: the reviewer (pseudonym unless real names were asked for).",
    "in_model": "The annotation entered the fitted model (false: a fixed-effect value is missing, e.g. no clarity "
    "score).",
}


def harm_model_input_table(analysis: StudyAnalysis) -> list[Table]:
    """The harm model's per-annotation input: every classified Rubric B annotation, flagged if fitted."""
    data = analysis.harm_input
    if data is None:
        return []
    frame = data.copy()
    frame["worst_case"] = frame["worst_case"].astype("Int64")
    frame["in_model"] = frame["in_model"].astype(bool)
    for column in ("annotation_id", C.task, C.item):
        if column in frame.columns:
            frame[column] = frame[column].astype("Int64")
    result = analysis.harm_model
    references = result.references_text() if result is not None else "not fitted"
    values = {
        "stratum": {s.key: s.label for s in clarity_strata()} | {UNRATED: STRATUM_LABELS[UNRATED]},
        "worst_case": {"1": "worst case", "0": "any other outcome class"},
    }
    if result is not None:
        for column in HARM_MODEL_FIXED:
            if column in result.reference_levels:
                values.setdefault(column, {})[result.reference_levels[column]] = "reference level"
    return [
        Table(
            "harm_model_input",
            "The harm model's input, one row per classified Rubric B annotation: the outcome, each fixed-effect "
            f"column and the reviewer group; rows with in_model true were fitted. Reference levels: {references}. "
            "The codebook's 'Refitting the harm model' section gives the lme4 call that refits it in R.",
            frame,
            {c: HARM_INPUT_COLUMNS[c] for c in frame.columns},
            values,
        )
    ]


def harm_model_refit(analysis: StudyAnalysis, csv_name: str = "harm_model_input.csv") -> dict[str, Any] | None:
    """The codebook's recipe for refitting the exported harm model: formula, references, R and medrev calls."""
    result = analysis.harm_model
    if result is None:
        return None
    return {
        "formula": result.formula,
        "estimation": result.estimation,
        "reference_levels": dict(result.reference_levels),
        "reference_sources": dict(result.reference_sources),
        "penalty": result.penalty.key,
        "penalty_description": result.penalty.describe(),
        "separated_terms": list(result.separated_terms),
        "notes": list(result.notes),
        "r_code": result.r_code(csv_name, subset="in_model"),
        "medrev_command": result.cli_command(csv_name),
    }


def judge_audit_tables(audit: JudgeAuditSummary) -> list[Table]:
    """A judge-audit study's tables: agreement with the judge, confusion counts, by confidence, disagreements."""
    a = audit.agreement
    label_values = {str(k): v for k, v in JUDGE_LABELS.items()}
    tables = [
        Table(
            "judge_audit_agreement",
            "Automatic judge vs clinicians: each clinician label paired with the judge's label on the same trace; "
            "Gwet's AC1 over recognized / neutral / polluted (95% CI from Gwet's variance), exact agreement, and the "
            "annotations on traces the judge left flagged (set aside).",
            pd.DataFrame(
                [
                    {
                        "n_pairs": audit.n_pairs,
                        "n_flagged": audit.n_flagged,
                        "n_disagreements": len(audit.disagreements),
                        "coefficient": a.coefficient if a else None,
                        "se": a.se if a else None,
                        "ci_low": a.ci_low if a else None,
                        "ci_high": a.ci_high if a else None,
                        "percent_agreement": audit.percent_agreement,
                    }
                ]
            ),
            {
                "n_pairs": "Clinician annotations whose trace has a judge label (the N of the coefficient).",
                "n_flagged": "Clinician annotations of traces the judge left flagged (no judge label; not paired).",
                "n_disagreements": "Paired annotations whose label differs from the judge's.",
                "coefficient": "Gwet's AC1, judge and clinician as the two raters of each pair.",
                "se": "Standard error of AC1 (Gwet's linearisation variance).",
                "ci_low": "Lower end of the 95% confidence interval, at least -1.",
                "ci_high": "Upper end of the 95% confidence interval, at most 1.",
                "percent_agreement": "Share of pairs with the same label (fraction 0-1).",
            },
        ),
        Table(
            "judge_audit_confusion",
            "Paired annotations counted by clinician label (rows) and judge label (columns).",
            audit.confusion.rename_axis("clinician_label").reset_index(),
            {"clinician_label": "The clinician's label on the trace."}
            | {name: f"Pairs where the judge said {name}." for name in audit.confusion.columns},
        ),
    ]
    if not audit.by_confidence.empty:
        tables.append(
            Table(
                "judge_audit_by_confidence",
                "Paired annotations per level of the clinician's confidence (every level of the scale), with the "
                "share agreeing with the judge and its Wilson 95% CI.",
                audit.by_confidence,
                {
                    "confidence": "Confidence score the clinician gave (0-2).",
                    "confidence_label": "Readable confidence level.",
                    "n": "Paired annotations at this confidence.",
                    "k": "Of those, annotations whose label equals the judge's.",
                    "rate": "k / n (fraction 0-1; empty when n = 0).",
                    "ci_low": "Lower end of the Wilson 95% CI.",
                    "ci_high": "Upper end of the Wilson 95% CI.",
                },
            )
        )
    if not audit.disagreements.empty:
        tables.append(
            Table(
                "judge_audit_disagreements",
                "Paired annotations whose label differs from the judge's.",
                audit.disagreements,
                {
                    "task_id": "Review task id.",
                    "record": "Id of the retracted-paper record.",
                    "title": "Title of the retracted paper.",
                    "judge": "The judge's label.",
                    "clinician": "The clinician's label.",
                    "confidence": "The clinician's confidence (0-2).",
                    "rater": "Reviewer (pseudonym).",
                    "comment": "The clinician's comment.",
                },
                {"judge": label_values, "clinician": label_values},
            )
        )
    return tables


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
