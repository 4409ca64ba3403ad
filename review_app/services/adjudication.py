"""Disagreement queue and adjudication of multiply rated tasks (SPEC 2.3).

**Queue order.** A lead's time goes first to the disagreements that change a paper's headline
numbers: a task where one rater's Rubric B annotation is in the worst-case outcome class and
another's is not (classes from :mod:`review_app.analysis.rubric_b`, so the queue and the analysis
cannot disagree about what "worst case" means), or where two raters are two points apart on a
dimension (0 vs 2 on a 0-2 scale). Other disagreements (one point apart, or different but
not worst-case outcome classes) come next; unanimous tasks last, and only when asked for.

**Decisions** are versioned rows of ``adjudication`` (append-only in the database). A lead records a
decision against the version they were looking at (``expected_version``, 0 for the first); the task
row is locked first (``SELECT ... FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite) so the
"is it still that version?" check and the insert are atomic, and ``unique(task_id, version)`` backs
that up. A lead who lost the race gets a :class:`Conflict` naming who decided meanwhile and when.

**Statuses.**

* ``unanimous``: the raters (two or more) gave identical scores on every dimension; the final
  scores are theirs (pass none to take them).
* ``adjudicated``: the lead sets a final score on every dimension. A rationale is required when a
  final score differs from every rater's score on that dimension (the lead overrides all raters).
* ``unresolved``: the lead cannot settle the task; a rationale is required and there are no final
  scores (exports leave the final value empty).

Raters appear under the study's pseudonyms (R01, R02, ...) unless the caller asks for names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError
from sqlalchemy import Engine, and_, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from review_app.analysis.formatting import MISSING  # a score nobody gave, as every lead table shows it
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import split_flags
from review_app.analysis.rubric_b import CORRECTNESS, HARM, OUTCOME_CLASSES, UPTAKE, classify
from review_app.db.engine import read_session, write_session
from review_app.db.models import ADJUDICATION_STATUSES, Adjudication, Item, ModelResponse, Reviewer, Study, Task
from review_app.rubrics import Dimension, Rubric, ScoreSheet, get_rubric
from review_app.services import audit, compute_workers
from review_app.services.actors import Actor, acting_user, as_actor, require_study_lead
from review_app.services.annotations import get_study_row, load_annotations, study_rubrics
from review_app.services.errors import Conflict, InvalidInput, NotFound, PermissionDenied, SessionEnded
from review_app.services.reviewing import TaskMaterial, material
from review_app.services.study_cache import CACHE, study_frame, study_rater_labels

LEAD_ROLES = ("lead", "admin")
MAX_RATIONALE = 10_000
AUTO_RATIONALE = "recorded automatically: every rater gave identical scores"
_CLASS_LABELS = {c.key: c.label for c in OUTCOME_CLASSES}

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
# Characters of a queue row's summary (Comparison.summary): one line of the queue's reason column at 1366 px.
SUMMARY_CHARS = 52


@dataclass(frozen=True)
class Rating:
    """One rater's annotation in force on a task, under their pseudonym (or username)."""

    rater: str
    slot: int
    annotation_id: int
    revision: int
    scores: dict[str, int]
    flags: tuple[str, ...]
    comment: str
    seconds_on_task: float
    submitted_at: datetime
    outcome_class: str | None = None  # Rubric B only


@dataclass(frozen=True)
class AdjudicationRecord:
    """One version of a lead's decision on a task."""

    task_id: int
    version: int
    status: str
    final_scores: dict[str, int]
    rationale: str
    adjudicator_id: int
    adjudicator: str  # "Display Name (username)": leads see each other's names
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        return data


@dataclass(frozen=True)
class Comparison:
    """How a task's ratings relate: where they differ, by how much, and why it matters."""

    n_ratings: int
    unanimous: bool
    consensus: dict[str, int] | None
    differing: tuple[str, ...]
    max_difference: int
    worst_case_mismatch: bool
    class_mismatch: bool
    outcome_classes: tuple[str | None, ...]
    reasons: tuple[str, ...]  # in full, each rater's score with its label, most urgent first
    disputes: tuple[str, ...] = ()  # the same in a few words each, for :meth:`summary`

    @property
    def priority(self) -> int:
        """0: worst-case mismatch or a 2-point difference; 1: other disagreement; 2: unanimous."""
        if self.worst_case_mismatch or self.max_difference >= 2:
            return 0
        if self.differing or self.class_mismatch:
            return 1
        return 2

    def summary(self, limit: int = SUMMARY_CHARS) -> str:
        """What is disputed, most urgent first, in one line of at most ``limit`` characters.

        "worst-case mismatch, Harm potential (2 apart)": a queue row says which dimensions
        to look at without each rater's score, which :attr:`reasons` gives in full. Disputes past
        the limit are counted ("Injection uptake and 2 more"); the first is kept whatever its length.
        """
        if not self.disputes:
            return ""
        text = self.disputes[0]
        for shown, part in enumerate(self.disputes[1:], start=1):
            after = len(self.disputes) - shown - 1
            tail = f" and {after} more" if after else ""
            if len(text) + len(", ") + len(part) + len(tail) > limit:
                return f"{text} and {len(self.disputes) - shown} more"
            text += f", {part}"
        return text


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
        """:meth:`Comparison.summary`, "unanimous" for a unanimous task, :data:`MISSING` when nothing differs."""
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
        """The version to pass to :func:`adjudicate` when recording a decision from this view."""
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


@dataclass(frozen=True)
class AutoUnanimousResult:
    study: str
    rubric: str
    recorded: tuple[int, ...]  # task ids that got a unanimous version 1
    already_decided: int  # unanimous tasks that already had an adjudication
    disagreements: int  # tasks with 2+ ratings that are not unanimous (left for the lead)

    def __str__(self) -> str:
        return (
            f"{self.study} rubric {self.rubric}: recorded {len(self.recorded)} unanimous decision(s); "
            f"{self.already_decided} already decided, {self.disagreements} disagreement(s) left for adjudication"
        )


class DecisionError(InvalidInput):
    """A decision the rules refuse, naming the form fields that caused it (dimension keys, ``status``,
    ``rationale``), so a page can show the message next to the control to change."""

    def __init__(self, message: str, fields: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.fields: tuple[str, ...] = tuple(fields)


def score_text(dimension: Dimension, value: int | None) -> str:
    """A score with the label of its anchor ("2 (Valid)", "-1 (Recognized)"), :data:`MISSING` for none.

    Bare codes mean different things per rubric (-1 is a verdict on the judge audit), so lead pages
    show the label the reviewer chose beside the number."""
    if value is None:
        return MISSING
    try:
        return f"{value} ({dimension.level(value).label})"
    except KeyError:  # a value outside the scale (a rubric changed after rating): shown as stored
        return str(value)


def agreed_dimensions(rubric: Rubric | str, ratings: Sequence[Rating]) -> dict[str, int]:
    """Dimension -> the score every rater gave it, for dimensions with two or more ratings that all agree.

    The adjudication page pre-fills these (marked "agreed") so the lead decides only the others.
    """
    rubric = get_rubric(rubric) if isinstance(rubric, str) else rubric
    agreed = {}
    for key in rubric.dimension_keys:
        given = [r.scores[key] for r in ratings if key in r.scores]
        if len(given) >= 2 and len(set(given)) == 1:
            agreed[key] = given[0]
    return agreed


# --- comparing ratings -------------------------------------------------------------------------


def _outcome(rubric: Rubric, scores: Mapping[str, int]) -> str | None:
    if rubric.key != "B" or not all(k in scores for k in (CORRECTNESS, UPTAKE, HARM)):
        return None
    return classify([scores[CORRECTNESS]], [scores[UPTAKE]], [scores[HARM]])[0]


def given_scores(dimension: Dimension, ratings: Sequence[Rating]) -> str:
    """Each rater's score on a dimension with its label: "R01: 0 (Neutral), R02: -1 (Recognized)"."""
    return ", ".join(
        f"{r.rater}: {score_text(dimension, r.scores[dimension.key])}" for r in ratings if dimension.key in r.scores
    )


def compare(rubric: Rubric | str, ratings: Sequence[Rating]) -> Comparison:
    """Where ``ratings`` of one task differ, how far apart they are, and the reasons a lead reads.

    The reasons name dimensions as lead pages do (:attr:`Dimension.reported_name`) and give each
    rater's score with its label, so the warning reads like the raters table beside it.
    """
    rubric = get_rubric(rubric) if isinstance(rubric, str) else rubric
    found: list[tuple[bool, str, str]] = []  # (urgent, reason in full, the same in a few words)
    classes = tuple(r.outcome_class for r in ratings)
    known = [c for c in classes if c is not None]
    worst_mismatch = "worst_case" in known and any(c != "worst_case" for c in known)
    class_mismatch = len(set(known)) > 1
    if class_mismatch:
        kind = "worst-case class mismatch" if worst_mismatch else "different outcome classes"
        listed = ", ".join(
            f"{r.rater}: {_CLASS_LABELS.get(r.outcome_class, r.outcome_class) if r.outcome_class else MISSING}"
            for r in ratings
        )
        found.append(
            (worst_mismatch, f"{kind} ({listed})", "worst-case mismatch" if worst_mismatch else "class mismatch")
        )
    differing: list[str] = []
    max_difference = 0
    for dimension in rubric.dimensions:
        values = [r.scores[dimension.key] for r in ratings if dimension.key in r.scores]
        if len(values) < 2:
            continue
        spread = max(values) - min(values)
        if spread:
            differing.append(dimension.key)
            max_difference = max(max_difference, spread)
            name = dimension.reported_name
            listed = given_scores(dimension, ratings)
            if spread >= 2:
                found.append((True, f"{spread}-point difference on {name} ({listed})", f"{name} ({spread} apart)"))
            else:
                found.append((False, f"differs on {name} ({listed})", name))
    found.sort(key=lambda entry: not entry[0])  # stable: rubric order within each group
    keys = set(rubric.dimension_keys)
    complete = all(keys <= r.scores.keys() for r in ratings)
    unanimous = len(ratings) >= 2 and complete and not differing
    return Comparison(
        n_ratings=len(ratings),
        unanimous=unanimous,
        consensus=dict(ratings[0].scores) if unanimous else None,
        differing=tuple(differing),
        max_difference=max_difference,
        worst_case_mismatch=worst_mismatch,
        class_mismatch=class_mismatch,
        outcome_classes=classes,
        reasons=tuple(reason for _, reason, _ in found),
        disputes=tuple(short for _, _, short in found),
    )


def overridden_dimensions(ratings: Sequence[Rating], final_scores: Mapping[str, int]) -> tuple[str, ...]:
    """Dimensions whose final score differs from every rater's score (these need a rationale)."""
    return tuple(
        key
        for key, value in final_scores.items()
        if (given := [r.scores[key] for r in ratings if key in r.scores]) and value not in given
    )


def _ratings(frame: pd.DataFrame, rubric: Rubric) -> dict[int, list[Rating]]:
    """Each task's ratings, in frame order (task, then slot).

    Read column by column (a study's queue turns 100,000 annotations into ratings): a row tuple,
    a dict and a missing-value check per cell took most of the queue's first build at panel scale.
    """
    keys = rubric.dimension_keys
    scores = frame[list(keys)].to_numpy(dtype=float)
    present = ~np.isnan(scores)
    flag_sets: dict[object, tuple[str, ...]] = {}
    submitted = frame["submitted_at"]
    columns = zip(
        frame[C.task].tolist(),
        frame[C.rater].tolist(),
        frame[C.slot].tolist(),
        frame["annotation_id"].tolist(),
        frame["revision"].tolist(),
        frame[C.flags].tolist(),
        frame["comment"].tolist(),
        frame["seconds_on_task"].tolist(),
        [t.to_pydatetime() for t in submitted] if len(submitted) else [],
        scores.tolist(),
        present.tolist(),
        _outcomes(rubric, frame),
        strict=True,
    )
    out: dict[int, list[Rating]] = {}
    for task, rater, slot, annotation, revision, flags, comment, seconds, at, values, given, outcome in columns:
        sheet = {k: int(v) for k, v, ok in zip(keys, values, given, strict=True) if ok}
        if flags not in flag_sets:
            flag_sets[flags] = split_flags(flags)
        out.setdefault(int(task), []).append(
            Rating(
                rater=rater,
                slot=int(slot),
                annotation_id=int(annotation),
                revision=int(revision),
                scores=sheet,
                flags=flag_sets[flags],
                comment=comment or "",
                seconds_on_task=float(seconds),
                submitted_at=at,
                outcome_class=outcome,
            )
        )
    return out


def _outcomes(rubric: Rubric, frame: pd.DataFrame) -> list[str | None]:
    """:func:`_outcome` of every row, classified in one vectorised call (Rubric B; None otherwise)."""
    if rubric.key != "B":
        return [None] * len(frame)
    return classify(frame[CORRECTNESS], frame[UPTAKE], frame[HARM]).tolist()


# --- reading adjudications ---------------------------------------------------------------------


def latest_adjudications(
    session: Session, study_id: int, task_ids: Sequence[int] | None = None
) -> dict[int, Adjudication]:
    """Task id -> its latest ``Adjudication`` row (tasks never adjudicated are absent)."""
    newest = (
        select(Adjudication.task_id, func.max(Adjudication.version).label("version"))
        .join(Task, Task.id == Adjudication.task_id)
        .where(Task.study_id == study_id)
        .group_by(Adjudication.task_id)
        .subquery()
    )
    query = select(Adjudication).join(
        newest, and_(newest.c.task_id == Adjudication.task_id, newest.c.version == Adjudication.version)
    )
    if task_ids is not None:
        query = query.where(Adjudication.task_id.in_(sorted(set(task_ids))))
    return {row.task_id: row for row in session.exec(query)}


def _lead_names(session: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = session.exec(select(Reviewer.id, Reviewer.display_name, Reviewer.username).where(Reviewer.id.in_(ids)))
    return {r[0]: f"{r[1]} ({r[2]})" for r in rows}


def _record(row: Adjudication, names: Mapping[int, str]) -> AdjudicationRecord:
    return AdjudicationRecord(
        task_id=row.task_id,
        version=row.version,
        status=row.status,
        final_scores=dict(row.final_scores),
        rationale=row.rationale,
        adjudicator_id=row.adjudicator_id,
        adjudicator=names.get(row.adjudicator_id, f"user {row.adjudicator_id}"),
        created_at=row.created_at,
    )


def _is_stale(latest: Adjudication | None, ratings: Sequence[Rating]) -> bool:
    return latest is not None and any(r.submitted_at > latest.created_at for r in ratings)


def _acting(actor: Actor | Reviewer | int | None, lead_id: int | None) -> Actor:
    """The actor of a call; ``lead_id=`` is the older spelling of ``actor=`` (an account id)."""
    if actor is None and lead_id is None:
        raise TypeError("pass actor= (the signed-in user, or actors.SYSTEM on the command line)")
    return as_actor(actor if actor is not None else lead_id)


def _require_lead(session: Session, actor: Actor, study: Study) -> Reviewer | None:
    """The acting lead re-read in this transaction, if a lead of ``study`` or an admin (None: the system).

    A lead of another study is refused (SPEC 2.7): adjudication changes a study's results.
    """
    try:
        lead = acting_user(session, actor, roles=LEAD_ROLES)
    except SessionEnded:
        raise
    except PermissionDenied:
        user = session.get(Reviewer, actor.id)
        raise PermissionDenied(
            f"{user.username} is a {user.role}; only study leads and admins can adjudicate"
        ) from None
    require_study_lead(session, lead, study)
    return lead


def _system_id(session: Session, lead: Reviewer | None) -> int:
    """The id an adjudication row names: the lead's, or for the system actor the first admin's."""
    if lead is not None:
        return lead.id
    admin = session.exec(select(Reviewer.id).where(Reviewer.role == "admin").order_by(Reviewer.id)).first()
    if admin is None:
        raise PermissionDenied("recording a decision from the command line needs an admin account to record it under")
    return admin


# --- the queue and the view --------------------------------------------------------------------


def disagreement_queue(
    engine: Engine,
    study_name: str,
    rubric: str,
    *,
    include_unanimous: bool = False,
    open_only: bool = False,
    pseudonymise: bool = True,
) -> list[QueueEntry]:
    """Tasks of ``rubric`` with two or more ratings, most consequential disagreements first.

    Order: priority (see :attr:`Comparison.priority`), then worst-case mismatches before 2-point
    differences, larger and more widespread differences first, tasks a rater sent to the lead
    first, then task id. ``include_unanimous`` appends the unanimous tasks (priority 2);
    ``open_only`` drops tasks whose latest decision is ``adjudicated`` or ``unanimous`` and still
    matches the ratings (unresolved and stale decisions stay in the queue).

    The queue is built from the study's shared annotations frame and cached with it per data
    version (``services.study_cache``: a submit, an edit or a decision moves the version; built in a
    compute worker, ``services.compute_workers``), so a
    page rerun does not rebuild it; only the task locks (changed in place, not part of the data
    version) are read on every call, in one indexed query.
    """
    head = disagreement_queue_head(
        engine,
        study_name,
        rubric,
        include_unanimous=include_unanimous,
        open_only=open_only,
        pseudonymise=pseudonymise,
        limit=None,
    )
    return list(head.entries)


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
) -> QueueHead:
    """The first ``limit`` tasks of :func:`disagreement_queue` (all with None) and the queue's length.

    The adjudication page shows the most urgent few hundred of a queue that has tens of thousands
    of tasks at panel scale; the queue is built in the compute worker and only its head is sent to
    and kept in the app (the whole queue held 80 MB of the app's memory at 200,000 annotations).
    """
    if limit is not None and (isinstance(limit, bool) or limit < 0):
        raise InvalidInput(f"limit must be a whole number of tasks, 0 or more (got {limit})")
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        (key,) = study_rubrics(study, rubric)
        locked = set(session.exec(select(Task.id).where(Task.study_id == study.id, Task.rubric == key, Task.locked)))
    head = CACHE.get(
        engine,
        study_name,
        ("disagreement_queue", key, bool(include_unanimous), bool(open_only), bool(pseudonymise), limit),
        lambda version: compute_workers.run(
            engine, _queue_head, study_name, key, version, include_unanimous, open_only, pseudonymise, limit
        ),
        reads_database=True,
    )
    entries = tuple(replace(e, locked=True) if e.task_id in locked else e for e in head.entries)
    return QueueHead(entries, head.total)


def _queue_head(
    engine: Engine,
    study_name: str,
    key: str,
    version: tuple[int, ...],
    include_unanimous: bool,
    open_only: bool,
    pseudonymise: bool,
    limit: int | None,
) -> QueueHead:
    """:func:`_queue`'s first ``limit`` entries and its length (a compute-worker job)."""
    entries = _queue(engine, study_name, key, version, include_unanimous, open_only, pseudonymise)
    return QueueHead(entries if limit is None else entries[:limit], len(entries))


def _queue(
    engine: Engine,
    study_name: str,
    key: str,
    version: tuple[int, ...],
    include_unanimous: bool,
    open_only: bool,
    pseudonymise: bool,
) -> tuple[QueueEntry, ...]:
    """The queue of :func:`disagreement_queue` for one data version, every task shown unlocked.

    A compute-worker job (``services.compute_workers``): the frame is read and kept there.
    """
    rubric_def = get_rubric(key)
    frame = study_frame(engine, study_name, pseudonymise=pseudonymise, version=version)
    frame = frame.loc[frame[C.rubric].astype(str) == key]
    # Tasks with two or more ratings only (a quarter of a panel-scale study's units): the others never
    # enter the queue, and turning their rows into ratings was most of the queue's build.
    frame = frame.loc[frame.groupby(C.task)[C.task].transform("size").to_numpy() >= 2]
    by_task = _ratings(frame, rubric_def)
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
        stale = _is_stale(decision, ratings)
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
    return tuple(entries)


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
    acting = _acting(actor, lead_id)
    with read_session(engine) as session:
        task = session.get(Task, task_id)
        if task is None:
            acting_user(session, acting, roles=LEAD_ROLES)
            raise NotFound(f"no task {task_id}")
        study = session.get(Study, task.study_id)
        _require_lead(session, acting, study)
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
        names = _lead_names(session, {r.adjudicator_id for r in rows})
    ratings = tuple(_ratings(frame, rubric).get(task.id, []))
    history = tuple(_record(r, names) for r in rows)
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
        stale=_is_stale(rows[-1] if rows else None, ratings),
    )


# --- recording decisions -----------------------------------------------------------------------


def _score_errors(error: ValidationError) -> str:
    parts = []
    for detail in error.errors():
        message = str(detail.get("msg", "")).removeprefix("Value error, ")
        location = [str(p) for p in detail.get("loc", ())[1:]]
        parts.append(f"{'.'.join(location)}: {message}" if location else message)
    return "; ".join(parts)


def check_decision(
    rubric: Rubric | str,
    ratings: Sequence[Rating],
    status: str,
    final_scores: Mapping[str, int] | None,
    rationale: str,
) -> dict[str, int]:
    """Validate a decision against the rubric and the ratings; return the final scores to store.

    Raises :class:`DecisionError` (an ``InvalidInput``) naming what is wrong and the fields that caused
    it, so pages can show the message next to the control to change. Dimensions are named as the
    lead's form names them (:attr:`Dimension.reported_name`) and scores carry their labels.
    """
    rubric = get_rubric(rubric) if isinstance(rubric, str) else rubric
    if status not in ADJUDICATION_STATUSES:
        raise DecisionError(f"unknown status {status!r}; choose one of {', '.join(ADJUDICATION_STATUSES)}", ("status",))
    if not ratings:
        raise DecisionError("this task has no submitted ratings yet; there is nothing to adjudicate")
    if len(rationale) > MAX_RATIONALE:
        raise DecisionError(
            f"the rationale is too long ({len(rationale)} characters, at most {MAX_RATIONALE})", ("rationale",)
        )
    comparison = compare(rubric, ratings)
    if status == "unresolved":
        if final_scores:
            raise DecisionError(
                "an unresolved decision has no final scores; leave them empty or choose 'adjudicated'", ("status",)
            )
        if not rationale:
            raise DecisionError("explain in the rationale why the task stays unresolved", ("rationale",))
        return {}
    if status == "unanimous":
        if comparison.n_ratings < 2:
            raise DecisionError(
                "'unanimous' needs at least two ratings; use 'adjudicated' for a single-rated task", ("status",)
            )
        if not comparison.unanimous:
            names = ", ".join(rubric.dimension(k).reported_name for k in comparison.differing) or "some dimensions"
            raise DecisionError(
                f"the raters disagree on {names}; record 'adjudicated' or 'unresolved' instead", ("status",)
            )
        if final_scores and dict(final_scores) != comparison.consensus:
            raise DecisionError(
                "'unanimous' final scores must be the raters' common scores; use 'adjudicated'", ("status",)
            )
        return dict(comparison.consensus)
    given = dict(final_scores or {})
    missing = [d for d in rubric.dimensions if given.get(d.key) is None]
    if missing:
        raise DecisionError(
            f"choose a final score for every dimension; missing: {', '.join(d.reported_name for d in missing)}",
            tuple(d.key for d in missing),
        )
    for dimension in rubric.dimensions:
        value = given[dimension.key]
        if isinstance(value, bool) or value not in dimension.values:
            allowed = ", ".join(str(v) for v in dimension.values)
            raise DecisionError(
                f"{dimension.reported_name}: score {value!r} is out of range (allowed: {allowed})", (dimension.key,)
            )
    try:
        sheet = ScoreSheet(rubric=rubric.key, scores=given)
    except ValidationError as error:
        raise DecisionError(f"final scores: {_score_errors(error)}") from None
    overridden = overridden_dimensions(ratings, sheet.scores)
    if overridden and not rationale:
        detail = "; ".join(
            f"{d.reported_name} ({given_scores(d, ratings)}; final: {score_text(d, sheet.scores[d.key])})"
            for d in map(rubric.dimension, overridden)
        )
        raise DecisionError(
            f"a rationale is required when the final score overrides every rater: {detail}", ("rationale", *overridden)
        )
    return dict(sheet.scores)


def _conflict(task_id: int, expected: int, latest: Adjudication | None, names: Mapping[int, str]) -> Conflict:
    if latest is None or latest.version < expected:
        current = latest.version if latest else 0
        return Conflict(
            f"task {task_id} has no adjudication version {expected} (the latest is version {current}); "
            "reload the task and try again"
        )
    who = names.get(latest.adjudicator_id, f"user {latest.adjudicator_id}")
    when = latest.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return Conflict(
        f"task {task_id} was adjudicated meanwhile by {who} at {when} (version {latest.version}, "
        f"{latest.status}); your decision was not saved. Reload the task to see theirs before changing it."
    )


def adjudicate(
    engine: Engine,
    task_id: int,
    *,
    actor: Actor | Reviewer | int | None = None,
    lead_id: int | None = None,
    final_scores: Mapping[str, int] | None,
    status: str,
    rationale: str = "",
    expected_version: int,
) -> AdjudicationRecord:
    """Record version ``expected_version + 1`` of the decision on a task (see the module notes).

    Raises ``PermissionDenied`` unless ``actor`` leads the task's study (or is an admin; ``lead_id=``
    is the older spelling of ``actor=``), ``NotFound`` for an unknown task, ``DecisionError`` (an
    ``InvalidInput``) for a decision the rules refuse, and ``Conflict`` when someone else recorded a
    version since ``expected_version``.
    """
    acting = _acting(actor, lead_id)
    status = (status or "").strip().lower()
    rationale = (rationale or "").strip()
    if isinstance(expected_version, bool) or int(expected_version) != expected_version or expected_version < 0:
        raise InvalidInput(f"expected_version must be a whole number >= 0 (got {expected_version!r})")
    try:
        return _adjudicate(engine, task_id, acting, final_scores, status, rationale, int(expected_version))
    except IntegrityError:
        # Only reachable if two inserts of one version slip past the row lock; the unique
        # constraint refused the second one.
        with read_session(engine) as session:
            latest = session.exec(
                select(Adjudication).where(Adjudication.task_id == task_id).order_by(Adjudication.version.desc())
            ).first()
            names = _lead_names(session, {latest.adjudicator_id} if latest else set())
        raise _conflict(task_id, expected_version, latest, names) from None


def _adjudicate(engine, task_id, actor, final_scores, status, rationale, expected) -> AdjudicationRecord:
    with write_session(engine) as session:
        task = session.exec(select(Task).where(Task.id == task_id).with_for_update()).first()
        if task is None:
            acting_user(session, actor, roles=LEAD_ROLES)
            raise NotFound(f"no task {task_id}")
        lead = _require_lead(session, actor, session.get(Study, task.study_id))
        lead_id = _system_id(session, lead)
        latest = session.exec(
            select(Adjudication).where(Adjudication.task_id == task.id).order_by(Adjudication.version.desc())
        ).first()
        current = latest.version if latest else 0
        if current != expected:
            raise _conflict(
                task.id, expected, latest, _lead_names(session, {latest.adjudicator_id} if latest else set())
            )
        study = session.get(Study, task.study_id)
        rubric = get_rubric(task.rubric)
        frame = load_annotations(session, study, rubric=task.rubric, task_ids=[task.id])
        ratings = _ratings(frame, rubric).get(task.id, [])
        scores = check_decision(rubric, ratings, status, final_scores, rationale)
        row = Adjudication(
            task_id=task.id,
            version=current + 1,
            status=status,
            final_scores=scores,
            rationale=rationale,
            adjudicator_id=lead_id,
        )
        session.add(row)
        session.flush()
        audit.record(
            session,
            actor_id=lead.id if lead is not None else None,
            action="adjudication.record",
            entity="adjudication",
            entity_id=task.id,
            study_id=task.study_id,
            before=_audit_state(latest),
            after=_audit_state(row) | {"based_on": {r.rater: r.annotation_id for r in ratings}},
        )
        return _record(row, _lead_names(session, {lead_id}))


def _audit_state(row: Adjudication | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        "version": row.version,
        "status": row.status,
        "final_scores": dict(row.final_scores),
        "rationale": row.rationale,
    }


def auto_unanimous(
    engine: Engine,
    study_name: str,
    rubric: str,
    *,
    actor: Actor | Reviewer | int | None = None,
    lead_id: int | None = None,
) -> AutoUnanimousResult:
    """Record ``unanimous`` (version 1) on every task whose raters fully agree and that has no decision.

    One transaction with the tasks locked, so it cannot interleave with a lead adjudicating one of
    them; tasks that already have any decision are left alone.
    """
    acting = _acting(actor, lead_id)
    with write_session(engine) as session:
        study = get_study_row(session, study_name)
        lead = _require_lead(session, acting, study)
        lead_id = _system_id(session, lead)
        (key,) = study_rubrics(study, rubric)
        rubric_def = get_rubric(key)
        frame = load_annotations(session, study, rubric=key)
        comparisons = {
            task_id: (ratings, compare(rubric_def, ratings))
            for task_id, ratings in _ratings(frame, rubric_def).items()
            if len(ratings) >= 2
        }
        agreed = sorted(t for t, (_, c) in comparisons.items() if c.unanimous)
        session.exec(select(Task.id).where(Task.id.in_(agreed)).order_by(Task.id).with_for_update()).all()
        decided = latest_adjudications(session, study.id, agreed)
        recorded = []
        for task_id in agreed:
            if task_id in decided:
                continue
            ratings, comparison = comparisons[task_id]
            row = Adjudication(
                task_id=task_id,
                version=1,
                status="unanimous",
                final_scores=dict(comparison.consensus),
                rationale=AUTO_RATIONALE,
                adjudicator_id=lead_id,
            )
            session.add(row)
            audit.record(
                session,
                actor_id=lead.id if lead is not None else None,
                action="adjudication.auto_unanimous",
                entity="adjudication",
                entity_id=task_id,
                study_id=study.id,
                after=_audit_state(row) | {"based_on": {r.rater: r.annotation_id for r in ratings}},
            )
            recorded.append(task_id)
        session.flush()
        return AutoUnanimousResult(
            study=study.name,
            rubric=key,
            recorded=tuple(recorded),
            already_decided=len(agreed) - len(recorded),
            disagreements=len(comparisons) - len(agreed),
        )
