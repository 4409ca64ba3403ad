"""A reviewer's work on a task: opening it, drafts, submit, skip, flag, edit; and a lead's task lock.

What is left to do and what comes next is :mod:`review_app.services.review_queue`; what a task shows
is :mod:`review_app.services.task_material`. This module stays one piece past 500 lines because its
functions share one protocol: every write re-reads the reviewer and locks their own assignment
(``_own``), and drafts, submits and edits agree on the client token and base revision that name a
submission; split apart, each half would have to restate those rules.

Blinding is enforced here, server-side, not in the page: ``open_task`` builds the view from the
reviewer's own assignment only, never loads another reviewer's annotation, and never loads the
model's name for a rubric that hides it.

Submitting is idempotent. Every submission carries a client token (created with the draft, so
it survives a reload) and the revision it was based on; the assignment row is locked (BEGIN
IMMEDIATE on SQLite, SELECT ... FOR UPDATE on PostgreSQL) and unique constraints on
(assignment, revision) and (assignment, token) back this up, so a double click, a Streamlit
rerun or a reconnect returns the existing annotation instead of creating a second one, and an
edit from a stale window is refused instead of overwriting a newer revision.

Input arrives as changes that name what they change (``change_draft``): each keypress or click
carries the assignment, the submission it belongs to (client token and base revision) and the
dimension it was meant for, so a change that reaches the server late is applied to exactly what
it names, or refused if that submission is over; never to whatever happens to be open now. A
submit carries the score vector the reviewer saw; ``submit`` refuses it (``ScoresDiffer``) when it
is not the vector saved in the draft, so a screen and a server that disagree never store scores
silently.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from review_app.db.engine import read_only_reason, read_session, write_session
from review_app.db.models import Annotation, AnnotationScore, Assignment, Draft, Study, Task, utcnow
from review_app.rubrics import Rubric, ScoreSheet, get_rubric
from review_app.services import audit, flags
from review_app.services.actors import LEAD_ROLES, Actor, acting_user, as_actor, require_study_lead
from review_app.services.errors import Conflict, InvalidInput, NotFound, PermissionDenied, ScoresDiffer
from review_app.services.task_material import TaskMaterial, cached_material


@dataclass(frozen=True)
class Submitted:
    """The reviewer's annotation in force on an assignment (their own only)."""

    annotation_id: int
    revision: int
    scores: dict[str, int]
    flags: tuple[str, ...]
    comment: str
    seconds_on_task: float


@dataclass(frozen=True)
class TaskView:
    """One reviewer's task: its material, the state of their assignment, and their own work on it."""

    assignment_id: int
    task_id: int
    study: str
    rubric: str
    status: str
    locked: bool
    flagged: bool
    material: TaskMaterial
    submitted: Submitted | None = None
    draft: dict[str, Any] = field(default_factory=dict)
    draft_seconds: float = 0.0


@dataclass(frozen=True)
class SubmitResult:
    annotation_id: int
    revision: int
    created: bool  # False when this token had already been submitted (a repeat)


def _own(session: Session, assignment_id: int, reviewer: int | Actor, *, lock: bool = False) -> Assignment:
    """The reviewer's own live assignment, after re-reading the reviewer (docs/security.md, "Sessions").

    ``reviewer`` is an account id or, from a browser session, an ``Actor`` carrying the session's
    version: a deactivated account, or a session opened before a password or role change, is
    refused here even when a stale page still offers the button.
    """
    actor = as_actor(reviewer)
    acting_user(session, actor)
    query = select(Assignment).where(Assignment.id == assignment_id)
    if lock:
        query = query.with_for_update()
    assignment = session.exec(query).first()
    if assignment is None:
        raise NotFound("this task no longer exists")
    _check_owner(assignment, actor.id)
    return assignment


def _check_owner(assignment: Assignment, reviewer_id: int) -> None:
    if assignment.reviewer_id != reviewer_id:
        raise PermissionDenied("this task is assigned to someone else")
    if assignment.status == "withdrawn":
        raise PermissionDenied("this task was reassigned by the study lead")


def _current(session: Session, assignment_id: int) -> Submitted | None:
    rows = session.exec(
        select(Annotation, AnnotationScore.dimension, AnnotationScore.value)
        .join(AnnotationScore, AnnotationScore.annotation_id == Annotation.id)
        .where(
            Annotation.assignment_id == assignment_id,
            Annotation.revision
            == select(func.max(Annotation.revision)).where(Annotation.assignment_id == assignment_id).scalar_subquery(),
        )
    ).all()
    if not rows:
        return None
    annotation = rows[0][0]
    scores = [(dimension, value) for _a, dimension, value in rows]
    return Submitted(
        annotation.id,
        annotation.revision,
        dict(scores),
        tuple(annotation.flags),
        annotation.comment,
        annotation.seconds_on_task,
    )


def open_task(engine: Engine, assignment_id: int, reviewer_id: int) -> TaskView:
    """The material of one task for its reviewer; marks a new task as started."""
    with read_session(engine) as session:
        # One round trip for the assignment's own state: this runs on every page rerun. The material
        # (item and response text) is prepared once per task (``cached_material``).
        row = session.exec(
            select(Assignment, Task, Study.name, Draft)
            .join(Task, Task.id == Assignment.task_id)
            .join(Study, Study.id == Assignment.study_id)
            .outerjoin(Draft, Draft.assignment_id == Assignment.id)
            .where(Assignment.id == assignment_id)
        ).first()
        if row is None:
            raise NotFound("this task no longer exists")
        assignment, task, study_name, draft = row
        _check_owner(assignment, reviewer_id)
        shown = cached_material(session, engine, task)
        submitted = _current(session, assignment.id) if assignment.status == "submitted" else None
    view: dict[str, Any] = {
        "assignment_id": assignment.id,
        "task_id": task.id,
        "study": study_name,
        "rubric": task.rubric,
        "status": assignment.status,
        "locked": task.locked,
        "flagged": assignment.flagged,
        "material": shown,
        "submitted": submitted,
        "draft": dict(draft.payload) if draft else {},
        "draft_seconds": draft.seconds_on_task if draft else 0.0,
    }
    if assignment.status == "assigned" and read_only_reason(engine) is None:  # read-only: show, do not mark
        with write_session(engine) as session:
            session.execute(
                update(Assignment)
                .where(Assignment.id == assignment.id, Assignment.status == "assigned")
                .values(status="in_progress", started_at=utcnow())
            )
        view["status"] = "in_progress"
    return TaskView(**view)


def new_client_token() -> str:
    return secrets.token_urlsafe(24)


def save_draft(
    engine: Engine,
    assignment_id: int,
    reviewer_id: int | Actor,
    payload: dict[str, Any],
    *,
    seconds_on_task: float = 0.0,
) -> None:
    """Store unsubmitted input so a reload or a dropped connection loses nothing."""
    with write_session(engine) as session:
        assignment = _own(session, assignment_id, reviewer_id)
        draft = session.get(Draft, assignment.id)
        if draft is None:
            draft = Draft(assignment_id=assignment.id)
        draft.payload = dict(payload)
        draft.seconds_on_task = max(0.0, float(seconds_on_task))
        draft.updated_at = utcnow()
        session.add(draft)


@dataclass(frozen=True)
class DraftChange:
    """One change a reviewer made on the review page, naming everything it applies to.

    ``client_token`` and ``base_revision`` identify the submission the change belongs to (the
    window's draft); ``scores`` maps dimension keys to a value (``None`` clears it). ``source``
    and ``seq`` identify the change itself (the browser page that sent it and its number there):
    a change that arrives again (a rerun, a reconnect) is not applied twice.
    """

    client_token: str
    base_revision: int
    scores: Mapping[str, int | None] = field(default_factory=dict)
    flags: tuple[str, ...] | None = None
    comment: str | None = None
    source: str = ""
    seq: int = 0


@dataclass(frozen=True)
class DraftState:
    """The draft after a change; ``applied`` is False when the change had been applied before."""

    payload: dict[str, Any]
    applied: bool


def _check_change(rubric: Rubric, change: DraftChange) -> None:
    for key, value in change.scores.items():
        try:
            dimension = rubric.dimension(key)
        except KeyError:
            raise InvalidInput(f"{rubric.name} has no dimension {key!r}") from None
        if value is not None and (isinstance(value, bool) or value not in dimension.values):
            allowed = ", ".join(str(v) for v in dimension.values)
            raise InvalidInput(f"{dimension.name}: score {value!r} is out of range (allowed: {allowed})")
    if change.flags is not None:
        unknown = set(change.flags) - {flag.key for flag in rubric.flags}
        if unknown:
            raise InvalidInput(f"{rubric.name} has no flag(s) {', '.join(sorted(unknown))}")
    if change.comment is not None and len(change.comment) > 5000:
        raise InvalidInput("the comment is longer than 5000 characters")


def change_draft(
    engine: Engine,
    assignment_id: int,
    reviewer_id: int | Actor,
    change: DraftChange,
    *,
    seconds_on_task: float | None = None,
) -> DraftState:
    """Apply one change to the reviewer's draft of this assignment, field by field.

    The change is applied to the dimensions, flags or comment it names and nothing else, whenever
    it arrives. It is refused (``Conflict``) when the submission it belongs to is over: its client
    token was already submitted, or a newer revision was stored than the one it was based on
    (another window). A locked task or someone else's assignment is refused too. A change whose
    ``(source, seq)`` was already applied returns the draft unchanged.
    ``seconds_on_task`` of ``None`` keeps the time already recorded.
    """
    if not change.client_token or len(change.client_token) > 64:
        raise InvalidInput("a draft change needs the client token of its submission (1-64 characters)")
    with write_session(engine) as session:
        assignment = _own(session, assignment_id, reviewer_id, lock=True)
        task = session.get(Task, assignment.task_id)
        rubric = get_rubric(task.rubric)
        _check_change(rubric, change)
        if task.locked:
            raise PermissionDenied("the study lead has locked this task; it can no longer be changed")
        done = session.exec(
            select(Annotation.id).where(
                Annotation.assignment_id == assignment.id, Annotation.client_token == change.client_token
            )
        ).first()
        if done is not None:
            raise Conflict("this task was already submitted; the change was not applied")
        latest = session.exec(
            select(func.coalesce(func.max(Annotation.revision), 0)).where(Annotation.assignment_id == assignment.id)
        ).one()
        if change.base_revision != latest:
            raise Conflict("this task was changed in another window; reload it to see the latest version")
        draft = session.get(Draft, assignment.id)
        if draft is None:
            draft = Draft(assignment_id=assignment.id, seconds_on_task=0.0)
            payload: dict[str, Any] = {"client_token": change.client_token, "base_revision": latest}
            if latest:  # an edit starts from the revision in force
                current = _current(session, assignment.id)
                payload |= {"scores": dict(current.scores), "flags": list(current.flags), "comment": current.comment}
        else:
            payload = dict(draft.payload)
        seen = dict(payload.get("seen") or {})
        if change.source and change.seq <= int(seen.get(change.source, 0)):
            return DraftState(payload, applied=False)
        scores = dict(payload.get("scores") or {})
        for key, value in change.scores.items():
            if value is None:
                scores.pop(key, None)
            else:
                scores[key] = value
        payload["scores"] = {k: scores[k] for k in rubric.dimension_keys if k in scores}
        if change.flags is not None:
            payload["flags"] = [flag.key for flag in rubric.flags if flag.key in set(change.flags)]
        if change.comment is not None:
            payload["comment"] = change.comment
        payload.setdefault("client_token", change.client_token)
        payload.setdefault("base_revision", latest)
        if change.source:
            seen[change.source] = change.seq
            payload["seen"] = seen
        draft.payload = payload
        if seconds_on_task is not None:
            draft.seconds_on_task = max(0.0, float(seconds_on_task))
        draft.updated_at = utcnow()
        session.add(draft)
    return DraftState(payload, applied=True)


def _differences(rubric: Rubric, shown: Mapping[str, int | None], saved: Mapping[str, int]) -> str:
    def say(value) -> str:
        return "none" if value is None else str(value)

    parts = [
        f"{d.name}: screen {say(shown.get(d.key))}, saved {say(saved.get(d.key))}"
        for d in rubric.dimensions
        if shown.get(d.key) != saved.get(d.key)
    ]
    return "; ".join(parts)


def submit(
    engine: Engine,
    assignment_id: int,
    reviewer_id: int | Actor,
    sheet: ScoreSheet,
    *,
    client_token: str,
    base_revision: int | None = None,
    seconds_on_task: float | None = 0.0,
    expected_scores: Mapping[str, int | None] | None = None,
) -> SubmitResult:
    """Store a new revision of the reviewer's annotation, at most once per client token.

    ``base_revision`` is the revision the reviewer was looking at (0 for a first submission);
    if someone (another window) has stored a newer one meanwhile, ``Conflict`` is raised.
    ``expected_scores`` is the score vector the reviewer saw when submitting (the review page
    always sends it). It must equal the saved draft's scores (the revision in force when an edit
    has no draft) and the sheet's; otherwise ``ScoresDiffer`` is raised and nothing is stored.
    ``seconds_on_task`` of ``None`` takes the time recorded with the draft.
    """
    if not client_token or len(client_token) > 64:
        raise ValueError("client_token must be 1-64 characters")
    try:
        return _submit(
            engine, assignment_id, reviewer_id, sheet, client_token, base_revision, seconds_on_task, expected_scores
        )
    except IntegrityError:
        # A concurrent submit with the same token won the race; return what it stored.
        with read_session(engine) as session:
            existing = session.exec(
                select(Annotation).where(
                    Annotation.assignment_id == assignment_id, Annotation.client_token == client_token
                )
            ).first()
        if existing is None:
            raise Conflict("this task was changed in another window; reload it to see the latest version") from None
        return SubmitResult(existing.id, existing.revision, created=False)


def _submit(engine, assignment_id, reviewer_id, sheet, client_token, base_revision, seconds, expected) -> SubmitResult:
    with write_session(engine) as session:
        assignment = _own(session, assignment_id, reviewer_id, lock=True)
        task = session.get(Task, assignment.task_id)
        if sheet.rubric != task.rubric:
            raise ValueError(f"scores are for rubric {sheet.rubric}, the task uses rubric {task.rubric}")
        repeat = session.exec(
            select(Annotation).where(Annotation.assignment_id == assignment.id, Annotation.client_token == client_token)
        ).first()
        if repeat is not None:
            return SubmitResult(repeat.id, repeat.revision, created=False)
        if task.locked:
            raise PermissionDenied("the study lead has locked this task; it can no longer be changed")
        latest = session.exec(
            select(func.coalesce(func.max(Annotation.revision), 0)).where(Annotation.assignment_id == assignment.id)
        ).one()
        if base_revision is not None and base_revision != latest:
            raise Conflict("this task was changed in another window; reload it to see the latest version")
        draft = session.get(Draft, assignment.id)
        if expected is not None:
            shown = {k: v for k, v in expected.items() if v is not None}
            if draft is not None:
                saved = dict(draft.payload.get("scores") or {})
            else:
                current = _current(session, assignment.id) if latest else None
                saved = dict(current.scores) if current else {}
            if shown != saved:
                raise ScoresDiffer(
                    "Not submitted: the scores on your screen are not the saved ones ("
                    + _differences(get_rubric(task.rubric), shown, saved)
                    + "). Check the scores and submit again."
                )
            if dict(sheet.scores) != shown:
                raise ScoresDiffer("Not submitted: the scores sent are not the scores on your screen; submit again.")
        if seconds is None:
            seconds = draft.seconds_on_task if draft is not None else 0.0
        previous = _current(session, assignment.id) if latest else None
        previous_flags = set(previous.flags) if previous is not None else set()
        annotation = Annotation(
            assignment_id=assignment.id,
            task_id=task.id,
            reviewer_id=assignment.reviewer_id,
            rubric=task.rubric,
            revision=latest + 1,
            flags=list(sheet.flags),
            comment=sheet.comment,
            seconds_on_task=max(0.0, float(seconds)),
            client_token=client_token,
        )
        session.add(annotation)
        session.flush()
        session.add_all(
            AnnotationScore(annotation_id=annotation.id, dimension=k, rubric=task.rubric, value=v)
            for k, v in sheet.scores.items()
        )
        _report_flags(session, assignment, get_rubric(task.rubric), sheet, previous_flags)
        now = utcnow()
        assignment.status = "submitted"
        assignment.submitted_at = now
        assignment.started_at = assignment.started_at or now
        session.add(assignment)
        if draft is not None:
            session.delete(draft)
        audit.record(
            session,
            actor_id=assignment.reviewer_id,
            action="annotation.submit" if latest == 0 else "annotation.edit",
            entity="annotation",
            entity_id=annotation.id,
            study_id=assignment.study_id,
            after={"assignment": assignment.id, "revision": latest + 1, "scores": sheet.scores},
        )
        return SubmitResult(annotation.id, annotation.revision, created=True)


def _report_flags(
    session: Session, assignment: Assignment, rubric: Rubric, sheet: ScoreSheet, before: set[str]
) -> None:
    """Send the flags ticked with this submission that report a problem to the lead's Flags page.

    Only flags new in this revision (an edit that keeps "Disputed gold answer" does not raise it
    twice); the comment goes with them, so the lead reads why.
    """
    for flag in rubric.flags:
        if not flag.reports or flag.key not in sheet.flags:
            continue
        if flag.key in before:
            continue
        comment = f"{flag.label} (ticked when scoring)" + (f": {sheet.comment}" if sheet.comment else "")
        flags.raise_flag(session, assignment, kind=flag.reports, comment=comment)


def skip(engine: Engine, assignment_id: int, reviewer_id: int | Actor) -> None:
    """Put a task at the back of the queue (it stays assigned; the draft is kept)."""
    with write_session(engine) as session:
        assignment = _own(session, assignment_id, reviewer_id)
        if assignment.status == "submitted":
            return
        assignment.status = "skipped"
        session.add(assignment)
        audit.record(
            session,
            actor_id=assignment.reviewer_id,
            action="assignment.skip",
            entity="assignment",
            entity_id=assignment.id,
            study_id=assignment.study_id,
        )


def set_flag(
    engine: Engine,
    assignment_id: int,
    reviewer_id: int | Actor,
    flagged: bool,
    note: str = "",
    *,
    kind: str = "other",
) -> None:
    """Flag a task for the study lead (what the problem is with, and a comment), or take the flag back.

    The flag becomes a row of ``task_flag`` that the lead's Flags page lists and answers
    (``services.flags``); unflagging withdraws the reviewer's open flags on the task.
    """
    if flagged:
        kind = flags.check_kind(kind)
    with write_session(engine) as session:
        assignment = _own(session, assignment_id, reviewer_id)
        assignment.flagged = flagged
        assignment.note = note[:2000]
        session.add(assignment)
        if flagged:
            flag_id: int | list[int] = flags.raise_flag(session, assignment, kind=kind, comment=note).id
        else:
            flag_id = flags.withdraw_flags(session, assignment.id)
        audit.record(
            session,
            actor_id=assignment.reviewer_id,
            action="assignment.flag" if flagged else "assignment.unflag",
            entity="assignment",
            entity_id=assignment.id,
            study_id=assignment.study_id,
            after={"note": note[:2000], "kind": kind if flagged else None, "flag": flag_id},
        )


def set_task_lock(engine: Engine, task_id: int, locked: bool, *, actor_id: int | Actor) -> None:
    """Lock (or unlock) a task: once locked, reviewers can no longer edit their annotations (leads of its study)."""
    with write_session(engine) as session:
        lead = acting_user(session, actor_id, roles=LEAD_ROLES)
        task = session.get(Task, task_id)
        if task is None:
            raise NotFound(f"no task {task_id}")
        require_study_lead(session, lead, session.get(Study, task.study_id))
        task.locked = locked
        task.locked_at = utcnow() if locked else None
        session.add(task)
        audit.record(
            session,
            actor_id=lead.id if lead else None,
            action="task.lock" if locked else "task.unlock",
            entity="task",
            entity_id=task.id,
            study_id=task.study_id,
        )
