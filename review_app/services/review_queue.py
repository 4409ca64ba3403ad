"""A reviewer's queue: what is left to do, what comes next, and what they have submitted.

Reads only, each one short query: the queue page and the review page run them on every rerun, and
:func:`next_assignment` is an index lookup however long the reviewer's queue is. Working on a task
(drafts, submit, skip, flag) is :mod:`review_app.services.reviewing`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, case, func
from sqlmodel import select

from review_app.db.engine import read_session, statement_session
from review_app.db.models import Annotation, Assignment, Item, Study, Task

_QUEUE_STATUSES = ("in_progress", "assigned", "skipped")  # the order next_assignment serves them in


@dataclass(frozen=True)
class QueueRow:
    study_id: int
    study: str
    rubric: str
    open: int
    skipped: int
    submitted: int

    @property
    def total(self) -> int:
        return self.open + self.skipped + self.submitted


def queue(engine: Engine, reviewer_id: int) -> list[QueueRow]:
    """Counts of open, skipped and submitted tasks per study and rubric for one reviewer."""
    with read_session(engine) as session:
        rows = session.exec(
            select(
                Study.id,
                Study.name,
                Task.rubric,
                func.sum(case((Assignment.status.in_(("assigned", "in_progress")), 1), else_=0)),
                func.sum(case((Assignment.status == "skipped", 1), else_=0)),
                func.sum(case((Assignment.status == "submitted", 1), else_=0)),
            )
            .join(Task, Task.id == Assignment.task_id)
            .join(Study, Study.id == Assignment.study_id)
            .where(Assignment.reviewer_id == reviewer_id, Assignment.status != "withdrawn", Study.status == "active")
            .group_by(Study.id, Study.name, Task.rubric)
            .order_by(Study.name, Task.rubric)
        ).all()
    return [QueueRow(r[0], r[1], r[2], int(r[3] or 0), int(r[4] or 0), int(r[5] or 0)) for r in rows]


def work_counts(engine: Engine, reviewer_id: int) -> tuple[int, int]:
    """(done, still to do) over the reviewer's tasks in active studies; to do includes skipped ones."""
    with read_session(engine) as session:
        done, todo = session.exec(
            select(
                func.sum(case((Assignment.status == "submitted", 1), else_=0)),
                func.sum(case((Assignment.status.in_(("assigned", "in_progress", "skipped")), 1), else_=0)),
            )
            .join(Study, Study.id == Assignment.study_id)
            .where(Assignment.reviewer_id == reviewer_id, Study.status == "active")
        ).one()
    return int(done or 0), int(todo or 0)


def next_assignment(
    engine: Engine, reviewer_id: int, *, study_id: int | None = None, rubric: str | None = None
) -> int | None:
    """The reviewer's next assignment: work in progress first, then new, then skipped ones.

    Within a status, studies come in the order they were created and tasks in pool order, with
    Rubric A before Rubric B of the same unit, so an item is validated before its response is judged.

    One query per status, in that order, each reading ``ix_assignment_next`` (reviewer, status,
    study, pool rank, rubric, id) from its start and stopping at the first assignment whose task is
    not locked: an index lookup however long the reviewer's queue is. The queries run without a
    transaction on PostgreSQL (``statement_session``): each is one round trip, and a change between
    them (a task locked, a skip) shows at the next call, as it would a moment later anyway.
    """
    with statement_session(engine) as session:
        for status in _QUEUE_STATUSES:
            query = (
                select(Assignment.id)
                .join(Task, Task.id == Assignment.task_id)
                .where(Assignment.reviewer_id == reviewer_id, Assignment.status == status, Task.locked.is_(False))
                .order_by(Assignment.study_id, Assignment.pool_rank, Assignment.rubric, Assignment.id)
                .limit(1)
            )
            if study_id is not None:
                query = query.where(Assignment.study_id == study_id)
            else:
                query = query.where(Assignment.study_id.in_(select(Study.id).where(Study.status == "active")))
            if rubric is not None:
                query = query.where(Assignment.rubric == rubric)
            found = session.exec(query).first()
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class DoneRow:
    assignment_id: int
    study: str
    rubric: str
    subset: str
    question: str
    revision: int
    locked: bool


def submitted_work(engine: Engine, reviewer_id: int, *, limit: int = 200) -> list[DoneRow]:
    """The reviewer's submitted tasks, newest first, for review and editing."""
    with read_session(engine) as session:
        rows = session.exec(
            select(Assignment.id, Study.name, Task.rubric, Item.subset, Item.question, Task.locked)
            .join(Task, Task.id == Assignment.task_id)
            .join(Study, Study.id == Assignment.study_id)
            .join(Item, Item.id == Task.item_id)
            .where(Assignment.reviewer_id == reviewer_id, Assignment.status == "submitted")
            .order_by(Assignment.submitted_at.desc())
            .limit(limit)
        ).all()
        revisions = dict(
            session.exec(
                select(Annotation.assignment_id, func.max(Annotation.revision))
                .where(Annotation.reviewer_id == reviewer_id)
                .group_by(Annotation.assignment_id)
            ).all()
        )
    return [DoneRow(r[0], r[1], r[2], r[3], r[4][:140], revisions.get(r[0], 0), r[5]) for r in rows]
