"""Flags a reviewer raises on a task, and the study lead's queue that answers them.

A reviewer flags a task from the review page ("Flag for lead"): what the problem is with (the
item, the model's response, the rubric, or something else) and a comment. The flag is a row of
``task_flag`` (see :func:`review_app.services.reviewing.set_flag`), so it reaches the lead's Flags
page instead of staying a bit on the assignment.

The lead answers each flag in one of three ways, each one audited:

* **resolve**, with an optional reply to the reviewer (the task stays in the study);
* **reply** only: the flag stays open, the reviewer sees the answer;
* **exclude** the task from the study: the task leaves every analysis and export (as gold tasks
  do, through :func:`excluded_tasks`), and is locked so no one rates it further.

``reopen`` puts a resolved or excluded flag back to open (the task comes back into the analyses;
it stays locked until a lead unlocks it on the Adjudication page).

Only a lead of the flag's study, or an admin, may see or answer its flags (docs/security.md, "Roles and
permissions"): every
function takes ``actor`` and checks it inside its own transaction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func
from sqlmodel import Session, select

from review_app.db.engine import read_session, write_session
from review_app.db.models import FLAG_KINDS, FLAG_STATUSES, Item, Reviewer, Study, Task, TaskFlag, utcnow
from review_app.services import audit
from review_app.services.actors import SYSTEM, Actor, get_study
from review_app.services.annotations import excluded_tasks as excluded_tasks
from review_app.services.annotations import rater_labels
from review_app.services.errors import InvalidInput, NotFound
from review_app.services.studies import lead_of

KIND_LABELS: dict[str, str] = {
    "item": "Problem with the item",
    "response": "Problem with the model's response",
    "rubric": "Problem with the rubric",
    "other": "Something else",
}
STATUS_LABELS: dict[str, str] = {
    "open": "open",
    "resolved": "resolved",
    "excluded": "task excluded",
    "withdrawn": "withdrawn by the reviewer",
}
ACTIONS = ("resolve", "reply", "exclude", "reopen")
MAX_TEXT = 2000

assert set(KIND_LABELS) == set(FLAG_KINDS) and set(STATUS_LABELS) == set(FLAG_STATUSES)


@dataclass(frozen=True)
class FlagRow:
    """One flag as the lead's queue shows it (the reviewer under the study's pseudonym)."""

    flag_id: int
    task_id: int
    rubric: str
    unit_key: str
    subset: str
    question: str
    reviewer: str
    kind: str
    comment: str
    status: str
    reply: str
    created_at: datetime
    resolved_by: str | None
    resolved_at: datetime | None

    @property
    def kind_label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_kind(kind: str) -> str:
    """The flag kind, lower-cased, or ``InvalidInput`` naming the kinds there are."""
    kind = (kind or "").strip().lower()
    if kind not in FLAG_KINDS:
        raise InvalidInput(f"unknown flag kind {kind!r}; choose one of {', '.join(FLAG_KINDS)}")
    return kind


def flag_queue(
    engine: Engine, study_name: str, *, actor: Actor | int, statuses: tuple[str, ...] | None = ("open",)
) -> list[FlagRow]:
    """The study's flags, newest first; ``statuses`` None lists every flag (open, resolved, excluded...)."""
    with read_session(engine) as session:
        study = get_study(session, study_name)
        lead_of(session, actor, study)
        names = rater_labels(session, study.id)
        query = (
            select(TaskFlag, Task.rubric, Task.unit_key, Item.subset, Item.question)
            .join(Task, Task.id == TaskFlag.task_id)
            .join(Item, Item.id == Task.item_id)
            .where(TaskFlag.study_id == study.id)
            .order_by(TaskFlag.created_at.desc(), TaskFlag.id.desc())
        )
        if statuses is not None:
            query = query.where(TaskFlag.status.in_(statuses))
        rows = session.exec(query).all()
        leads = {r[0].resolved_by_id for r in rows if r[0].resolved_by_id is not None}
        lead_names = (
            dict(session.exec(select(Reviewer.id, Reviewer.username).where(Reviewer.id.in_(leads))).all())
            if leads
            else {}
        )
    return [
        FlagRow(
            flag_id=flag.id,
            task_id=flag.task_id,
            rubric=rubric,
            unit_key=unit_key,
            subset=subset,
            question=question[:200],
            reviewer=names.get(flag.reviewer_id, f"reviewer {flag.reviewer_id}"),
            kind=flag.kind,
            comment=flag.comment,
            status=flag.status,
            reply=flag.reply,
            created_at=flag.created_at,
            resolved_by=lead_names.get(flag.resolved_by_id) if flag.resolved_by_id else None,
            resolved_at=flag.resolved_at,
        )
        for flag, rubric, unit_key, subset, question in rows
    ]


def flag_counts(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> dict[str, int]:
    """Flags of the study by status (every status present, zeros included), for a lead of the study."""
    with read_session(engine) as session:
        study = get_study(session, study_name)
        lead_of(session, actor, study)
        rows = session.exec(
            select(TaskFlag.status, func.count()).where(TaskFlag.study_id == study.id).group_by(TaskFlag.status)
        ).all()
    counts = dict.fromkeys(FLAG_STATUSES, 0)
    counts.update({status: int(n) for status, n in rows})
    return counts


def answer_flag(engine: Engine, flag_id: int, action: str, *, actor: Actor | int, reply: str = "") -> str:
    """Resolve, reply to, exclude the task of, or reopen a flag (see the module notes); audited.

    Returns the flag's new status. Raises ``NotFound``, ``InvalidInput`` (unknown action, a reply
    without text, an action the flag's status does not allow) or ``PermissionDenied`` (not a lead of
    the flag's study, or the actor's session ended).
    """
    action = (action or "").strip().lower()
    reply = (reply or "").strip()
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}; choose one of {', '.join(ACTIONS)}")
    if len(reply) > MAX_TEXT:
        raise InvalidInput(f"the reply is too long ({len(reply)} characters, at most {MAX_TEXT})")
    if action == "reply" and not reply:
        raise InvalidInput("write the reply to send to the reviewer")
    with write_session(engine) as session:
        flag = session.exec(select(TaskFlag).where(TaskFlag.id == flag_id).with_for_update()).first()
        if flag is None:
            raise NotFound(f"no flag {flag_id}")
        study = session.get(Study, flag.study_id)
        me = lead_of(session, actor, study)
        before = {"status": flag.status, "reply": flag.reply}
        if flag.status == "withdrawn":
            raise InvalidInput("the reviewer withdrew this flag; there is nothing to answer")
        if action == "reopen" and flag.status == "open":
            raise InvalidInput("this flag is already open")
        if action in ("resolve", "exclude") and flag.status != "open":
            raise InvalidInput(f"this flag is already {STATUS_LABELS[flag.status]}; reopen it first")
        task = session.exec(select(Task).where(Task.id == flag.task_id).with_for_update()).one()
        if reply:
            flag.reply = reply
        if action == "reopen":
            flag.status, flag.resolved_by_id, flag.resolved_at = "open", None, None
        elif action in ("resolve", "exclude"):
            flag.status = "resolved" if action == "resolve" else "excluded"
            flag.resolved_by_id = me.id if me is not None else None
            flag.resolved_at = utcnow()
        if action == "exclude" and not task.locked:
            task.locked, task.locked_at = True, utcnow()
            session.add(task)
        session.add(flag)
        audit.record(
            session,
            actor_id=me.id if me is not None else None,
            action=f"flag.{action}",
            entity="task_flag",
            entity_id=flag.id,
            study_id=flag.study_id,
            before=before,
            after={"status": flag.status, "reply": flag.reply, "task": flag.task_id, "task_locked": task.locked},
        )
        return flag.status


def raise_flag(session: Session, assignment, *, kind: str, comment: str) -> TaskFlag:
    """Add the reviewer's flag on their assignment to the caller's transaction (``reviewing.set_flag``)."""
    flag = TaskFlag(
        study_id=assignment.study_id,
        task_id=assignment.task_id,
        assignment_id=assignment.id,
        reviewer_id=assignment.reviewer_id,
        kind=check_kind(kind),
        comment=(comment or "").strip()[:MAX_TEXT],
    )
    session.add(flag)
    session.flush()
    return flag


def withdraw_flags(session: Session, assignment_id: int) -> list[int]:
    """Mark the reviewer's open flags on an assignment withdrawn (they unflagged it); returns their ids."""
    flags = session.exec(
        select(TaskFlag).where(TaskFlag.assignment_id == assignment_id, TaskFlag.status == "open")
    ).all()
    for flag in flags:
        flag.status = "withdrawn"
        session.add(flag)
    return [f.id for f in flags]


def latest_answer(engine: Engine, assignment_id: int) -> tuple[str, str, str] | None:
    """(kind, status, lead's reply) of the newest flag on an assignment, for the reviewer's page."""
    with read_session(engine) as session:
        flag = session.exec(
            select(TaskFlag).where(TaskFlag.assignment_id == assignment_id).order_by(TaskFlag.id.desc())
        ).first()
    if flag is None:
        return None
    return flag.kind, flag.status, flag.reply
