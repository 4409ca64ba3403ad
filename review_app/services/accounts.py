"""Reviewer accounts: profiles, roles, activation and passwords, with the rules of who may change whom.

No plaintext password is ever stored, logged, audited or exported: audit events record that a
password changed, never its value or hash.

Role rules (docs/security.md, "Roles and permissions"), checked here whatever the page offered: a
reviewer manages no account; a lead creates reviewers and alters, deactivates or resets the password
of the reviewers of their own studies (enrolled in a study they lead, or created by them); only an
admin creates, alters, deactivates or resets the password of a lead or an admin; nobody grants a role
above their own; nobody deactivates their own account or changes their own role. A password, role
or status change raises the account's ``session_version``, which ends its open sessions at their
next action. Signing in and hashing passwords are :mod:`review_app.services.authentication`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, EmailStr, Field, ValidationError, field_validator
from sqlalchemy import Engine, delete, func
from sqlmodel import Session, select

from review_app.db.engine import read_session, write_session
from review_app.db.models import ROLES, Reviewer, SigninThrottle
from review_app.services import audit
from review_app.services.actors import ROLE_RANK, Actor, acting_user, lead_manages
from review_app.services.authentication import hash_password, user_throttle_key
from review_app.services.errors import Conflict, InvalidInput, NotFound, PermissionDenied

_LANG = re.compile(r"^[a-z]{2,3}$")

_USERNAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,63}$")


def normalise_languages(value: str | list[str] | None) -> str:
    """ "en; ZH" or ["en", "zh"] -> "en,zh"; raises ValueError naming a bad code."""
    if value is None:
        return "en"
    parts = value if isinstance(value, list) else re.split(r"[;,\s]+", str(value))
    codes: list[str] = []
    for part in parts:
        code = part.strip().lower()
        if not code:
            continue
        if not _LANG.match(code):
            raise ValueError(f"language {part!r} is not a 2- or 3-letter ISO code such as en or zh")
        if code not in codes:
            codes.append(code)
    return ",".join(codes) or "en"


def normalise_role(value: str) -> str:
    """ "Lead " -> "lead"; raises ValueError naming an unknown role."""
    role = value.strip().lower()
    if role not in ROLES:
        raise ValueError(f"unknown role {value!r}; expected one of {', '.join(ROLES)}")
    return role


class UserProfile(BaseModel):
    """A validated reviewer profile (table models skip validation, so input passes through here)."""

    model_config = ConfigDict(str_strip_whitespace=True)

    username: str
    display_name: str = Field(min_length=1, max_length=200)
    role: str = "reviewer"
    email: EmailStr | None = None
    profession: str = Field(default="", max_length=200)
    country: str = Field(default="", max_length=100)
    years_experience: int | None = Field(default=None, ge=0, le=80)
    languages: str = "en"

    @field_validator("username")
    @classmethod
    def _username(cls, value: str) -> str:
        name = value.strip().lower()
        if not _USERNAME.match(name):
            raise ValueError(
                f"username {value!r} must be 2-64 characters: letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        return name

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        return normalise_role(value)

    @field_validator("languages", mode="before")
    @classmethod
    def _languages(cls, value):
        return normalise_languages(value)

    @field_validator("email", mode="before")
    @classmethod
    def _empty_email(cls, value):
        return value or None


def new_profile(**fields: Any) -> UserProfile:
    """A ``UserProfile`` from form or command-line values, or ``InvalidInput`` naming each bad field in one line
    (pydantic's own report runs to several lines and links to its website)."""
    try:
        return UserProfile(**fields)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"]) or "profile"
            message = error["msg"].removeprefix("Value error, ")
            found = error.get("input")
            shown = "" if found is None or repr(found) in message else f" (found {found!r})"
            problems.append(f"{field}: {message}{shown}")
        raise InvalidInput("; ".join(problems)) from None


# ---------------------------------------------------------------- role rules


def _profile_dict(user: Reviewer) -> dict:
    return {
        "username": user.username,
        "display_name": user.display_name,
        "role": user.role,
        "email": user.email,
        "profession": user.profession,
        "country": user.country,
        "years_experience": user.years_experience,
        "languages": user.languages,
        "active": user.active,
    }


def check_account_change(
    session: Session, me: Reviewer | None, target: Reviewer | None, *, new_role: str | None = None, action: str
) -> None:
    """Refuse what ``me`` may not do to ``target`` (None: a new account) with ``PermissionDenied``.

    ``action`` is one of create, update, role, password, deactivate, activate; ``new_role`` the
    role being granted (on create or a role change). ``me`` None is the operator at the shell.
    """
    if me is None:
        return
    if me.role not in ("lead", "admin"):
        raise PermissionDenied("only study leads and admins manage accounts")
    if new_role is not None and ROLE_RANK[new_role] > ROLE_RANK[me.role]:
        raise PermissionDenied(f"you cannot grant the role {new_role}: it is above your own ({me.role})")
    if me.role != "admin":
        if {new_role, target.role if target else None} & {"lead", "admin"}:
            raise PermissionDenied(
                "only an admin can create, change, deactivate or reset the password of a lead or admin account"
            )
        if target is not None and not lead_manages(session, me, target):
            raise PermissionDenied(
                f"{target.username} is not a reviewer of your studies; ask an admin or the lead of their study"
            )
    if target is not None and target.id == me.id and action in ("deactivate", "role"):
        raise PermissionDenied("you cannot deactivate your own account or change your own role; ask another admin")


def _email_free(session: Session, email: str | None, user_id: int | None) -> None:
    if not email:
        return
    taken = session.exec(select(Reviewer).where(func.lower(Reviewer.email) == email.lower())).first()
    if taken is not None and taken.id != user_id:
        raise Conflict(f"the email {email} already belongs to {taken.username}")


def create_account(
    session: Session, me: Reviewer | None, profile: UserProfile, *, password_hash: str | None = None
) -> Reviewer:
    """Create an account in the caller's transaction after the role rules (shared with roster imports)."""
    check_account_change(session, me, None, new_role=profile.role, action="create")
    if session.exec(select(Reviewer).where(Reviewer.username == profile.username)).first() is not None:
        raise Conflict(f"the username {profile.username!r} is taken")
    _email_free(session, profile.email, None)
    user = Reviewer(**profile.model_dump(), password_hash=password_hash, created_by_id=me.id if me else None)
    session.add(user)
    session.flush()
    audit.record(
        session,
        actor_id=me.id if me else None,
        action="user.create",
        entity="reviewer",
        entity_id=user.id,
        after=_profile_dict(user) | {"has_password": password_hash is not None},
    )
    return user


def change_account(session: Session, me: Reviewer | None, user: Reviewer, changes: dict) -> bool:
    """Apply profile ``changes`` to ``user`` in the caller's transaction after the role rules.

    Only the keys given change (a roster without a column leaves that field alone). A role change
    ends the account's open sessions. Returns whether anything changed.
    """
    changes = {k: v for k, v in changes.items() if getattr(user, k) != v}
    if not changes:
        return False
    new_role = changes.get("role")
    check_account_change(session, me, user, new_role=new_role, action="role" if new_role else "update")
    if "email" in changes:
        _email_free(session, changes["email"], user.id)
    before = _profile_dict(user)
    for key, value in changes.items():
        setattr(user, key, value)
    if new_role is not None:
        user.session_version += 1
    session.add(user)
    audit.record(
        session,
        actor_id=me.id if me else None,
        action="user.update",
        entity="reviewer",
        entity_id=user.id,
        before=before,
        after=_profile_dict(user),
    )
    return True


def grantable_roles(engine: Engine, actor: Actor) -> tuple[str, ...]:
    """The roles ``actor`` may give a new or existing account (for the pages' choices)."""
    with read_session(engine) as session:
        me = acting_user(session, actor)
    if me is None or me.role == "admin":
        return ROLES
    return ("reviewer",) if me.role == "lead" else ()


def manageable_users(engine: Engine, actor: Actor) -> list[Reviewer]:
    """The accounts whose profile and password ``actor`` may change, by the rules above."""
    with read_session(engine) as session:
        me = acting_user(session, actor)
        allowed = []
        for user in session.exec(select(Reviewer).order_by(Reviewer.username)):
            try:
                check_account_change(session, me, user, action="update")
            except PermissionDenied:
                continue
            allowed.append(user)
        return allowed


# ---------------------------------------------------------------- account changes


def create_user(engine: Engine, profile: UserProfile, *, password: str | None = None, actor: Actor) -> Reviewer:
    """Create an account; ``password`` may be None for sign-in through the identity provider."""
    password_hash = hash_password(password) if password is not None else None
    with write_session(engine) as session:
        return create_account(session, acting_user(session, actor), profile, password_hash=password_hash)


def update_profile(engine: Engine, profile: UserProfile, *, actor: Actor) -> Reviewer:
    """Replace a user's profile fields, role included (not the password)."""
    with write_session(engine) as session:
        me = acting_user(session, actor)
        user = _get(session, profile.username)
        change_account(session, me, user, profile.model_dump())
        return user


def set_role(engine: Engine, username: str, role: str, *, actor: Actor) -> Reviewer:
    """Give an account another role (which ends its open sessions)."""
    try:
        role = normalise_role(role)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    with write_session(engine) as session:
        me = acting_user(session, actor)
        user = _get(session, username)
        change_account(session, me, user, {"role": role})
        return user


def set_password(engine: Engine, username: str, password: str, *, actor: Actor) -> None:
    """Set a new password, end the account's open sessions and clear any lock-out of its username."""
    password_hash = hash_password(password)
    with write_session(engine) as session:
        me = acting_user(session, actor)
        user = _get(session, username)
        check_account_change(session, me, user, action="password")
        user.password_hash = password_hash
        user.session_version += 1
        session.add(user)
        session.execute(delete(SigninThrottle).where(SigninThrottle.key == user_throttle_key(user.username)))
        audit.record(
            session, actor_id=me.id if me else None, action="user.password", entity="reviewer", entity_id=user.id
        )


def set_active(engine: Engine, username: str, active: bool, *, actor: Actor) -> None:
    """Deactivate (or reactivate) an account; deactivation ends its open sessions at their next action."""
    with write_session(engine) as session:
        me = acting_user(session, actor)
        user = _get(session, username)
        check_account_change(session, me, user, action="activate" if active else "deactivate")
        before = user.active
        if before == active:
            return
        user.active = active
        if not active:
            user.session_version += 1
        session.add(user)
        audit.record(
            session,
            actor_id=me.id if me else None,
            action="user.activate" if active else "user.deactivate",
            entity="reviewer",
            entity_id=user.id,
            before={"active": before},
            after={"active": active},
        )


# ---------------------------------------------------------------- reads


def _get(session, username: str) -> Reviewer:
    user = session.exec(select(Reviewer).where(Reviewer.username == username.strip().lower())).first()
    if user is None:
        raise NotFound(f"no user named {username!r}")
    return user


def get_user(engine: Engine, username: str) -> Reviewer:
    with read_session(engine) as session:
        return _get(session, username)


def get_user_by_id(engine: Engine, user_id: int) -> Reviewer:
    with read_session(engine) as session:
        user = session.get(Reviewer, user_id)
        if user is None:
            raise NotFound(f"no user with id {user_id}")
        return user


def get_user_by_email(engine: Engine, email: str) -> Reviewer | None:
    """The active account whose email matches (case-insensitive), for identity-provider sign-in."""
    with read_session(engine) as session:
        return session.exec(
            select(Reviewer).where(func.lower(Reviewer.email) == email.strip().lower(), Reviewer.active)
        ).first()


def list_users(engine: Engine, *, role: str | None = None, active_only: bool = False) -> list[Reviewer]:
    with read_session(engine) as session:
        query = select(Reviewer).order_by(Reviewer.username)
        if role is not None:
            query = query.where(Reviewer.role == role)
        if active_only:
            query = query.where(Reviewer.active)
        return list(session.exec(query))
