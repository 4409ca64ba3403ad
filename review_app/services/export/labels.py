"""The export's adjudicated labels tables: one row per task, each rating side by side, and the final value.

Built a chunk of tasks at a time (:class:`LabelsBuilder`), because the export streams these tables, the
largest it writes, from the database while its snapshot is open (see ``export.snapshot``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.rubric_b import (
    OUTCOME_CLASSES,
    classify,
)
from review_app.db.models import Adjudication
from review_app.rubrics import Rubric, get_rubric
from review_app.services.export.tables import Table, dimension_doc, iso_utc


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
    is built column by column (one array operation per column, not one Python record per task),
    because a labels table has a row per task and a study can have a million tasks.
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
            _, levels = dimension_doc(self.rubric, dim, "")
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
            columns[f"{dim}_{k}"] = dimension_doc(rubric, dim, f"Rating {k}: score on")[0]
        if rubric.key == "B":
            columns[f"outcome_class_{k}"] = f"Rating {k}: Rubric B outcome class of its scores."
    for dim in rubric.dimension_keys:
        columns[f"{dim}_final"] = dimension_doc(rubric, dim, "Final score on")[0]
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
