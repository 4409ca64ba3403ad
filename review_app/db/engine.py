"""Database engines and the two kinds of session every service uses.

SQLite is the default (one file, no server), and it needs care under Streamlit's threads:
pysqlite's implicit transactions start with a deferred BEGIN, so two writers can both read,
then one fails or silently loses its update. Here the driver's own transaction handling is
switched off and every write session starts with ``BEGIN IMMEDIATE`` (take the write lock
first, wait up to ``busy_timeout`` for it), while read sessions use a plain BEGIN and, thanks
to WAL, never block writers. PostgreSQL (``postgresql+psycopg://``) needs none of this; its
services lock rows explicitly where two writers could race.

A SQLite file that cannot be written (``?mode=ro&uri=true``, ``immutable=1``, permissions, an
immutable flag, a read-only mount) still serves reads; a write session on it raises
``DatabaseReadOnly`` with the reason before taking any lock. Faults met inside a session
(server gone, file gone) surface as one-sentence ``DatabaseUnavailable`` errors (``db.errors``).
The process-wide engine cache and the migration on first use live in ``db.connect``.

SQLite checkpoints (copying the write-ahead log into the database file) run by default in the
connection whose commit takes the log past 1,000 pages, during that commit. In the app that is
usually a reviewer's submit, which then waits for the copy (the tail of submit-to-next). With
``MEDREV_SQLITE_CHECKPOINTS=background`` (``medrev app`` sets it) a thread of the process runs a
passive checkpoint every ``CHECKPOINT_EVERY_S`` instead: SQLite does the copying without Python's
lock and without waiting for any reader or writer, and commits checkpoint themselves only past
``BACKGROUND_AUTOCHECKPOINT_PAGES`` (a bound on the log should the thread fall behind, e.g. behind a
long read holding an old snapshot).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool
from sqlmodel import Session

from review_app.config import get_settings
from review_app.db.errors import DatabaseReadOnly, classify, read_only_sentence, sqlite_path

SQLITE_BUSY_TIMEOUT_MS = 30_000
CHECKPOINT_EVERY_S = 1.0
BACKGROUND_AUTOCHECKPOINT_PAGES = 10_000
log = logging.getLogger(__name__)
_WRITE = "medrev_write"
POSTGRES_CONNECT_TIMEOUT_S = 10  # an unreachable server fails in seconds instead of hanging the page


def _configure_sqlite(engine: Engine, *, background_checkpoints: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        if background_checkpoints:
            cursor.execute(f"PRAGMA wal_autocheckpoint = {BACKGROUND_AUTOCHECKPOINT_PAGES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        immediate = connection.get_execution_options().get(_WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


# Connections each process keeps (pool size) and may add under load (overflow), per backend, unless
# MEDREV_DB_POOL_SIZE / MEDREV_DB_MAX_OVERFLOW say otherwise. Every replica and CLI process has its own
# pool: replicas x (size + overflow) must stay below PostgreSQL's max_connections (100 by default).
POOL_DEFAULTS = {"sqlite": (20, 20), "postgresql": (10, 20)}


def make_engine(
    url: str,
    *,
    pool_size: int | None = None,
    max_overflow: int | None = None,
    sqlite_checkpoints: str | None = None,
) -> Engine:
    """A configured engine for ``url`` (no connection yet, no migration); application code uses
    ``db.connect.get_engine``, which also checks the database and turns faults into one sentence.

    ``pool_size`` and ``max_overflow`` default to ``MEDREV_DB_POOL_SIZE`` / ``MEDREV_DB_MAX_OVERFLOW``,
    then to the backend's ``POOL_DEFAULTS``; ``sqlite_checkpoints`` (``commit`` or ``background``, see
    the module's docstring) to ``MEDREV_SQLITE_CHECKPOINTS``.
    """
    parsed = make_url(url)
    if sqlite_checkpoints is None and parsed.get_backend_name() == "sqlite":
        sqlite_checkpoints = get_settings().sqlite_checkpoints
    if pool_size is None or max_overflow is None:
        settings = get_settings()
        default_size, default_overflow = POOL_DEFAULTS.get(parsed.get_backend_name(), (10, 20))
        if pool_size is None:
            pool_size = settings.db_pool_size or default_size
        if max_overflow is None:
            max_overflow = default_overflow if settings.db_max_overflow is None else settings.db_max_overflow
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_size=pool_size,
            max_overflow=max_overflow,
        )
        background = sqlite_checkpoints == "background" and not memory_only(engine)
        _configure_sqlite(engine, background_checkpoints=background)
        if background:
            _checkpoint_in_background(engine)
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername != "postgresql+psycopg":
            raise ValueError(f"use the psycopg 3 driver: postgresql+psycopg://... (got {parsed.drivername}://)")
        connect_args = {} if "connect_timeout" in parsed.query else {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S}
        return create_engine(
            url, pool_pre_ping=True, pool_size=pool_size, max_overflow=max_overflow, connect_args=connect_args
        )
    raise ValueError(f"unsupported database {parsed.get_backend_name()!r}; use sqlite or postgresql+psycopg")


def checkpoint_now(engine: Engine) -> tuple[int, int, int]:
    """A passive checkpoint of the SQLite database: (busy, frames in the log, frames copied), as
    ``PRAGMA wal_checkpoint`` reports them. It copies what it can without waiting for readers or writers."""
    connection = engine.raw_connection()  # no BEGIN: a checkpoint cannot run inside a transaction
    try:
        cursor = connection.cursor()
        busy, frames, copied = cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        cursor.close()
    finally:
        connection.close()
    return int(busy), int(frames), int(copied)


def _checkpoint_in_background(engine: Engine) -> None:
    """Start the thread that checkpoints ``engine``'s database every ``CHECKPOINT_EVERY_S``, for as long
    as the engine exists (it holds the engine weakly, so a dropped engine ends it)."""
    ref = weakref.ref(engine)

    def run() -> None:
        while True:
            time.sleep(CHECKPOINT_EVERY_S)
            current = ref()
            if current is None:
                return
            try:
                checkpoint_now(current)
            except Exception as exc:  # a database busy or gone: the next round tries again
                log.debug("background checkpoint of %s failed: %s", current.url, exc)
            del current

    threading.Thread(target=run, name="medrev-sqlite-checkpoint", daemon=True).start()


def writer(engine: Engine) -> Engine:
    """The same engine, flagged so that its transactions take the write lock at BEGIN."""
    return engine.execution_options(**{_WRITE: True})


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A session in one write transaction: committed on success, rolled back on any error.

    Raises ``DatabaseReadOnly`` at once (no lock taken, nothing half-done) when the SQLite file
    cannot be written.
    """
    reason = read_only_reason(engine)
    if reason is not None:
        raise DatabaseReadOnly(read_only_sentence(sqlite_path(engine.url) or engine.url, reason), engine.url)
    with database_faults(engine), Session(writer(engine), expire_on_commit=False) as session, session.begin():
        yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A session for reads; it never takes the SQLite write lock."""
    with database_faults(engine), Session(engine, expire_on_commit=False) as session:
        yield session


@contextmanager
def statement_session(engine: Engine) -> Iterator[Session]:
    """A read session for short reads that need not agree with each other, with no transaction on
    PostgreSQL: each statement runs on its own (autocommit) and sees the latest commits.

    A PostgreSQL transaction costs two round trips of its own (``BEGIN``, and the ``ROLLBACK`` that
    ends a read), as many as the reads of a reviewer's next task; on a database across a network each
    is a network latency on every reviewer's submit. SQLite runs in the process (nothing to save) and
    gets a :func:`read_session`.
    """
    if engine.dialect.name != "postgresql":
        with read_session(engine) as session:
            yield session
        return
    with database_faults(engine), Session(_autocommit(engine), expire_on_commit=False) as session:
        yield session


def _autocommit(engine: Engine) -> Engine:
    return engine.execution_options(isolation_level="AUTOCOMMIT")


@contextmanager
def snapshot_session(engine: Engine) -> Iterator[Session]:
    """A read session whose statements all see one snapshot of the database, whatever commits meanwhile.

    SQLite read transactions are snapshots already (WAL: a deferred ``BEGIN`` fixes the snapshot at
    the first read). PostgreSQL's default, READ COMMITTED, gives each statement a new snapshot; this
    session's transaction is REPEATABLE READ instead. For reads that must agree with each other, such
    as a study's data version and the rows it versions, while reviewers keep submitting.
    """
    with read_session(engine) as session:
        if engine.dialect.name == "postgresql":
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        yield session


@contextmanager
def database_faults(engine: Engine) -> Iterator[None]:
    """Re-raise a known database fault met inside the block as one sentence (``DatabaseUnavailable``)."""
    try:
        yield
    except DBAPIError as exc:
        fault = classify(exc, engine.url, read_only_reason=_read_only_reason_after(exc, engine))
        if fault is None:
            raise
        raise fault from exc


def _read_only_reason_after(exc: DBAPIError, engine: Engine) -> str | None:
    if engine.dialect.name != "sqlite" or "readonly" not in str(exc.orig).lower():
        return None
    return read_only_reason(engine)


def read_only_reason(engine: Engine) -> str | None:
    """Why the SQLite file behind ``engine`` cannot be written, or None (always None for PostgreSQL).

    Asked before every write session, so it costs one ``access`` call; the reason is worked out
    only when the file is not writable. A file that becomes read-only while the app runs is seen
    at the next save.
    """
    url = engine.url
    if url.get_backend_name() != "sqlite":
        return None
    uri = url.query.get("uri") in ("true", "1")
    if uri and url.query.get("mode") == "ro":
        return "it is opened with mode=ro"
    if uri and url.query.get("immutable") == "1":
        return "it is opened with immutable=1"
    path = _sqlite_file(url)
    if path is None or os.access(path, os.W_OK) or not path.is_file():
        return None
    return _why_not_writable(path)


@functools.lru_cache(maxsize=64)
def _sqlite_file(url: URL) -> Path | None:
    return sqlite_path(url)


def _why_not_writable(path: Path) -> str:
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        pass
    if _immutable_flag(path):
        return "it carries the immutable attribute, set with chattr +i"
    return f"its permissions ({path.stat().st_mode & 0o777:o}) do not let this user write it"


def _immutable_flag(path: Path) -> bool:
    """Linux's immutable attribute (``chattr +i``), which stops even root from writing."""
    try:
        import array
        import fcntl

        flags = array.array("l", [0])
        with open(path, "rb") as handle:
            fcntl.ioctl(handle.fileno(), 0x80086601, flags, True)  # FS_IOC_GETFLAGS
        return bool(flags[0] & 0x10)  # FS_IMMUTABLE_FL
    except (OSError, ImportError, ValueError):
        return False


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def memory_only(engine: Engine) -> bool:
    """Whether the engine's data live in this process's memory, seen by one connection only (in-memory
    SQLite: ``sqlite://``, ``StaticPool``): another connection or process would not find them."""
    if isinstance(engine.pool, StaticPool):
        return True
    if engine.url.get_backend_name() != "sqlite":
        return False
    database = engine.url.database or ""
    return database in ("", ":memory:") or "mode=memory" in str(engine.url)
