"""A reviewer's unsubmitted input: the draft of an assignment, changed one keypress or click at a time.

Input arrives as changes that name what they change (``change_draft``): each keypress or click
carries the assignment, the submission it belongs to (client token and base revision) and the
dimension it was meant for, so a change that reaches the server late is applied to exactly what
it names, or refused if that submission is over; never to whatever happens to be open now. The
draft is what ``review_submit.submit`` checks the reviewer's screen against.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlmodel import select

from review_app.db.engine import write_session
from review_app.db.models import Annotation, Draft, Task, utcnow
from review_app.rubrics import Rubric, get_rubric
from review_app.services.actors import Actor
from review_app.services.errors import Conflict, InvalidInput
from review_app.services.own_assignment import check_base_revision, in_force, own, refuse_locked


def new_client_token() -> str:
    """A fresh client token, created with a draft so that it survives a reload and names one submission."""
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
        assignment = own(session, assignment_id, reviewer_id)
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
        assignment = own(session, assignment_id, reviewer_id, lock=True)
        task = session.get(Task, assignment.task_id)
        rubric = get_rubric(task.rubric)
        _check_change(rubric, change)
        refuse_locked(task)
        done = session.exec(
            select(Annotation.id).where(
                Annotation.assignment_id == assignment.id, Annotation.client_token == change.client_token
            )
        ).first()
        if done is not None:
            raise Conflict("this task was already submitted; the change was not applied")
        latest = check_base_revision(session, assignment.id, change.base_revision)
        draft = session.get(Draft, assignment.id)
        if draft is None:
            draft = Draft(assignment_id=assignment.id, seconds_on_task=0.0)
            payload: dict[str, Any] = {"client_token": change.client_token, "base_revision": latest}
            if latest:  # an edit starts from the revision in force
                current = in_force(session, assignment.id)
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
