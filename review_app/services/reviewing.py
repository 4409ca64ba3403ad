"""A reviewer's work on a task: opening it, drafts, submit, skip, flag; and a lead's task lock.

What is left to do and what comes next is :mod:`review_app.services.review_queue`; what a task shows
is :mod:`review_app.services.task_material`. The draft path (each keypress or click) is
:mod:`review_app.services.review_drafts` and the submit path :mod:`review_app.services.review_submit`;
both, and the writes here, follow the rules of :mod:`review_app.services.own_assignment` (every write
re-reads the reviewer and takes their own assignment; a client token and a base revision name a
submission). Their names are served from here too, so the pages and the command line call
``reviewing.X`` for every step of a review.

Blinding is enforced here, server-side, not in the page: ``open_task`` builds the view from the
reviewer's own assignment only, never loads another reviewer's annotation, and never loads the
model's name for a rubric that hides it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, update
from sqlmodel import select

from review_app.db.engine import read_only_reason, read_session, write_session
from review_app.db.models import Assignment, Draft, Study, Task, utcnow
from review_app.services import audit, flags
from review_app.services.actors import LEAD_ROLES, Actor, acting_user, require_study_lead
from review_app.services.errors import NotFound, ScoresDiffer
from review_app.services.own_assignment import Submitted, check_owner, in_force, own
from review_app.services.review_drafts import DraftChange, DraftState, change_draft, new_client_token, save_draft
from review_app.services.review_submit import SubmitResult, submit
from review_app.services.task_material import TaskMaterial, cached_material

__all__ = [
    "DraftChange",
    "DraftState",
    "ScoresDiffer",
    "SubmitResult",
    "Submitted",
    "TaskView",
    "change_draft",
    "new_client_token",
    "open_task",
    "save_draft",
    "set_flag",
    "set_task_lock",
    "skip",
    "submit",
]


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
        check_owner(assignment, reviewer_id)
        shown = cached_material(session, engine, task)
        submitted = in_force(session, assignment.id) if assignment.status == "submitted" else None
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


def skip(engine: Engine, assignment_id: int, reviewer_id: int | Actor) -> None:
    """Put a task at the back of the queue (it stays assigned; the draft is kept)."""
    with write_session(engine) as session:
        assignment = own(session, assignment_id, reviewer_id)
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
        assignment = own(session, assignment_id, reviewer_id)
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
