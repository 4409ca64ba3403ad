"""Reviewer accounts: profiles, argon2 password hashes, sign-in with lock-out.

No plaintext password is ever stored, logged, audited or exported: audit events record that a
password changed, never its value or hash. Verification is argon2's constant-time comparison,
and an unknown username costs the same hash computation as a known one, so timing does not
reveal which usernames exist.
"""

from __future__ import annotations

import re
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from pydantic import BaseModel, ConfigDict, EmailStr, Field, field_validator
from sqlalchemy import Engine, func
from sqlmodel import select

from review_app.config import get_settings
from review_app.db.engine import read_only_reason, read_session, write_session
from review_app.db.models import ROLES, Reviewer, utcnow
from review_app.services import audit
from review_app.services.errors import AccountLocked, Conflict, InvalidInput, NotFound

MIN_PASSWORD_LENGTH = 10
_hasher = PasswordHasher()
_DUMMY_HASH = _hasher.hash("medrev-timing-equaliser")
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
        role = value.strip().lower()
        if role not in ROLES:
            raise ValueError(f"unknown role {value!r}; expected one of {', '.join(ROLES)}")
        return role

    @field_validator("languages", mode="before")
    @classmethod
    def _languages(cls, value):
        return normalise_languages(value)

    @field_validator("email", mode="before")
    @classmethod
    def _empty_email(cls, value):
        return value or None


def hash_password(password: str) -> str:
    """An argon2id hash of ``password`` after checking the minimum length."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    return _hasher.hash(password)


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


def create_user(
    engine: Engine,
    profile: UserProfile,
    *,
    password: str | None = None,
    actor_id: int | None = None,
) -> Reviewer:
    """Create an account; ``password`` may be None for sign-in through the identity provider."""
    password_hash = hash_password(password) if password is not None else None
    with write_session(engine) as session:
        clash = session.exec(select(Reviewer).where(Reviewer.username == profile.username)).first()
        if clash is not None:
            raise Conflict(f"the username {profile.username!r} is taken")
        if profile.email:
            taken = session.exec(select(Reviewer).where(func.lower(Reviewer.email) == profile.email.lower())).first()
            if taken is not None:
                raise Conflict(f"the email {profile.email} already belongs to {taken.username}")
        user = Reviewer(**profile.model_dump(), password_hash=password_hash)
        session.add(user)
        session.flush()
        audit.record(
            session,
            actor_id=actor_id,
            action="user.create",
            entity="reviewer",
            entity_id=user.id,
            after=_profile_dict(user) | {"has_password": password_hash is not None},
        )
        return user


def update_profile(engine: Engine, profile: UserProfile, *, actor_id: int | None = None) -> Reviewer:
    """Replace a user's profile fields (not the password)."""
    with write_session(engine) as session:
        user = _get(session, profile.username)
        before = _profile_dict(user)
        for key, value in profile.model_dump().items():
            setattr(user, key, value)
        session.add(user)
        audit.record(
            session,
            actor_id=actor_id,
            action="user.update",
            entity="reviewer",
            entity_id=user.id,
            before=before,
            after=_profile_dict(user),
        )
        return user


def set_password(engine: Engine, username: str, password: str, *, actor_id: int | None = None) -> None:
    """Set a new password and clear any lock-out."""
    password_hash = hash_password(password)
    with write_session(engine) as session:
        user = _get(session, username)
        user.password_hash = password_hash
        user.failed_logins = 0
        user.locked_until = None
        session.add(user)
        audit.record(session, actor_id=actor_id, action="user.password", entity="reviewer", entity_id=user.id)


def set_active(engine: Engine, username: str, active: bool, *, actor_id: int | None = None) -> None:
    """Deactivate (or reactivate) an account; a deactivated account cannot sign in."""
    with write_session(engine) as session:
        user = _get(session, username)
        before = user.active
        user.active = active
        session.add(user)
        audit.record(
            session,
            actor_id=actor_id,
            action="user.activate" if active else "user.deactivate",
            entity="reviewer",
            entity_id=user.id,
            before={"active": before},
            after={"active": active},
        )


def authenticate(engine: Engine, username: str, password: str) -> Reviewer | None:
    """The signed-in reviewer, or None for a wrong username or password.

    After ``MEDREV_LOCKOUT_ATTEMPTS`` consecutive failures the account is locked for
    ``MEDREV_LOCKOUT_MINUTES``; while locked, ``AccountLocked`` is raised without checking the
    password, so guessing during the lock-out learns nothing.
    """
    if read_only_reason(engine) is not None:
        return _authenticate_read_only(engine, username, password)
    settings = get_settings()
    name = username.strip().lower()
    with write_session(engine) as session:
        user = session.exec(select(Reviewer).where(Reviewer.username == name)).first()
        if user is None or not user.active or user.password_hash is None:
            _verify(_DUMMY_HASH, password)
            return None
        now = utcnow()
        if user.locked_until is not None and user.locked_until > now:
            minutes = max(1, round((user.locked_until - now).total_seconds() / 60))
            raise AccountLocked(f"too many failed sign-ins: this account is locked for about {minutes} more minute(s)")
        if _verify(user.password_hash, password):
            user.failed_logins = 0
            user.locked_until = None
            user.last_login_at = now
            if _hasher.check_needs_rehash(user.password_hash):
                user.password_hash = _hasher.hash(password)
            session.add(user)
            audit.record(session, actor_id=user.id, action="auth.sign_in", entity="reviewer", entity_id=user.id)
            return user
        user.failed_logins += 1
        locked = user.failed_logins >= settings.lockout_attempts
        if locked:
            user.locked_until = now + timedelta(minutes=settings.lockout_minutes)
            user.failed_logins = 0
        session.add(user)
        audit.record(
            session,
            actor_id=None,
            action="auth.locked" if locked else "auth.failed",
            entity="reviewer",
            entity_id=user.id,
        )
    if locked:
        raise AccountLocked(f"too many failed sign-ins: this account is locked for {settings.lockout_minutes} minutes")
    return None


def _authenticate_read_only(engine: Engine, username: str, password: str) -> Reviewer | None:
    """Sign-in on a read-only database: the same checks, without the bookkeeping it cannot save.

    Failed attempts cannot be counted (so no new lock-out starts), and the sign-in time and audit
    event are not written; an existing lock-out is still respected.
    """
    with read_session(engine) as session:
        user = session.exec(select(Reviewer).where(Reviewer.username == username.strip().lower())).first()
    if user is None or not user.active or user.password_hash is None:
        _verify(_DUMMY_HASH, password)
        return None
    now = utcnow()
    if user.locked_until is not None and user.locked_until > now:
        minutes = max(1, round((user.locked_until - now).total_seconds() / 60))
        raise AccountLocked(f"too many failed sign-ins: this account is locked for about {minutes} more minute(s)")
    return user if _verify(user.password_hash, password) else None


def _verify(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


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
