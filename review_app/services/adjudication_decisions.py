"""A lead's decisions on multiply rated tasks: reading them, checking them and recording them.

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

Only a lead of the task's study or an admin decides (docs/security.md, "Roles and permissions"):
adjudication changes a study's results. The queue a lead works through and the view of one task are
in :mod:`review_app.services.adjudication`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, and_, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from review_app.db.engine import read_session, write_session
from review_app.db.models import ADJUDICATION_STATUSES, Adjudication, Reviewer, Study, Task
from review_app.rubrics import Rubric, ScoreSheet, get_rubric
from review_app.services import audit
from review_app.services.actors import LEAD_ROLES, Actor, acting_actor, acting_user, require_study_lead
from review_app.services.annotations import get_study_row, load_annotations, study_rubrics
from review_app.services.errors import Conflict, InvalidInput, NotFound, PermissionDenied, SessionEnded
from review_app.services.rating_comparison import (
    Rating,
    compare,
    given_scores,
    overridden_dimensions,
    ratings_by_task,
    score_text,
)

MAX_RATIONALE = 10_000
AUTO_RATIONALE = "recorded automatically: every rater gave identical scores"


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


def lead_names(session: Session, ids: set[int]) -> dict[int, str]:
    """Account id -> "Display Name (username)" of the leads who decided: leads see each other's names."""
    if not ids:
        return {}
    rows = session.exec(select(Reviewer.id, Reviewer.display_name, Reviewer.username).where(Reviewer.id.in_(ids)))
    return {r[0]: f"{r[1]} ({r[2]})" for r in rows}


def as_record(row: Adjudication, names: Mapping[int, str]) -> AdjudicationRecord:
    """An ``adjudication`` row as pages show it, its adjudicator named from ``names``."""
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


def is_stale(latest: Adjudication | None, ratings: Sequence[Rating]) -> bool:
    """Whether a rating was submitted after the latest decision (the decision no longer matches the ratings)."""
    return latest is not None and any(r.submitted_at > latest.created_at for r in ratings)


def require_adjudicating_lead(session: Session, actor: Actor, study: Study) -> Reviewer | None:
    """The acting lead re-read in this transaction, if a lead of ``study`` or an admin (None: the system).

    A lead of another study is refused (docs/security.md, "Roles and permissions"): adjudication
    changes a study's results.
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


def _latest(session: Session, task_id: int) -> Adjudication | None:
    """The newest version of the decision on a task (None before the first)."""
    return session.exec(
        select(Adjudication).where(Adjudication.task_id == task_id).order_by(Adjudication.version.desc())
    ).first()


def _conflict(session: Session, task_id: int, expected: int, latest: Adjudication | None) -> Conflict:
    """The refusal of a decision based on version ``expected`` when ``latest`` is the newest, naming who decided."""
    if latest is None or latest.version < expected:
        current = latest.version if latest else 0
        return Conflict(
            f"task {task_id} has no adjudication version {expected} (the latest is version {current}); "
            "reload the task and try again"
        )
    who = lead_names(session, {latest.adjudicator_id}).get(latest.adjudicator_id, f"user {latest.adjudicator_id}")
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
    acting = acting_actor(actor, lead_id)
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
            conflict = _conflict(session, task_id, expected_version, _latest(session, task_id))
        raise conflict from None


def _adjudicate(engine, task_id, actor, final_scores, status, rationale, expected) -> AdjudicationRecord:
    with write_session(engine) as session:
        task = session.exec(select(Task).where(Task.id == task_id).with_for_update()).first()
        if task is None:
            acting_user(session, actor, roles=LEAD_ROLES)
            raise NotFound(f"no task {task_id}")
        lead = require_adjudicating_lead(session, actor, session.get(Study, task.study_id))
        lead_id = _system_id(session, lead)
        latest = _latest(session, task.id)
        current = latest.version if latest else 0
        if current != expected:
            raise _conflict(session, task.id, expected, latest)
        study = session.get(Study, task.study_id)
        rubric = get_rubric(task.rubric)
        frame = load_annotations(session, study, rubric=task.rubric, task_ids=[task.id])
        ratings = ratings_by_task(frame, rubric).get(task.id, [])
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
        return as_record(row, lead_names(session, {lead_id}))


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
    acting = acting_actor(actor, lead_id)
    with write_session(engine) as session:
        study = get_study_row(session, study_name)
        lead = require_adjudicating_lead(session, acting, study)
        lead_id = _system_id(session, lead)
        (key,) = study_rubrics(study, rubric)
        rubric_def = get_rubric(key)
        frame = load_annotations(session, study, rubric=key)
        comparisons = {
            task_id: (ratings, compare(rubric_def, ratings))
            for task_id, ratings in ratings_by_task(frame, rubric_def).items()
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
