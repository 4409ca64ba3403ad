"""Server-side sessions: signed, expiring, revocable tokens that follow the account (docs/security.md, "Sessions")."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from sqlmodel import select

from review_app.db.engine import read_session, write_session
from review_app.db.models import AuthSession, utcnow
from review_app.services import accounts, sessions
from review_app.services.actors import SYSTEM

PASSWORD = "correct horse battery"


@pytest.fixture
def ana(engine):
    profile = accounts.UserProfile(username="ana", display_name="Ana", role="lead")
    return engine, accounts.create_user(engine, profile, password=PASSWORD, actor=SYSTEM)


def _signed_in(engine, user) -> str:
    _page_token, nonce = sessions.start(engine, user.id, client="10.0.0.1")
    cookie, max_age = sessions.redeem(engine, nonce)
    assert max_age > 11 * 3600
    return cookie


def test_a_session_resolves_to_its_account_until_signed_out(ana):
    engine, user = ana
    token = _signed_in(engine, user)
    found = sessions.resolve(engine, token)
    assert isinstance(found, sessions.SessionUser)
    assert (found.username, found.role, found.session_version) == ("ana", "lead", user.session_version)
    assert sessions.live_sessions(engine, user.id) == 1
    assert sessions.revoke(engine, token)
    assert sessions.resolve(engine, token) == sessions.Ended("You have signed out.")
    assert not sessions.revoke(engine, token)  # once


def test_the_nonce_is_single_use_and_the_trade_retires_the_page_token(ana):
    engine, user = ana
    page_token, nonce = sessions.start(engine, user.id)
    assert isinstance(sessions.resolve(engine, page_token), sessions.SessionUser)
    cookie, _ = sessions.redeem(engine, nonce)
    assert sessions.redeem(engine, nonce) is None
    assert isinstance(sessions.resolve(engine, cookie), sessions.SessionUser)
    assert isinstance(sessions.resolve(engine, page_token), sessions.Ended)
    assert sessions.redeem(engine, "not-a-nonce") is None


def test_an_expired_nonce_sets_no_cookie(ana):
    engine, user = ana
    _token, nonce = sessions.start(engine, user.id)
    with write_session(engine) as session:
        row = session.exec(select(AuthSession)).one()
        row.nonce_expires_at = row.created_at - timedelta(seconds=1)
        session.add(row)
    assert sessions.redeem(engine, nonce) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: accounts.set_active(e, "ana", False, actor=SYSTEM), "deactivated"),
        (lambda e: accounts.set_password(e, "ana", PASSWORD + "!", actor=SYSTEM), "account changed"),
        (lambda e: accounts.set_role(e, "ana", "reviewer", actor=SYSTEM), "account changed"),
    ],
    ids=["deactivation", "password", "demotion"],
)
def test_account_changes_end_open_sessions(ana, change, reason):
    engine, user = ana
    tokens = [_signed_in(engine, user) for _ in range(2)]  # two browsers
    change(engine)
    for token in tokens:
        ended = sessions.resolve(engine, token)
        assert isinstance(ended, sessions.Ended) and reason in ended.reason
    if reason != "deactivated":  # a fresh sign-in works again
        fresh = sessions.resolve(engine, _signed_in(engine, accounts.get_user(engine, "ana")))
        assert isinstance(fresh, sessions.SessionUser)


def test_forged_tampered_and_expired_tokens(ana, monkeypatch):
    engine, user = ana
    token = _signed_in(engine, user)
    version, sid, expiry, signature = token.split(".")
    assert sessions.resolve(engine, f"{version}.{sid}.{int(expiry) + 3600}.{signature}") is None  # longer life
    other = "B" if sid[-1] == "A" else "A"
    assert sessions.resolve(engine, f"{version}.{sid[:-1]}{other}.{expiry}.{signature}") is None
    assert sessions.resolve(engine, "garbage") is None and sessions.resolve(engine, "") is None
    monkeypatch.setenv("MEDREV_SESSION_SECRET", "another key altogether")
    assert sessions.resolve(engine, token) is None  # a token signed with another key is not ours
    monkeypatch.delenv("MEDREV_SESSION_SECRET")
    with write_session(engine) as session:
        row = session.exec(select(AuthSession)).one()
        row.expires_at = row.created_at
        session.add(row)
    assert "expired" in sessions.resolve(engine, token).reason


def test_the_database_holds_no_usable_token(ana):
    engine, user = ana
    token = _signed_in(engine, user)
    with read_session(engine) as session:
        row = session.exec(select(AuthSession)).one()
    dump = str(row.model_dump())
    assert token.split(".")[1] not in dump and row.nonce_hash is None


def test_replicas_share_the_generated_signing_key(ana, monkeypatch):
    """Without MEDREV_SESSION_SECRET the key lives in the database, so another process verifies the token."""
    engine, user = ana
    monkeypatch.delenv("MEDREV_SESSION_SECRET", raising=False)
    monkeypatch.delenv("STREAMLIT_SERVER_COOKIE_SECRET", raising=False)
    token = _signed_in(engine, user)
    sessions._secrets.clear()  # what a second process starts with
    assert isinstance(sessions.resolve(engine, token), sessions.SessionUser)


def _ended_session(engine, user, *, ended_days_ago: float, revoked: bool) -> int:
    """A row that expired (or was revoked) ``ended_days_ago`` days ago; its id.

    A revoked row would have lived 20 more days (a long ``MEDREV_SESSION_HOURS``), so only its
    revocation can make it old enough to go.
    """
    ended = utcnow() - timedelta(days=ended_days_ago)
    row = AuthSession(
        token_hash=secrets.token_hex(32),
        reviewer_id=user.id,
        session_version=user.session_version,
        client="10.0.0.1",
        created_at=ended - timedelta(hours=2),
        expires_at=ended + timedelta(days=20) if revoked else ended,
        revoked_at=ended if revoked else None,
    )
    with write_session(engine) as session:
        session.add(row)
        session.flush()
        return row.id


def _row_ids(engine) -> set[int]:
    with read_session(engine) as session:
        return set(session.exec(select(AuthSession.id)).all())


def test_sessions_ended_beyond_the_retention_period_are_deleted_when_one_starts(ana):
    engine, user = ana
    assert sessions.RETENTION.days == 30
    live = _signed_in(engine, user)
    signed_out = _signed_in(engine, user)
    sessions.revoke(engine, signed_out)
    kept = {
        _ended_session(engine, user, ended_days_ago=29, revoked=False),
        _ended_session(engine, user, ended_days_ago=29, revoked=True),
    }
    gone = {
        _ended_session(engine, user, ended_days_ago=31, revoked=False),
        _ended_session(engine, user, ended_days_ago=31, revoked=True),
        _ended_session(engine, user, ended_days_ago=400, revoked=False),
    }
    before = _row_ids(engine)
    assert gone < before and sessions.live_sessions(engine, user.id) == 1
    fresh = _signed_in(engine, user)
    after = _row_ids(engine)
    assert not gone & after and kept < after and len(after) == len(before) - len(gone) + 1
    assert sessions.live_sessions(engine, user.id) == 2
    assert sessions.resolve(engine, signed_out) == sessions.Ended("You have signed out.")
    for token in (live, fresh):
        assert isinstance(sessions.resolve(engine, token), sessions.SessionUser)
    assert sessions.revoke(engine, live) and sessions.live_sessions(engine, user.id) == 1


def test_each_start_looks_at_a_bounded_batch_of_the_oldest_rows(ana, monkeypatch):
    engine, user = ana
    monkeypatch.setattr(sessions, "PURGE_BATCH", 2)
    old = {_ended_session(engine, user, ended_days_ago=40 + day, revoked=day % 2 == 0) for day in range(5)}
    sessions.start(engine, user.id)
    assert len(old & _row_ids(engine)) == 3
    sessions.start(engine, user.id)
    sessions.start(engine, user.id)
    assert not old & _row_ids(engine) and len(_row_ids(engine)) == 3  # the three new sessions
