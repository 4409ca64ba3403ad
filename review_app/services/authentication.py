"""Sign-in and password hashing: argon2 hashes, verified off the request threads, with throttling.

Sign-in never stalls the panel: argon2 runs outside every database transaction, on a small pool
of low-priority worker threads (:func:`hash_password` and the verification both go through it);
unknown usernames are verified against a dummy hash, so they cost the same as known ones; failed
attempts are counted per username (existing or not) and per client address in short transactions
after hashing, and the lock-out message is the same whether the account exists or not
(docs/security.md, "Passwords and sign-in"). Which address a request counts against is
:func:`client_key`: a forwarded address only from a configured proxy. Accounts themselves
(profiles, roles, who may change whom) are :mod:`review_app.services.accounts`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import Engine, delete, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from review_app.config import IPNetwork, get_settings
from review_app.db.engine import is_sqlite, read_only_reason, read_session, write_session
from review_app.db.models import Reviewer, SigninThrottle, utcnow
from review_app.services import audit
from review_app.services.errors import AccountLocked, InvalidInput

MIN_PASSWORD_LENGTH = 10
MAX_WAITING_SIGNINS = 64  # beyond this many queued verifications, sign-ins are refused at once ("busy")
_hasher = PasswordHasher()
_DUMMY_HASH = _hasher.hash("medrev-timing-equaliser")
T = TypeVar("T")


class SigninThrottled(AccountLocked):
    """Too many failed sign-ins for a username or from an address; worded the same whether the account exists."""


class SigninBusy(AccountLocked):
    """More sign-ins are waiting for password verification than the server lets queue up."""


def _lower_priority() -> None:
    """Run this worker at a lower CPU priority, so a burst of sign-ins yields the processor to reviewers.

    On Linux every thread has its own nice value (and argon2's lane threads inherit it); elsewhere
    ``setpriority`` would address a process, so it is left alone.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


_HASH_WORKERS = max(1, (os.cpu_count() or 2) // 2)
_pool = ThreadPoolExecutor(max_workers=_HASH_WORKERS, thread_name_prefix="medrev-argon2", initializer=_lower_priority)
_signin_slots = threading.BoundedSemaphore(_HASH_WORKERS)
_queue_lock = threading.Lock()
_queued = 0


def _hashing(fn: Callable[..., T], *args) -> T:
    """Run an argon2 call on the low-priority hashing pool and wait for it (never inside a transaction)."""
    return _pool.submit(fn, *args).result()


@contextlib.contextmanager
def _signin_slot() -> Iterator[None]:
    """Let sign-ins through as many at a time as there are hashing workers; the rest wait, idle.

    Waiting threads hold neither a database connection nor the interpreter lock, so a flood of
    attempts costs reviewers one sign-in's worth of work at a time. Beyond ``MAX_WAITING_SIGNINS``
    waiting, a sign-in is refused at once instead of queueing.
    """
    global _queued
    with _queue_lock:
        if _queued >= MAX_WAITING_SIGNINS:
            raise SigninBusy("the sign-in service is busy; try again in a minute")
        _queued += 1
    try:
        with _signin_slots:
            yield
    finally:
        with _queue_lock:
            _queued -= 1


def hash_password(password: str) -> str:
    """An argon2id hash of ``password`` after checking the minimum length."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    return _hashing(_hasher.hash, password)


def _verify(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def user_throttle_key(username: str) -> str:
    """The ``signin_throttle`` key that counts failed sign-ins for ``username`` (a new password clears it)."""
    return f"user:{username[:150]}"


def _address_key(client: str) -> str:
    return f"addr:{client[:150]}"


LOCAL_CLIENT = "local"  # the key of a loopback peer that names no client (Streamlit reports loopback as None)
_LOOPBACK = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))  # what a None peer may be


def client_key(peer: str | None, forwarded_for: str | None, trusted_proxies: Iterable[IPNetwork]) -> str:
    """The client address a request's failed sign-ins count against (and its session records).

    ``peer`` is the connection's address and ``forwarded_for`` the request's ``X-Forwarded-For``.
    Anyone may send that header, and on a hospital network every client is on a private address,
    so it is believed only when the peer is one of ``trusted_proxies`` (``MEDREV_TRUSTED_PROXIES``);
    even then only its last entry, the address that proxy saw and appended, since the entries
    before it are the client's to choose. A last entry that is no address leaves the proxy's own
    address: one bucket for everyone behind it, never one the client picks. Streamlit reports both
    127.0.0.1 and ::1 as a None peer, so None is a proxy when either is listed.
    """
    networks = tuple(trusted_proxies)
    if peer is None:
        own, addresses = LOCAL_CLIENT, _LOOPBACK
    else:
        address = _ip(peer)
        own, addresses = (peer, ()) if address is None else (str(address), (address,))
    if not any(address in network for address in addresses for network in networks):
        return own
    forwarded = _ip((forwarded_for or "").split(",")[-1].strip())
    return own if forwarded is None else str(forwarded)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``text`` as an address (an IPv4 address seen through an IPv6 socket as IPv4), or None."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _locked_message(minutes: float) -> str:
    return (
        f"sign-in is locked for about {max(1, round(minutes))} more minute(s) after too many failed attempts "
        "with this username or from this network address"
    )


def authenticate(engine: Engine, username: str, password: str, *, client: str | None = None) -> Reviewer | None:
    """The signed-in reviewer, or None for a wrong username or password.

    ``client`` is the caller's network address (rate-limited separately from the username).
    While a username or address is locked, ``SigninThrottled`` is raised without checking the
    password, so guessing during the lock-out learns nothing. Hashing happens outside every
    transaction; only the short bookkeeping afterwards writes.
    """
    with _signin_slot():
        return _authenticate(engine, username, password, client)


def _authenticate(engine: Engine, username: str, password: str, client: str | None) -> Reviewer | None:
    settings = get_settings()
    name = username.strip().lower()
    limits = {user_throttle_key(name): settings.lockout_attempts}
    if client:
        limits[_address_key(client)] = settings.lockout_address_attempts
    now = utcnow()
    with read_session(engine) as session:
        throttles = session.exec(select(SigninThrottle).where(SigninThrottle.key.in_(list(limits)))).all()
        user = session.exec(select(Reviewer).where(Reviewer.username == name)).first()
    until = max((t.locked_until for t in throttles if t.locked_until and t.locked_until > now), default=None)
    if until is not None:
        raise SigninThrottled(_locked_message((until - now).total_seconds() / 60))
    usable = user is not None and user.active and user.password_hash is not None
    stored = user.password_hash if usable else _DUMMY_HASH
    # A read-only database still lets everyone sign in; what it cannot keep (sign-in time, failure
    # counts) is skipped, and a lock-out already recorded is still honoured above.
    read_only = read_only_reason(engine) is not None
    if _hashing(_verify, stored, password) and usable:
        if read_only:
            return user
        rehashed = _hashing(_hasher.hash, password) if _hasher.check_needs_rehash(stored) else None
        with write_session(engine) as session:
            fresh = session.get(Reviewer, user.id)
            if fresh is None or not fresh.active or fresh.password_hash != stored:
                return None  # deactivated or given a new password while we were verifying
            fresh.last_login_at = utcnow()
            if rehashed is not None:
                fresh.password_hash = rehashed
            session.add(fresh)
            session.execute(delete(SigninThrottle).where(SigninThrottle.key == user_throttle_key(name)))
            audit.record(session, actor_id=fresh.id, action="auth.sign_in", entity="reviewer", entity_id=fresh.id)
            return fresh
    if read_only:
        return None
    if _record_failure(engine, limits, user.id if user is not None else None):
        raise SigninThrottled(_locked_message(settings.lockout_minutes))
    return None


def _record_failure(engine: Engine, limits: dict[str, int], user_id: int | None) -> bool:
    """Count one failed attempt against every key (short transaction); True when this one locks a key."""
    settings = get_settings()
    window = timedelta(minutes=settings.lockout_minutes)
    for attempt in range(3):
        try:
            with write_session(engine) as session:
                if not is_sqlite(engine):
                    # Counters of failures need not survive a crash of the database server; not waiting
                    # for the WAL flush keeps a flood of failed sign-ins from queueing behind reviewers'
                    # commits (SQLite in WAL mode with synchronous=NORMAL does not wait either).
                    session.execute(text("SET LOCAL synchronous_commit TO OFF"))
                now = utcnow()
                locked = False
                for key, limit in limits.items():
                    row = session.get(SigninThrottle, key, with_for_update=True)
                    if row is None:
                        row = SigninThrottle(key=key, failures=0, window_started_at=now)
                    if row.window_started_at + window <= now:
                        row.failures, row.window_started_at = 0, now
                    row.failures += 1
                    if row.failures >= limit:
                        row.locked_until = now + window
                        row.failures, row.window_started_at = 0, now
                        locked = True
                    session.add(row)
                if user_id is not None:
                    audit.record(
                        session,
                        actor_id=None,
                        action="auth.locked" if locked else "auth.failed",
                        entity="reviewer",
                        entity_id=user_id,
                    )
                return locked
        except IntegrityError:  # another replica inserted the same key first (PostgreSQL); count again
            if attempt == 2:
                raise
    return False
