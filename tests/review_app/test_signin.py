"""Sign-in never stalls the panel and never reveals who has an account (docs/security.md, "Passwords and sign-in")."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text
from sqlmodel import select

from review_app.config import get_settings
from review_app.db.engine import is_sqlite, read_session
from review_app.db.models import Annotation, Assignment
from review_app.rubrics import RUBRIC_A, ScoreSheet
from review_app.services import accounts, assignment, authentication, reviewing, studies
from review_app.services.actors import SYSTEM

from .factories import add_users, seed_items

PASSWORD = "correct horse battery"
SHEET = ScoreSheet(rubric="A", scores=dict.fromkeys(RUBRIC_A.dimension_keys, 2))


@pytest.fixture
def ana(engine):
    profile = accounts.UserProfile(username="ana", display_name="Ana")
    accounts.create_user(engine, profile, password=PASSWORD, actor=SYSTEM)
    return engine


def _writer_active(engine) -> bool:
    """Whether another connection is inside a transaction that can block writers right now.

    SQLite: someone holds the write lock. PostgreSQL: some other connection has a transaction open
    at all (stricter: a transaction that has only read so far holds no lock yet, but might).
    """
    if is_sqlite(engine):
        probe = sqlite3.connect(engine.url.database, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            probe.close()
    with engine.connect() as connection:
        return bool(
            connection.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND xact_start IS NOT NULL AND pid <> pg_backend_pid()"
                )
            ).scalar()
        )


@pytest.fixture
def hashing_calls(monkeypatch):
    """Every argon2 call (verify or hash), with whether a write transaction was open at that moment."""
    calls: list[tuple[str, bool]] = []
    real = authentication._hashing
    engines = []

    def spy(fn, *args):
        calls.append((getattr(fn, "__name__", str(fn)), any(_writer_active(e) for e in engines)))
        return real(fn, *args)

    monkeypatch.setattr(authentication, "_hashing", spy)
    return calls, engines


def test_argon2_never_runs_inside_a_write_transaction(ana, hashing_calls):
    engine = ana
    calls, engines = hashing_calls
    engines.append(engine)
    authentication.authenticate(engine, "ana", PASSWORD)
    authentication.authenticate(engine, "ana", "wrong password")
    authentication.authenticate(engine, "nobody", "wrong password")
    accounts.set_password(engine, "ana", PASSWORD + "!", actor=SYSTEM)
    accounts.create_user(
        engine, accounts.UserProfile(username="ben", display_name="B"), password=PASSWORD, actor=SYSTEM
    )
    assert len(calls) == 5 and not any(inside for _name, inside in calls), calls


def test_known_and_unknown_usernames_cost_one_verification_each(ana, hashing_calls):
    engine = ana
    calls, _engines = hashing_calls
    accounts.create_user(engine, accounts.UserProfile(username="idp", display_name="I"), actor=SYSTEM)  # no password
    accounts.create_user(
        engine, accounts.UserProfile(username="gone", display_name="G"), password=PASSWORD, actor=SYSTEM
    )
    accounts.set_active(engine, "gone", False, actor=SYSTEM)
    calls.clear()
    for username in ("ana", "nobody", "idp", "gone"):
        assert authentication.authenticate(engine, username, "wrong password") is None
    assert [name for name, _inside in calls] == ["_verify"] * 4


def test_unknown_usernames_lock_out_exactly_like_known_ones(ana, monkeypatch):
    engine = ana
    monkeypatch.setenv("MEDREV_LOCKOUT_ATTEMPTS", "3")
    messages = {}
    for username in ("ana", "nobody"):
        for _ in range(2):
            assert authentication.authenticate(engine, username, "wrong password") is None
        with pytest.raises(authentication.SigninThrottled) as caught:
            authentication.authenticate(engine, username, "wrong password")
        messages[username] = str(caught.value)
        with pytest.raises(authentication.SigninThrottled) as again:
            authentication.authenticate(engine, username, PASSWORD)  # even the right password, without a verification
        messages[username + " again"] = str(again.value)
    assert messages["ana"] == messages["nobody"] and messages["ana again"] == messages["nobody again"]
    assert "locked" in messages["ana"] and "ana" not in messages["ana"]
    accounts.set_password(engine, "ana", PASSWORD, actor=SYSTEM)  # a lead's reset clears the username's lock
    assert authentication.authenticate(engine, "ana", PASSWORD) is not None


def test_failed_attempts_are_limited_per_client_address(ana, monkeypatch):
    engine = ana
    monkeypatch.setenv("MEDREV_LOCKOUT_ADDRESS_ATTEMPTS", "4")
    for number in range(3):
        assert authentication.authenticate(engine, f"guess{number}", "wrong password", client="203.0.113.9") is None
    with pytest.raises(authentication.SigninThrottled):
        authentication.authenticate(engine, "guess3", "wrong password", client="203.0.113.9")
    with pytest.raises(authentication.SigninThrottled):
        authentication.authenticate(engine, "ana", PASSWORD, client="203.0.113.9")
    assert authentication.authenticate(engine, "ana", PASSWORD, client="198.51.100.7") is not None


def test_a_forged_forwarded_for_from_a_direct_client_shares_its_address_limit(ana, monkeypatch):
    """A client on the hospital network, connecting without the proxy, gets no fresh count per header."""
    engine = ana
    monkeypatch.setenv("MEDREV_LOCKOUT_ADDRESS_ATTEMPTS", "4")
    monkeypatch.delenv("MEDREV_TRUSTED_PROXIES", raising=False)
    trusted = get_settings().trusted_proxies  # the default: a proxy on this host only
    for number in range(3):
        client = authentication.client_key("10.20.30.40", f"203.0.113.{number}", trusted)
        assert authentication.authenticate(engine, f"guess{number}", "wrong password", client=client) is None
    with pytest.raises(authentication.SigninThrottled):
        client = authentication.client_key("10.20.30.40", "198.51.100.99", trusted)
        authentication.authenticate(engine, "guess3", "wrong password", client=client)
    behind_proxy = authentication.client_key(None, "10.20.30.40, 10.20.30.41", trusted)
    assert authentication.authenticate(engine, "ana", PASSWORD, client=behind_proxy) is not None


def test_a_success_resets_the_usernames_failures(ana, monkeypatch):
    engine = ana
    monkeypatch.setenv("MEDREV_LOCKOUT_ATTEMPTS", "3")
    for _ in range(2):
        authentication.authenticate(engine, "ana", "wrong password")
    assert authentication.authenticate(engine, "ana", PASSWORD) is not None
    for _ in range(2):
        assert authentication.authenticate(engine, "ana", "wrong password") is None  # counting starts again


def test_parallel_failed_sign_ins_do_not_stall_a_reviewers_submits(engine, tmp_path):
    """20 threads fail to sign in (unknown usernames, many addresses) while a reviewer submits 12 tasks."""
    seed_items(engine, tmp_path, 12, subsets=("MEDMISQA",))
    (reviewer,) = add_users(engine, 1)
    studies.create_study(engine, "s", rubrics=["A"], actor=SYSTEM)
    studies.draw_pool(engine, "s", 12, seed=1, actor=SYSTEM)
    assignment.assign(engine, "s", raters=1, actor=SYSTEM)
    with read_session(engine) as session:
        tasks = session.exec(select(Assignment.id).where(Assignment.reviewer_id == reviewer.id)).all()
    stop = threading.Event()
    attempts: list[int] = []
    errors: list[BaseException] = []

    def attacker(number: int) -> None:
        count = 0
        while not stop.is_set():
            try:
                authentication.authenticate(
                    engine, f"ghost{number}-{count}", "wrong password", client=f"10.9.{number}.{count}"
                )
            except authentication.SigninBusy:
                pass  # refused at once when too many wait: that is the protection working
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)
                return
            count += 1
        attempts.append(count)

    with ThreadPoolExecutor(20) as pool:
        for number in range(20):
            pool.submit(attacker, number)
        try:
            results = [
                reviewing.submit(engine, aid, reviewer.id, SHEET, client_token=f"t{aid}", base_revision=0)
                for aid in tasks
            ]
        finally:
            stop.set()
    assert not errors, errors
    assert sum(attempts) >= 20  # the attack was really running
    assert all(r.created for r in results)
    with read_session(engine) as session:
        assert len(session.exec(select(Annotation.id)).all()) == len(tasks)


def test_beyond_the_waiting_limit_sign_ins_are_refused_at_once(ana, monkeypatch):
    engine = ana
    monkeypatch.setattr(authentication, "MAX_WAITING_SIGNINS", 0)
    with pytest.raises(authentication.SigninBusy, match="busy"):
        authentication.authenticate(engine, "ana", PASSWORD)
    monkeypatch.setattr(authentication, "MAX_WAITING_SIGNINS", 64)
    assert authentication.authenticate(engine, "ana", PASSWORD) is not None
