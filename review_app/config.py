"""Settings read from the environment, in one place.

Environment variables (documented in the README):
- ``MEDREV_DATABASE_URL``: SQLAlchemy URL; default a SQLite file in ``MEDREV_HOME``.
  PostgreSQL: ``postgresql+psycopg://user@host:5432/dbname``.
- ``MEDREV_HOME``: folder for the default SQLite file (default ``~/.local/share/medrev``).
- ``MEDREV_EXPORT_DIR``: default export folder (default ``./exports``).
- ``MEDREV_LOCKOUT_ATTEMPTS`` / ``MEDREV_LOCKOUT_MINUTES``: sign-in lock-out policy (5 / 15): after
  that many failed sign-ins for one username (existing or not) within the window, that username is
  locked for that many minutes.
- ``MEDREV_LOCKOUT_ADDRESS_ATTEMPTS``: the same for failed sign-ins from one client address (50; a
  whole site may share one address).
- ``MEDREV_SESSION_SECRET``: key that signs session cookies; every replica needs the same one.
  Falls back to ``STREAMLIT_SERVER_COOKIE_SECRET``, then to a key generated once and kept in the
  database (shared by replicas on one database).
- ``MEDREV_SESSION_HOURS``: how long a sign-in lasts (12).
- ``MEDREV_DB_POOL_SIZE`` / ``MEDREV_DB_MAX_OVERFLOW``: database connections each process keeps
  open, and how many more it may open under load (PostgreSQL 10 / 20, SQLite 20 / 20). Every app
  replica and CLI process has its own pool, so replicas x (size + overflow) must stay below the
  server's ``max_connections``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    database_url: str
    export_dir: Path
    lockout_attempts: int
    lockout_minutes: int
    lockout_address_attempts: int = 50
    session_secret: str | None = None
    session_hours: int = 12
    db_pool_size: int | None = None  # None: the backend's default (db.engine)
    db_max_overflow: int | None = None


def default_sqlite_url() -> str:
    home = Path(os.environ.get("MEDREV_HOME", Path.home() / ".local" / "share" / "medrev"))
    return f"sqlite:///{home / 'medrev.db'}"


def _int(name: str, default: int, *, minimum: int = 1) -> int:
    value = _optional_int(name, minimum=minimum)
    return default if value is None else value


def _optional_int(name: str, *, minimum: int = 1) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def get_settings() -> Settings:
    """Read the settings now (not at import), so tests and the CLI can change the environment."""
    return Settings(
        database_url=os.environ.get("MEDREV_DATABASE_URL") or default_sqlite_url(),
        export_dir=Path(os.environ.get("MEDREV_EXPORT_DIR", "exports")),
        lockout_attempts=_int("MEDREV_LOCKOUT_ATTEMPTS", 5),
        lockout_minutes=_int("MEDREV_LOCKOUT_MINUTES", 15),
        lockout_address_attempts=_int("MEDREV_LOCKOUT_ADDRESS_ATTEMPTS", 50),
        session_secret=os.environ.get("MEDREV_SESSION_SECRET")
        or os.environ.get("STREAMLIT_SERVER_COOKIE_SECRET")
        or None,
        session_hours=_int("MEDREV_SESSION_HOURS", 12),
        db_pool_size=_optional_int("MEDREV_DB_POOL_SIZE"),
        db_max_overflow=_optional_int("MEDREV_DB_MAX_OVERFLOW", minimum=0),
    )
