"""The process-wide engines: opened, checked and migrated once per URL, or refused in one sentence.

This module sits above ``engine`` (how to talk to SQLite and PostgreSQL) and ``migrate`` (the
schema), so neither imports the other's caller, the way the FastAPI/SQLModel template keeps
migrations out of its engine module. ``get_engine`` is what the app, the CLI and the demo call:
every database fault it meets (no server, wrong user, unknown database, missing folder, a folder
or a foreign file in the database's place, a schema medrev did not make) becomes one
``DatabaseUnavailable`` sentence, and nothing is cached, so the next call tries again. A
read-only SQLite file that is already migrated opens normally; ``read_only_reason`` says why
saving will be refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from review_app.config import default_sqlite_url, get_settings
from review_app.db.engine import make_engine, read_only_reason
from review_app.db.errors import (
    URL_SETTING,
    DatabaseUnavailable,
    classify,
    location_fault,
    safe_url,
    sqlite_path,
    unknown_fault,
)
from review_app.db.migrate import current_revision, head_revision, needs_upgrade, upgrade

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def get_engine(url: str | None = None, *, migrate: bool = True, create: bool = True) -> Engine:
    """The process-wide engine for ``url`` (default: ``MEDREV_DATABASE_URL``), migrated on first use.

    With ``create=False`` a SQLite file that does not exist yet is refused (``DatabaseUnavailable``)
    instead of being started: a command that only reads or changes existing data must not leave a
    new, empty database behind a mistyped path.
    """
    url = url or get_settings().database_url
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            if not create:
                _check_exists(url)
            engine = open_database(url, migrate=migrate)
            _engines[url] = engine
        return engine


def dispose_engines() -> None:
    """Close every cached engine (tests, and before a process forks)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


def forget_engines() -> None:
    """Drop the cached engines without closing their connections: in a process forked from the one that
    opened them, which shares those connections and must leave them to it (SQLAlchemy's advice for
    ``os.fork``: ``dispose(close=False)``)."""
    with _engines_lock:
        for engine in _engines.values():
            engine.dispose(close=False)
        _engines.clear()


def open_database(url: str, *, migrate: bool = True) -> Engine:
    """A new engine on ``url``, connected now (and migrated unless ``migrate`` is False).

    Raises ``DatabaseUnavailable`` with one sentence for every fault, and leaves nothing open.
    """
    _check_location(url)
    try:
        settings = get_settings()
    except ValueError as exc:  # a pool or checkpoint setting medrev cannot use
        raise DatabaseUnavailable(f"{exc}.", url) from None
    try:
        engine = make_engine(
            url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            sqlite_checkpoints=settings.sqlite_checkpoints,
        )
    except (ValueError, SQLAlchemyError, ImportError) as exc:
        raise DatabaseUnavailable(
            f"{URL_SETTING} is not a database medrev can use ({safe_url(url)}: {exc}): use sqlite:///PATH "
            "or postgresql+psycopg://USER@HOST:PORT/NAME.",
            url,
        ) from None
    try:
        with _faults(url, engine, "opened"):
            if migrate:
                _migrate(engine)
            else:
                current_revision(engine)  # connect now, so a fault is reported here
    except BaseException:
        engine.dispose()
        raise
    return engine


def migrate_now(url: str | None = None) -> tuple[str | None, str]:
    """``medrev db upgrade``: migrate ``url`` now (even if cached); returns (revision, URL without password)."""
    url = url or get_settings().database_url
    engine = open_database(url, migrate=False)
    try:
        with _faults(url, engine, "migrated"):
            if read_only_reason(engine) is None:
                return upgrade(engine), safe_url(url)
            _migrate(engine)  # refuses in one sentence unless there is nothing to do
            return current_revision(engine), safe_url(url)
    finally:
        engine.dispose()


def revisions(url: str | None = None) -> tuple[str | None, str, str]:
    """``medrev db current``: (current revision, latest revision, URL without password)."""
    url = url or get_settings().database_url
    _check_exists(url)
    engine = open_database(url, migrate=False)
    try:
        with _faults(url, engine, "read"):
            return current_revision(engine), head_revision(), safe_url(url)
    finally:
        engine.dispose()


def _migrate(engine: Engine) -> None:
    if not needs_upgrade(engine):
        return
    reason = read_only_reason(engine)
    if reason is not None:
        path = sqlite_path(engine.url)
        raise DatabaseUnavailable(
            f"The database file {path} is read-only ({reason}) and not yet migrated to this version of medrev "
            f"(revision {current_revision(engine) or 'none'}, needs {head_revision()}): make it writable and run "
            "`medrev db upgrade` once.",
            engine.url,
        )
    upgrade(engine)


def _check_exists(url: str) -> None:
    """Refuse a SQLite URL whose file does not exist (a mistyped path), naming where medrev looked."""
    _check_sqlite_url(url)
    try:
        path = sqlite_path(url)
    except Exception:
        return  # make_engine reports an unreadable URL
    if path is None or path.exists():
        return
    fault = location_fault(path, safe_url(url)) if url != default_sqlite_url() else None
    if fault is not None:
        raise fault
    raise DatabaseUnavailable(
        f"There is no database at {path} ({safe_url(url)}): check {URL_SETTING} (or the medrev.toml of this "
        "folder) for a typing mistake, or create the database with `medrev db upgrade` or `medrev review import`.",
        url,
    )


def _check_sqlite_url(url: str) -> None:
    """Refuse a SQLite URL without a file (in memory) or with options SQLite would silently ignore."""
    try:
        parsed = make_url(url)
        path = sqlite_path(url)
    except Exception:
        return  # make_engine reports an unreadable URL
    if parsed.get_backend_name() != "sqlite":
        return
    if path is None:
        raise DatabaseUnavailable(
            f"{safe_url(url)} names no database file (an in-memory database vanishes when the command ends): "
            f"set {URL_SETTING} to sqlite:///PATH.",
            url,
        )
    ignored = sorted(set(parsed.query) - {"uri"})
    if ignored and parsed.query.get("uri") not in ("true", "1"):
        options = "&".join(f"{key}={parsed.query[key]}" for key in ignored)
        raise DatabaseUnavailable(
            f"SQLite ignores the option(s) {', '.join(ignored)} in {safe_url(url)} unless the URL is in URI form: "
            f"use sqlite:///file:{path}?{options}&uri=true.",
            url,
        )


def _check_location(url: str) -> None:
    """Refuse a SQLite URL ``_check_sqlite_url`` refuses, or whose folder is missing (except the default home,
    created here) or is a folder."""
    _check_sqlite_url(url)
    try:
        path = sqlite_path(url)
    except Exception:
        return  # make_engine reports an unreadable URL
    if path is None:
        return
    if not path.parent.exists() and url == default_sqlite_url():
        path.parent.mkdir(parents=True, exist_ok=True)
    fault = location_fault(path, safe_url(url))
    if fault is not None:
        raise fault


@contextmanager
def _faults(url: str, engine: Engine, doing: str) -> Iterator[None]:
    """Turn any exception from connecting to or migrating ``url`` into one ``DatabaseUnavailable`` sentence."""
    try:
        yield
    except DatabaseUnavailable:
        raise
    except Exception as exc:
        fault = classify(exc, url, read_only_reason=read_only_reason(engine)) or unknown_fault(exc, url, doing)
        raise fault from exc
