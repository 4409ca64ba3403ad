"""Settings read from the environment, in one place.

Environment variables (documented in the README):
- ``MEDREV_DATABASE_URL``: SQLAlchemy URL; default the ``database_url`` of the nearest
  ``medrev.toml`` (this folder or a parent; ``medrev demo`` writes one), else a SQLite file in
  ``MEDREV_HOME``. PostgreSQL: ``postgresql+psycopg://user@host:5432/dbname``.
- ``MEDREV_HOME``: folder for the default SQLite file (default ``~/.local/share/medrev``).
- ``MEDREV_EXPORT_DIR``: default export folder (default ``./exports``).
- ``MEDREV_LOCKOUT_ATTEMPTS`` / ``MEDREV_LOCKOUT_MINUTES``: sign-in lock-out policy (5 / 15): after
  that many failed sign-ins for one username (existing or not) within the window, that username is
  locked for that many minutes.
- ``MEDREV_LOCKOUT_ADDRESS_ATTEMPTS``: the same for failed sign-ins from one client address (50; a
  whole site may share one address).
- ``MEDREV_TRUSTED_PROXIES``: the reverse proxies whose ``X-Forwarded-For`` names the client, as
  addresses or CIDR networks separated by commas (default ``127.0.0.0/8,::1``: a proxy on this host).
  From any other peer the header is ignored, since a client can send one of its own choosing.
- ``MEDREV_SESSION_SECRET``: key that signs session cookies; every replica needs the same one.
  Falls back to ``STREAMLIT_SERVER_COOKIE_SECRET``, then to a key generated once and kept in the
  database (shared by replicas on one database).
- ``MEDREV_SESSION_HOURS``: how long a sign-in lasts (12).
- ``MEDREV_DB_POOL_SIZE`` / ``MEDREV_DB_MAX_OVERFLOW``: database connections each process keeps
  open, and how many more it may open under load (PostgreSQL 10 / 20, SQLite 20 / 20). Every app
  replica and CLI process has its own pool, so replicas x (size + overflow) must stay below the
  server's ``max_connections``.
- ``MEDREV_SQLITE_CHECKPOINTS``: who copies SQLite's write-ahead log into the database file:
  ``commit`` (SQLite's default: the commit that takes the log past 1,000 pages) or ``background``
  (a thread of the process, every second; ``medrev app`` sets it, so no reviewer's submit waits
  for a checkpoint). See ``db.engine``.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

PROJECT_FILE = "medrev.toml"
_PROJECT_KEYS = ("database_url",)
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK_NETWORKS: tuple[IPNetwork, ...] = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1"))


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
    sqlite_checkpoints: str = "commit"  # or "background" (db.engine)
    trusted_proxies: tuple[IPNetwork, ...] = LOOPBACK_NETWORKS


SQLITE_CHECKPOINT_CHOICES = ("commit", "background")


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


def find_project_file(start: Path | None = None) -> Path | None:
    """The nearest ``medrev.toml`` in ``start`` (default: the current folder) or one of its parents."""
    try:
        folder = (start or Path.cwd()).resolve()
    except OSError:  # the current folder was deleted
        return None
    for candidate in (folder, *folder.parents):
        path = candidate / PROJECT_FILE
        if path.is_file():
            return path
    return None


def project_settings(path: Path) -> dict[str, str]:
    """The settings of a ``medrev.toml``; a file medrev cannot use is refused naming file, line and key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not a valid TOML file ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    unknown = sorted(set(data) - set(_PROJECT_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown setting(s) {', '.join(unknown)}; expected {', '.join(_PROJECT_KEYS)}")
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{path}: field {key!r}: expected a non-empty text value, found {value!r}")
    return {key: value.strip() for key, value in data.items()}


def write_project_file(database_url: str, folder: Path) -> Path | None:
    """Write ``folder/medrev.toml`` naming ``database_url`` so later commands there find the database.

    Returns the file, or None when a ``medrev.toml`` already there names another database (it is
    never overwritten: it is the user's).
    """
    path = folder / PROJECT_FILE
    if path.exists():
        try:
            current = project_settings(path).get("database_url")
        except ValueError:
            return None
        return path if current == database_url else None
    escaped = database_url.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        "# Written by `medrev demo`: medrev commands run in this folder (or below) use this database\n"
        "# unless MEDREV_DATABASE_URL or --database-url says otherwise. Delete this file to stop.\n"
        f'database_url = "{escaped}"\n',
        encoding="utf-8",
    )
    return path


def _database_url() -> str:
    from_env = os.environ.get("MEDREV_DATABASE_URL")
    if from_env:
        return from_env
    found = find_project_file()
    if found is not None:
        url = project_settings(found).get("database_url")
        if url:
            return url
    return default_sqlite_url()


def get_settings() -> Settings:
    """Read the settings now (not at import), so tests and the CLI can change the environment."""
    return Settings(
        database_url=_database_url(),
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
        sqlite_checkpoints=_choice("MEDREV_SQLITE_CHECKPOINTS", SQLITE_CHECKPOINT_CHOICES),
        trusted_proxies=_networks("MEDREV_TRUSTED_PROXIES", LOOPBACK_NETWORKS),
    )


def _choice(name: str, choices: tuple[str, ...]) -> str:
    """The variable's value among ``choices`` (the first when unset), else a ValueError naming them."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return choices[0]
    if raw not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def _networks(name: str, default: tuple[IPNetwork, ...]) -> tuple[IPNetwork, ...]:
    """The variable's comma-separated addresses or CIDR networks (``default`` when unset), else a ValueError.

    An address stands for itself (``/32``, ``/128``); a network written with host bits
    (``10.0.0.5/24``) means the network, as nginx's ``set_real_ip_from`` reads it.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not items:
        raise ValueError(f"{name} must list addresses or networks separated by commas, got {raw!r}")
    networks = []
    for item in items:
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(
                f"{name} must list addresses or networks separated by commas (such as 127.0.0.1,10.0.0.0/24), "
                f"got {item!r}"
            ) from None
    return tuple(networks)
