"""Server-side sign-in sessions behind a signed, expiring, revocable cookie token.

The threat model behind it is in docs/security.md ("Sessions").

A session is a row of ``auth_session``. The browser holds ``v1.<id>.<expiry>.<signature>``: a
random id, its expiry (Unix seconds) and an HMAC-SHA256 over both with the signing key. Only the
SHA-256 of the id is stored, so neither a copy of the database nor the key alone makes a working
token. Every script run resolves the token again (:func:`resolve`), re-reading the account: a
revoked or expired session, a deactivated account, or an account whose ``session_version`` moved
on (new password, role change, deactivation) no longer resolves.

Streamlit scripts cannot set response headers, so the cookie is set by an HTTP route
(``review_app.ui.routes``): the sign-in page starts a session with a one-time nonce
(:func:`start`), sends the browser to the route, and the route trades the nonce for a token
(:func:`redeem`) in a ``Set-Cookie`` header. The nonce is single-use, short-lived and stored only as
a hash; the trade gives the session a fresh id, so the token the page held before is retired.

The signing key is ``MEDREV_SESSION_SECRET`` (or ``STREAMLIT_SERVER_COOKIE_SECRET``); without
either, one is generated once and kept in the database, so every replica on one database agrees.

Rows of sessions that expired or were revoked more than ``RETENTION`` ago are deleted when a new
session starts (:func:`start`), among the ``PURGE_BATCH`` oldest at a time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from review_app.config import get_settings
from review_app.db.engine import read_session, write_session
from review_app.db.models import AppSecret, AuthSession, Reviewer, utcnow
from review_app.services.errors import NotFound, PermissionDenied

COOKIE_NAME = "medrev_session"
NONCE_SECONDS = 120
_VERSION = "v1"
_SECRET_NAME = "session_signing_key"
_secrets: dict[str, bytes] = {}
RETENTION = timedelta(days=30)
"""How long a session's row outlives its end (expiry or revocation).

The rows are the sign-in trail (who signed in, how, from which address, until when, when they signed
out) that a question about an account's use looks at; a month of it answers such questions, and
deleting it then keeps ``auth_session`` from growing with every sign-in for as long as a study runs.
"""
PURGE_BATCH = 500
"""How many of the oldest rows a new session looks at for ended ones to delete: a backlog drains over
a few sign-ins while each sign-in's write transaction stays a few milliseconds long."""


@dataclass(frozen=True)
class SessionUser:
    """The account a valid token belongs to, as read during this request."""

    id: int
    username: str
    display_name: str
    role: str
    session_version: int
    session_id: int


@dataclass(frozen=True)
class Ended:
    """A token that no longer signs anyone in, with the reason written for the person at the screen."""

    reason: str


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def signing_key(engine: Engine) -> bytes:
    """The key that signs tokens: from the environment, else generated once and kept in the database."""
    configured = get_settings().session_secret
    if configured:
        return configured.encode()
    url = engine.url.render_as_string(hide_password=False)
    if url not in _secrets:
        with read_session(engine) as session:
            row = session.get(AppSecret, _SECRET_NAME)
        if row is None:
            try:
                with write_session(engine) as session:
                    session.add(AppSecret(name=_SECRET_NAME, value=secrets.token_urlsafe(48)))
            except IntegrityError:
                pass  # another process created it first; read theirs
            with read_session(engine) as session:
                row = session.get(AppSecret, _SECRET_NAME)
        _secrets[url] = row.value.encode()
    return _secrets[url]


def _sign(key: bytes, payload: str) -> str:
    mac = hmac.new(key, payload.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def _token(key: bytes, session_id: str, expires_at: datetime) -> str:
    payload = f"{_VERSION}.{session_id}.{int(expires_at.timestamp())}"
    return f"{payload}.{_sign(key, payload)}"


def _parse(key: bytes, token: str) -> tuple[str, datetime] | None:
    """(session id, expiry) of a well-formed token with a valid signature, else None."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != _VERSION or not parts[2].isdigit():
        return None
    payload = ".".join(parts[:3])
    if not hmac.compare_digest(_sign(key, payload), parts[3]):
        return None
    return parts[1], datetime.fromtimestamp(int(parts[2]), UTC)


def lifetime() -> timedelta:
    return timedelta(hours=get_settings().session_hours)


def start(engine: Engine, user_id: int, *, via: str = "password", client: str = "") -> tuple[str, str]:
    """Open a session for an account that has just proved who it is; returns (token, one-time nonce).

    Callers are the sign-in page after ``authentication.authenticate`` and the identity-provider mapping;
    the account must still be active.
    """
    key = signing_key(engine)
    session_id, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    now = utcnow()
    expires_at = (now + lifetime()).replace(microsecond=0)
    with write_session(engine) as session:
        user = session.get(Reviewer, user_id)
        if user is None or not user.active:
            raise PermissionDenied("this account is deactivated")
        session.add(
            AuthSession(
                token_hash=_digest(session_id),
                nonce_hash=_digest(nonce),
                nonce_expires_at=now + timedelta(seconds=NONCE_SECONDS),
                reviewer_id=user.id,
                session_version=user.session_version,
                via=via,
                client=client[:100],
                created_at=now,
                expires_at=expires_at,
            )
        )
        _purge_ended(session, now - RETENTION)
    return _token(key, session_id, expires_at), nonce


def _purge_ended(session: Session, cutoff: datetime) -> int:
    """Delete those of the ``PURGE_BATCH`` oldest sessions that expired or were revoked before ``cutoff``.

    Only the oldest rows are looked at (by id, through the primary key), so the cost stays the same
    however many sessions the table holds; sessions end roughly in the order they started, so the
    ended ones are there. A row that ended before the cutoff signs no one in (its token's expiry is
    no later than the row's, and a token without its row is refused), so neither the live-session
    count nor a revocation can depend on it. Returns how many rows went.
    """
    oldest = (
        select(AuthSession.id, AuthSession.expires_at, AuthSession.revoked_at)
        .order_by(AuthSession.id)
        .limit(PURGE_BATCH)
        .subquery()
    )
    ended = select(oldest.c.id).where(or_(oldest.c.expires_at < cutoff, oldest.c.revoked_at < cutoff))
    purge = delete(AuthSession).where(AuthSession.id.in_(ended)).execution_options(synchronize_session=False)
    return session.execute(purge).rowcount


def redeem(engine: Engine, nonce: str) -> tuple[str, int] | None:
    """Trade a one-time nonce for a cookie token under a fresh session id; (token, max-age seconds) or None."""
    if not nonce or len(nonce) > 100:
        return None
    key = signing_key(engine)
    session_id = secrets.token_urlsafe(32)
    now = utcnow()
    with write_session(engine) as session:
        row = session.exec(
            select(AuthSession).where(AuthSession.nonce_hash == _digest(nonce)).with_for_update()
        ).first()
        if row is None:
            return None
        row.nonce_hash = None  # single use, whatever happens next
        usable = row.revoked_at is None and row.nonce_expires_at > now and row.expires_at > now
        if usable:
            row.token_hash = _digest(session_id)
        session.add(row)
        if not usable:
            return None
        return _token(key, session_id, row.expires_at), int((row.expires_at - now).total_seconds())


def resolve(engine: Engine, token: str) -> SessionUser | Ended | None:
    """The account ``token`` signs in right now, ``Ended`` with a reason, or None for a token that is not ours."""
    parsed = _parse(signing_key(engine), token or "")
    if parsed is None:
        return None
    session_id, expires_at = parsed
    if expires_at <= utcnow():
        return Ended("Your session has expired. Please sign in again.")
    with read_session(engine) as session:
        found = session.exec(
            select(AuthSession, Reviewer)
            .join(Reviewer, Reviewer.id == AuthSession.reviewer_id)
            .where(AuthSession.token_hash == _digest(session_id))
        ).first()
    if found is None:
        return Ended("This sign-in is no longer valid. Please sign in again.")
    row, user = found
    if row.revoked_at is not None:
        return Ended("You have signed out.")
    if row.expires_at <= utcnow():
        return Ended("Your session has expired. Please sign in again.")
    if not user.active:
        return Ended(
            "Your account has been deactivated, so you were signed out. Ask your study lead if this is a mistake."
        )
    if user.session_version != row.session_version:
        return Ended(
            "You were signed out because your account changed (a new password or a new role). Please sign in again."
        )
    return SessionUser(user.id, user.username, user.display_name, user.role, user.session_version, row.id)


def revoke(engine: Engine, token: str) -> bool:
    """End the session a token names (sign-out); True when a live session was revoked."""
    parsed = _parse(signing_key(engine), token or "")
    if parsed is None:
        return False
    with write_session(engine) as session:
        result = session.execute(
            update(AuthSession)
            .where(AuthSession.token_hash == _digest(parsed[0]), AuthSession.revoked_at.is_(None))
            .values(revoked_at=utcnow(), nonce_hash=None)
        )
        return result.rowcount > 0


def live_sessions(engine: Engine, user_id: int) -> int:
    """How many unrevoked, unexpired sessions an account has (for the accounts page and tests)."""
    with read_session(engine) as session:
        user = session.get(Reviewer, user_id)
        if user is None:
            raise NotFound(f"no user with id {user_id}")
        rows = session.exec(
            select(AuthSession).where(
                AuthSession.reviewer_id == user_id,
                AuthSession.revoked_at.is_(None),
                AuthSession.expires_at > utcnow(),
                AuthSession.session_version == user.session_version,
            )
        ).all()
        return len(rows)
