"""The disagreement queue of a study and the view of one task for adjudication.

**Queue order.** A lead's time goes first to the disagreements that change a paper's headline
numbers: a task where one rater's Rubric B annotation is in the worst-case outcome class and
another's is not (classes from :mod:`review_app.analysis.rubric_b`, so the queue and the analysis
cannot disagree about what "worst case" means), or where two raters are two points apart on a
dimension (0 vs 2 on a 0-2 scale). Other disagreements (one point apart, or different but
not worst-case outcome classes) come next; unanimous tasks last, and only when asked for.

How ratings compare is :mod:`review_app.services.rating_comparison`; recording a decision (versions,
statuses, the rules a decision must meet) is :mod:`review_app.services.adjudication_decisions`.

Raters appear under the study's pseudonyms (R01, R02, ...) unless the caller asks for names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

import pandas as pd
from sqlalchemy import Engine
from sqlmodel import select

from review_app.analysis.formatting import MISSING  # a score nobody gave, as every lead table shows it
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.db.engine import read_session
from review_app.db.models import Adjudication, Item, ModelResponse, Reviewer, Study, Task
from review_app.rubrics import get_rubric
from review_app.services import compute_workers
from review_app.services.actors import LEAD_ROLES, SYSTEM, Actor, acting_actor, acting_user, as_actor
from review_app.services.adjudication_decisions import (
    AdjudicationRecord,
    as_record,
    is_stale,
    latest_adjudications,
    lead_names,
    require_adjudicating_lead,
)
from review_app.services.annotations import get_study_row, load_annotations, study_rubrics
from review_app.services.errors import InvalidInput, NotFound
from review_app.services.rating_comparison import Comparison, Rating, compare, ratings_by_task, score_text
from review_app.services.study_cache import CACHE
from review_app.services.study_frames import study_frame, study_rater_labels
from review_app.services.task_material import TaskMaterial, material

QUEUE_COLUMNS: tuple[str, ...] = (
    "task_id",
    "rubric",
    "item_id",
    "unit_key",
    "subset",
    "language",
    "priority",
    "priority_label",
    "n_ratings",
    "raters",
    "reasons",
    "worst_case_mismatch",
    "max_difference",
    "differing",
    "outcome_classes",
    "unanimous",
    "needs_adjudication",
    "locked",
    "status",
    "version",
    "stale",
    "summary",
)
PRIORITY_LABELS: dict[int, str] = {
    0: "worst-case class mismatch or 2-point difference",
    1: "other disagreement",
    2: "unanimous",
}
# The same three priorities in a word, for a table column too narrow for PRIORITY_LABELS.
PRIORITY_SHORT_LABELS: dict[int, str] = {0: "high", 1: "normal", 2: "unanimous"}


@dataclass(frozen=True)
class QueueEntry:
    """One task in the disagreement queue with its current adjudication state."""

    task_id: int
    rubric: str
    item_id: int
    unit_key: str
    subset: str
    language: str
    raters: tuple[str, ...]
    comparison: Comparison
    needs_adjudication: bool  # a rater ticked "needs adjudication" or flagged the task
    locked: bool
    status: str | None  # latest adjudication status, None when not adjudicated
    version: int  # latest adjudication version, 0 when none (pass as expected_version)
    stale: bool  # a rating changed after the latest adjudication

    @property
    def priority(self) -> int:
        return self.comparison.priority

    @property
    def summary(self) -> str:
        """:meth:`~rating_comparison.Comparison.summary`, "unanimous" for a unanimous task, :data:`MISSING`
        when nothing differs."""
        return self.comparison.summary() or ("unanimous" if self.comparison.unanimous else MISSING)

    def to_dict(self) -> dict[str, Any]:
        """A flat row for tables: the comparison's fields inline, tuples joined with ``;``."""
        c = self.comparison
        return {
            "task_id": self.task_id,
            "rubric": self.rubric,
            "item_id": self.item_id,
            "unit_key": self.unit_key,
            "subset": self.subset,
            "language": self.language,
            "priority": self.priority,
            "priority_label": PRIORITY_LABELS[self.priority],
            "n_ratings": c.n_ratings,
            "raters": ";".join(self.raters),
            "reasons": "; ".join(c.reasons),
            "worst_case_mismatch": c.worst_case_mismatch,
            "max_difference": c.max_difference,
            "differing": ";".join(c.differing),
            "outcome_classes": ";".join(k or "" for k in c.outcome_classes),
            "unanimous": c.unanimous,
            "needs_adjudication": self.needs_adjudication,
            "locked": self.locked,
            "status": self.status,
            "version": self.version,
            "stale": self.stale,
            "summary": self.summary,
        }


@dataclass(frozen=True)
class AdjudicationView:
    """Everything the adjudication page shows for one task."""

    task_id: int
    study: str
    rubric: str
    unit_key: str
    locked: bool
    dimensions: tuple[str, ...]
    material: TaskMaterial
    ratings: tuple[Rating, ...]
    comparison: Comparison
    latest: AdjudicationRecord | None
    history: tuple[AdjudicationRecord, ...]
    stale: bool

    @property
    def expected_version(self) -> int:
        """The version to pass to :func:`~adjudication_decisions.adjudicate` to record a decision from this view."""
        return self.latest.version if self.latest else 0

    def ratings_frame(self) -> pd.DataFrame:
        """Dimensions as rows, raters as columns (the side-by-side table), plus the final value."""
        data = {r.rater: [r.scores.get(d) for d in self.dimensions] for r in self.ratings}
        if self.latest is not None:
            data["final"] = [self.latest.final_scores.get(d) for d in self.dimensions]
        return pd.DataFrame(data, index=pd.Index(self.dimensions, name="dimension"))

    def ratings_table(self) -> pd.DataFrame:
        """:meth:`ratings_frame` as a lead reads it: one row per dimension under the rubric's name for it,
        a column per rater and one for the latest decision, every value with its anchored label
        ("0 (Neutral)") and :data:`MISSING` where there is none, so nobody decodes a scale to decide."""
        rubric = get_rubric(self.rubric)
        dimensions = [rubric.dimension(key) for key in self.dimensions]
        data = {"Dimension": [d.reported_name for d in dimensions]}
        for rating in self.ratings:
            data[rating.rater] = [score_text(d, rating.scores.get(d.key)) for d in dimensions]
        if self.latest is not None:
            header = f"Final (version {self.latest.version}, {self.latest.status})"
            data[header] = [score_text(d, self.latest.final_scores.get(d.key)) for d in dimensions]
        return pd.DataFrame(data)


# --- the queue and the view --------------------------------------------------------------------


class QueueOptions(TypedDict, total=False):
    """Which tasks a disagreement queue holds and how it names raters (defaults in :func:`disagreement_queue_head`)."""

    include_unanimous: bool
    open_only: bool
    pseudonymise: bool


def disagreement_queue(
    engine: Engine, study_name: str, rubric: str, *, actor: Actor = SYSTEM, **options: Unpack[QueueOptions]
) -> list[QueueEntry]:
    """Tasks of ``rubric`` with two or more ratings, most consequential disagreements first.

    Order: priority (see :attr:`~rating_comparison.Comparison.priority`), then worst-case mismatches before 2-point
    differences, larger and more widespread differences first, tasks a rater sent to the lead
    first, then task id. ``include_unanimous`` appends the unanimous tasks (priority 2);
    ``open_only`` drops tasks whose latest decision is ``adjudicated`` or ``unanimous`` and still
    matches the ratings (unresolved and stale decisions stay in the queue).

    The queue is built from the study's shared annotations frame and cached with it per data
    version (``services.study_cache``: a submit, an edit or a decision moves the version; built in a
    compute worker, ``services.compute_workers``), so a
    page rerun does not rebuild it; only the task locks (changed in place, not part of the data
    version) are read on every call, in one indexed query. Only for a lead of the study or an admin
    (``actor``), as :func:`disagreement_queue_head`.
    """
    return list(disagreement_queue_head(engine, study_name, rubric, limit=None, actor=actor, **options).entries)


@dataclass(frozen=True)
class QueueHead:
    """The most urgent tasks of a disagreement queue and how many tasks the whole queue holds."""

    entries: tuple[QueueEntry, ...]
    total: int


def disagreement_queue_head(
    engine: Engine,
    study_name: str,
    rubric: str,
    *,
    include_unanimous: bool = False,
    open_only: bool = False,
    pseudonymise: bool = True,
    limit: int | None = 500,
    actor: Actor = SYSTEM,
) -> QueueHead:
    """The first ``limit`` tasks of :func:`disagreement_queue` (all with None) and the queue's length.

    The adjudication page shows the most urgent few hundred of a queue that has tens of thousands
    of tasks at panel scale; the queue is built in the compute worker and only its head is sent to
    and kept in the app (the whole queue held 80 MB of the app's memory at 200,000 annotations).
    ``actor`` must lead the study (or be an admin), checked before the cached queue is read.
    """
    if limit is not None and (isinstance(limit, bool) or limit < 0):
        raise InvalidInput(f"limit must be a whole number of tasks, 0 or more (got {limit})")
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        require_adjudicating_lead(session, as_actor(actor), study)
        (key,) = study_rubrics(study, rubric)
        locked = set(session.exec(select(Task.id).where(Task.study_id == study.id, Task.rubric == key, Task.locked)))
    head = CACHE.get(
        engine,
        study_name,
        ("disagreement_queue", key, bool(include_unanimous), bool(open_only), bool(pseudonymise), limit),
        lambda version: compute_workers.run(
            engine, _queue, study_name, key, version, include_unanimous, open_only, pseudonymise, limit
        ),
        reads_database=True,
    )
    entries = tuple(replace(e, locked=True) if e.task_id in locked else e for e in head.entries)
    return QueueHead(entries, head.total)


def _queue(
    engine: Engine,
    study_name: str,
    key: str,
    version: tuple[int, ...],
    include_unanimous: bool,
    open_only: bool,
    pseudonymise: bool,
    limit: int | None = None,
) -> QueueHead:
    """The first ``limit`` entries (all with None) of :func:`disagreement_queue` for one data version,
    every task shown unlocked, and the queue's length.

    A compute-worker job (``services.compute_workers``): the frame is read and kept there, and only
    the head is sent back to the app.
    """
    rubric_def = get_rubric(key)
    frame = study_frame(engine, study_name, pseudonymise=pseudonymise, version=version)
    frame = frame.loc[frame[C.rubric].astype(str) == key]
    # Tasks with two or more ratings only (a quarter of a panel-scale study's units): the others never
    # enter the queue, and turning their rows into ratings was most of the queue's build.
    frame = frame.loc[frame.groupby(C.task)[C.task].transform("size").to_numpy() >= 2]
    by_task = ratings_by_task(frame, rubric_def)
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        latest = latest_adjudications(session, study.id)
    context = frame.groupby(C.task).agg(
        subset=(C.subset, "first"),
        language=("language", "first"),
        flagged=("flagged", "any"),
        item=(C.item, "first"),
        unit_key=("unit_key", "first"),
    )
    # One dict per column: an ``.at`` lookup per task and column cost a second at 20,000 queued tasks.
    tasks = context.index.tolist()
    item_of, unit_of, subset_of, language_of, flagged_of = (
        dict(zip(tasks, context[column].tolist(), strict=True))
        for column in ("item", "unit_key", "subset", "language", "flagged")
    )
    entries = []
    for task_id, ratings in by_task.items():
        comparison = compare(rubric_def, ratings)
        if comparison.unanimous and not include_unanimous:
            continue
        decision = latest.get(task_id)
        stale = is_stale(decision, ratings)
        if open_only and decision is not None and decision.status != "unresolved" and not stale:
            continue
        entries.append(
            QueueEntry(
                task_id=task_id,
                rubric=key,
                item_id=int(item_of[task_id]),
                unit_key=unit_of[task_id],
                subset=subset_of[task_id],
                language=language_of[task_id],
                raters=tuple(r.rater for r in ratings),
                comparison=comparison,
                needs_adjudication=bool(flagged_of[task_id]) or any("needs_adjudication" in r.flags for r in ratings),
                locked=False,
                status=decision.status if decision else None,
                version=decision.version if decision else 0,
                stale=stale,
            )
        )
    entries.sort(
        key=lambda e: (
            e.priority,
            not e.comparison.worst_case_mismatch,
            -e.comparison.max_difference,
            -len(e.comparison.differing),
            not e.needs_adjudication,
            e.task_id,
        )
    )
    return QueueHead(tuple(entries if limit is None else entries[:limit]), len(entries))


def queue_frame(entries: Sequence[QueueEntry]) -> pd.DataFrame:
    """The queue as a table (one row per task, in queue order) for pages and downloads."""
    return pd.DataFrame([e.to_dict() for e in entries], columns=list(QUEUE_COLUMNS))


def adjudication_view(
    engine: Engine,
    task_id: int,
    *,
    actor: Actor | Reviewer | int | None = None,
    lead_id: int | None = None,
    pseudonymise: bool = True,
) -> AdjudicationView:
    """One task for adjudication: material, every rating side by side, and the decision history.

    Only a lead of the task's study (or an admin) may open it.
    """
    acting = acting_actor(actor, lead_id)
    with read_session(engine) as session:
        task = session.get(Task, task_id)
        if task is None:
            acting_user(session, acting, roles=LEAD_ROLES)
            raise NotFound(f"no task {task_id}")
        study = session.get(Study, task.study_id)
        require_adjudicating_lead(session, acting, study)
        item = session.get(Item, task.item_id)
        response = session.get(ModelResponse, task.response_id) if task.response_id else None
        rubric = get_rubric(task.rubric)
        labels = study_rater_labels(engine, study.name, pseudonymise=pseudonymise)  # a read path: no write lock held
        frame = load_annotations(
            session, study, rubric=task.rubric, pseudonymise=pseudonymise, task_ids=[task.id], labels=labels
        )
        rows = session.exec(
            select(Adjudication).where(Adjudication.task_id == task.id).order_by(Adjudication.version)
        ).all()
        names = lead_names(session, {r.adjudicator_id for r in rows})
    ratings = tuple(ratings_by_task(frame, rubric).get(task.id, []))
    history = tuple(as_record(r, names) for r in rows)
    return AdjudicationView(
        task_id=task.id,
        study=study.name,
        rubric=task.rubric,
        unit_key=task.unit_key,
        locked=task.locked,
        dimensions=rubric.dimension_keys,
        material=material(item, response, task.rubric),
        ratings=ratings,
        comparison=compare(rubric, ratings),
        latest=history[-1] if history else None,
        history=history,
        stale=is_stale(rows[-1] if rows else None, ratings),
    )
