"""Who is acting, re-read at every change, and the study-lead relation the role rules use.

The role rules themselves are in docs/security.md ("Roles and permissions", "Enforcement in the
services: actor=").

Every service that changes an account, role, password, roster, study, enrolment or assignment takes
an :class:`Actor` and calls :func:`acting_user` inside its own transaction, so the rules hold
whatever the page showed: a deactivated account, or a session opened before a password or role
change, is refused at the service even if a stale browser tab still offers the button.

The command line acts as :data:`SYSTEM`: whoever can run ``medrev`` against the database can
already change any row in it, so the operator at the shell has every right (``medrev review --as
USER`` runs a command under a named account's rules instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import exists
from sqlmodel import Session, select

from review_app.db.models import Enrollment, Reviewer, Study, StudyLead
from review_app.services.errors import NotFound, PermissionDenied, SessionEnded

ROLE_RANK = {"reviewer": 0, "lead": 1, "admin": 2}
LEAD_ROLES = ("lead", "admin")


@dataclass(frozen=True)
class Actor:
    """The acting account as the caller knows it.

    ``session_version`` is the account's version when its session began (None outside a browser
    session, e.g. ``--as`` on the command line); a later password, role or status change raises the
    account's version and so ends the session at its next action.
    """

    id: int | None
    session_version: int | None = None

    @property
    def is_system(self) -> bool:
        return self.id is None


SYSTEM = Actor(None)
"""The operator at the shell (the command line, the demo seeder): every right."""


def as_actor(value: Actor | Reviewer | int) -> Actor:
    """An ``Actor`` for an account id or an account row (no session binding), or the actor itself."""
    if isinstance(value, Actor):
        return value
    if isinstance(value, Reviewer):
        return Actor(value.id)
    return Actor(int(value))


def acting_actor(actor: Actor | Reviewer | int | None, account_id: int | None) -> Actor:
    """The actor of a call that also accepts an older id keyword (``lead_id=``, ``actor_id=``).

    Either spelling names the acting account; passing neither is a programming error, so it raises
    ``TypeError`` rather than quietly acting as the system.
    """
    if actor is None and account_id is None:
        raise TypeError("pass actor= (the signed-in user, or actors.SYSTEM on the command line)")
    return as_actor(actor if actor is not None else account_id)


def acting_user(session: Session, actor: Actor | int, *, roles: tuple[str, ...] | None = None) -> Reviewer | None:
    """The actor's account re-read in the caller's transaction; None for the system actor.

    Raises ``SessionEnded`` when the account was deactivated or changed since the actor's session
    began, and ``PermissionDenied`` when its role is not among ``roles``.
    """
    actor = as_actor(actor)
    if actor.is_system:
        return None
    user = session.get(Reviewer, actor.id)
    if user is None or not user.active:
        raise SessionEnded("your account is deactivated; nothing was changed")
    if actor.session_version is not None and user.session_version != actor.session_version:
        raise SessionEnded(
            "your account changed since you signed in (new password, role or status); sign in again. "
            "Nothing was changed"
        )
    if roles is not None and user.role not in roles:
        raise PermissionDenied(f"{user.username} is a {user.role}; this needs a {' or '.join(roles)}")
    return user


def is_study_lead(session: Session, user: Reviewer | None, study_id: int) -> bool:
    """Admins and the system lead every study; a lead leads the studies listed for them in ``study_lead``."""
    if user is None or user.role == "admin":
        return True
    if user.role != "lead":
        return False
    return session.get(StudyLead, (study_id, user.id)) is not None


def require_study_lead(session: Session, user: Reviewer | None, study: Study) -> None:
    if not is_study_lead(session, user, study.id):
        raise PermissionDenied(f"you are not a lead of the study {study.name!r}; ask an admin or one of its leads")


def lead_manages(session: Session, lead: Reviewer, target: Reviewer) -> bool:
    """Whether ``target`` is one of the lead's reviewers: enrolled in a study they lead, or created by them."""
    if target.created_by_id == lead.id:
        return True
    shared = (
        select(Enrollment.id)
        .join(StudyLead, StudyLead.study_id == Enrollment.study_id)
        .where(Enrollment.reviewer_id == target.id, StudyLead.reviewer_id == lead.id)
    )
    return bool(session.exec(select(exists(shared))).one())


def get_study(session: Session, name: str) -> Study:
    study = session.exec(select(Study).where(Study.name == name)).first()
    if study is None:
        raise NotFound(f"no study named {name!r}")
    return study
