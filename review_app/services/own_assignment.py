"""The rules every write of a reviewer's own work follows, shared by drafts, submits, skips and flags.

Every write re-reads the reviewer and takes their own live assignment (:func:`own`, docs/security.md,
"Sessions"); drafts and submits agree on what names a submission: its client token and the revision
it was based on (:func:`latest_revision`, :data:`STALE_WINDOW`). The annotation in force on an
assignment is :class:`Submitted`, which the lead's side extends with who rated and when
(:class:`~review_app.services.rating_comparison.Rating`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, select

from review_app.db.models import Annotation, AnnotationScore, Assignment, Task
from review_app.services.actors import Actor, acting_user, as_actor
from review_app.services.errors import Conflict, NotFound, PermissionDenied

# A change or submit based on a revision that is no longer the latest: another window stored a newer one.
STALE_WINDOW = "this task was changed in another window; reload it to see the latest version"


@dataclass(frozen=True)
class Submitted:
    """An annotation in force on an assignment: the reviewer's own one on the review page."""

    annotation_id: int
    revision: int
    scores: dict[str, int]
    flags: tuple[str, ...]
    comment: str
    seconds_on_task: float


def own(session: Session, assignment_id: int, reviewer: int | Actor, *, lock: bool = False) -> Assignment:
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
    check_owner(assignment, actor.id)
    return assignment


def check_owner(assignment: Assignment, reviewer_id: int) -> None:
    """Refuse an assignment that is someone else's, or that the lead reassigned."""
    if assignment.reviewer_id != reviewer_id:
        raise PermissionDenied("this task is assigned to someone else")
    if assignment.status == "withdrawn":
        raise PermissionDenied("this task was reassigned by the study lead")


def refuse_locked(task: Task) -> None:
    """A task the lead locked takes no more changes from its reviewers."""
    if task.locked:
        raise PermissionDenied("the study lead has locked this task; it can no longer be changed")


def latest_revision(session: Session, assignment_id: int) -> int:
    """The newest stored revision of the assignment's annotation (0 before the first submit)."""
    return session.exec(
        select(func.coalesce(func.max(Annotation.revision), 0)).where(Annotation.assignment_id == assignment_id)
    ).one()


def check_base_revision(session: Session, assignment_id: int, base_revision: int | None) -> int:
    """The latest revision, refusing (``Conflict``) a change based on an older one; None accepts any."""
    latest = latest_revision(session, assignment_id)
    if base_revision is not None and base_revision != latest:
        raise Conflict(STALE_WINDOW)
    return latest


def in_force(session: Session, assignment_id: int) -> Submitted | None:
    """The assignment's latest revision with its scores (None before the first submit)."""
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
    return Submitted(
        annotation_id=annotation.id,
        revision=annotation.revision,
        scores={dimension: value for _a, dimension, value in rows},
        flags=tuple(annotation.flags),
        comment=annotation.comment,
        seconds_on_task=annotation.seconds_on_task,
    )
