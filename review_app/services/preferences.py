"""What an account chose last in the app: the study its lead pages open on in a new session.

A preference belongs to its account: the acting user reads and sets only their own (an admin
cannot set another account's), and the operator at the shell (``SYSTEM``) may set anyone's. A
switch of study is not audited: it changes nothing in a study or its data, and the audit log is
append-only, so every click of the selector would stay in it for ever.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, select

from review_app.db.engine import read_session, write_session
from review_app.db.models import Reviewer, ReviewerPreference, Study, utcnow
from review_app.services.actors import LEAD_ROLES, Actor, acting_user, as_actor, get_study
from review_app.services.errors import NotFound, PermissionDenied


def last_study(engine: Engine, actor: Actor) -> str | None:
    """The name of the study the acting account chose last, or None (never chosen, or no account).

    A study deleted since then clears the choice (the foreign key sets it to NULL), so a name
    returned is a study that exists.
    """
    actor = as_actor(actor)
    if actor.is_system:
        return None
    with read_session(engine) as session:
        return session.exec(
            select(Study.name)
            .join(ReviewerPreference, ReviewerPreference.last_study_id == Study.id)
            .where(ReviewerPreference.reviewer_id == actor.id)
        ).first()


def remember_study(engine: Engine, username: str, study: str, *, actor: Actor) -> bool:
    """Record ``study`` as the one ``username``'s lead pages open on; whether the stored choice changed.

    Only the account itself (a lead or admin, with a live session) may set it; ``PermissionDenied``
    for anyone else, ``NotFound`` for an unknown account or study. Repeating the stored choice
    writes nothing.
    """
    with write_session(engine) as session:
        me = acting_user(session, actor, roles=LEAD_ROLES)
        user = session.exec(select(Reviewer).where(Reviewer.username == username.strip().lower())).first()
        if user is None:
            raise NotFound(f"no user named {username!r}")
        if me is not None and me.id != user.id:
            raise PermissionDenied("the study a lead's pages open on is their own choice: you can set only yours")
        chosen = get_study(session, study)
        held = session.get(ReviewerPreference, user.id)
        if held is not None and held.last_study_id == chosen.id:
            return False
        _upsert(session, user.id, chosen.id)
        return True


def _upsert(session: Session, reviewer_id: int, study_id: int) -> None:
    """One statement whatever the row's state, so two tabs of one lead saving at once cannot collide."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    values = {"last_study_id": study_id, "updated_at": utcnow()}
    statement = dialect.insert(ReviewerPreference).values(reviewer_id=reviewer_id, **values)
    session.execute(statement.on_conflict_do_update(index_elements=["reviewer_id"], set_=values))
