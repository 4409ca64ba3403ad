"""Submitting a reviewer's scores: a new revision of their annotation, at most once per client token.

Submitting is idempotent. Every submission carries a client token (created with the draft, so
it survives a reload) and the revision it was based on; the assignment row is locked (BEGIN
IMMEDIATE on SQLite, SELECT ... FOR UPDATE on PostgreSQL) and unique constraints on
(assignment, revision) and (assignment, token) back this up, so a double click, a Streamlit
rerun or a reconnect returns the existing annotation instead of creating a second one, and an
edit from a stale window is refused instead of overwriting a newer revision. A submit carries the
score vector the reviewer saw; ``submit`` refuses it (``ScoresDiffer``) when it is not the vector
saved in the draft (``review_drafts``), so a screen and a server that disagree never store scores
silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from review_app.db.engine import read_session, write_session
from review_app.db.models import Annotation, AnnotationScore, Assignment, Draft, Task, utcnow
from review_app.rubrics import Rubric, ScoreSheet, get_rubric
from review_app.services import audit, flags
from review_app.services.actors import Actor
from review_app.services.errors import Conflict, ScoresDiffer
from review_app.services.own_assignment import STALE_WINDOW, check_base_revision, in_force, own, refuse_locked


@dataclass(frozen=True)
class SubmitResult:
    """The annotation a submit stored, or the one an earlier submit with the same client token stored."""

    annotation_id: int
    revision: int
    created: bool  # False when this token had already been submitted (a repeat)


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
            raise Conflict(STALE_WINDOW) from None
        return SubmitResult(existing.id, existing.revision, created=False)


def _submit(engine, assignment_id, reviewer_id, sheet, client_token, base_revision, seconds, expected) -> SubmitResult:
    with write_session(engine) as session:
        assignment = own(session, assignment_id, reviewer_id, lock=True)
        task = session.get(Task, assignment.task_id)
        if sheet.rubric != task.rubric:
            raise ValueError(f"scores are for rubric {sheet.rubric}, the task uses rubric {task.rubric}")
        repeat = session.exec(
            select(Annotation).where(Annotation.assignment_id == assignment.id, Annotation.client_token == client_token)
        ).first()
        if repeat is not None:
            return SubmitResult(repeat.id, repeat.revision, created=False)
        refuse_locked(task)
        latest = check_base_revision(session, assignment.id, base_revision)
        draft = session.get(Draft, assignment.id)
        if expected is not None:
            shown = {k: v for k, v in expected.items() if v is not None}
            if draft is not None:
                saved = dict(draft.payload.get("scores") or {})
            else:
                current = in_force(session, assignment.id) if latest else None
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
        previous = in_force(session, assignment.id) if latest else None
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
