"""Database faults as one sentence: what is wrong, the URL without its password, what to do.

Drivers report faults as exceptions whose text is written for programmers (and whose tracebacks
run to hundreds of lines). ``classify`` turns the ones a deployment meets (server unreachable,
wrong user, unknown database, missing folder, a folder or a foreign file where the database
should be, a read-only file) into a ``DatabaseUnavailable`` whose message the app shows with
``st.error`` and the command line prints before exiting with code 2. ``DatabaseReadOnly`` is the
one fault that leaves the database usable: reading works, saving is refused with the reason.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from review_app.errors import ServiceError

URL_SETTING = "MEDREV_DATABASE_URL"


class DatabaseUnavailable(ServiceError):
    """The database cannot be used; the message is one sentence fit for a reviewer or an operator."""

    def __init__(self, sentence: str, url: str | URL | None = None) -> None:
        super().__init__(sentence)
        self.url = safe_url(url) if url is not None else None


class DatabaseReadOnly(DatabaseUnavailable):
    """Saving is refused because the SQLite file cannot be written; reading still works."""


def safe_url(url: str | URL) -> str:
    """The URL as text with any password replaced by ``***``."""
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":  # no password; keep the path readable (no %3A)
            query = "&".join(f"{key}={value}" for key, value in parsed.query.items())
            return f"{parsed.drivername}:///{parsed.database or ''}" + (f"?{query}" if query else "")
        return parsed.render_as_string(hide_password=True)
    except Exception:  # not even a URL: show it only if it cannot hold a password
        text = str(url)
        return text if "@" not in text else "(an unreadable URL)"


def sqlite_path(url: str | URL) -> Path | None:
    """The file behind a SQLite URL (``sqlite:///x.db`` or ``sqlite:///file:x.db?mode=ro&uri=true``), else None."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if parsed.query.get("uri") in ("true", "1") and database.startswith("file:"):
        database = database.removeprefix("file:").split("?", 1)[0]
        if database.startswith("//"):  # file://host/path: only the local form is meaningful here
            database = "/" + database[2:].split("/", 1)[-1]
    if not database or database == ":memory:" or database.startswith(":memory:"):
        return None
    return Path(database).expanduser()


def read_only_sentence(path: Path, reason: str) -> str:
    return (
        f"Saving is not possible: the database file {path} is read-only ({reason}). "
        "Ask your administrator to make it writable; reading still works."
    )


def _root(exc: BaseException) -> BaseException:
    """The driver's own exception behind SQLAlchemy's wrapper (``.orig``), if any."""
    return getattr(exc, "orig", None) or exc


def _first_line(exc: BaseException) -> str:
    text = str(_root(exc)).strip().splitlines()
    return text[0].strip().rstrip(".") if text else type(exc).__name__


def classify(exc: BaseException, url: str | URL, *, read_only_reason: str | None = None) -> DatabaseUnavailable | None:
    """The one-sentence fault for a driver or migration error on ``url``, or None if it is not a known fault.

    ``read_only_reason`` is why the SQLite file cannot be written, when the caller knows it.
    """
    if isinstance(exc, DatabaseUnavailable):
        return exc
    shown = safe_url(url)
    parsed = make_url(url)
    root = _root(exc)
    message = str(root)
    lower = message.lower()
    if parsed.get_backend_name() == "sqlite":
        return _classify_sqlite(root, lower, shown, sqlite_path(url), read_only_reason)
    if parsed.get_backend_name() == "postgresql":
        return _classify_postgres(message, shown, parsed)
    return None


def _classify_sqlite(
    root: BaseException, lower: str, shown: str, path: Path | None, read_only_reason: str | None
) -> DatabaseUnavailable | None:
    name = getattr(root, "sqlite_errorname", "") or ""
    where = path if path is not None else shown
    if name.startswith("SQLITE_READONLY") or "readonly database" in lower:
        reason = read_only_reason or "the file system refused the write"
        return DatabaseReadOnly(read_only_sentence(where, reason), shown)
    if name == "SQLITE_NOTADB" or "file is not a database" in lower:
        return DatabaseUnavailable(
            f"The file {where} is not a SQLite database ({shown}): point {URL_SETTING} at a medrev database, "
            "or at a new file name to start one.",
            shown,
        )
    if name == "SQLITE_CORRUPT" or "malformed" in lower:
        return DatabaseUnavailable(
            f"The SQLite database {where} is damaged ({shown}): restore it from a backup.",
            shown,
        )
    if name == "SQLITE_CANTOPEN" or "unable to open database file" in lower:
        if path is not None:
            fault = location_fault(path, shown)
            if fault is not None:
                return fault
        return DatabaseUnavailable(
            f"The SQLite database {where} cannot be opened ({shown}): check that medrev may read the file "
            "and write its folder.",
            shown,
        )
    if isinstance(root, sqlite3.OperationalError) and "disk i/o error" in lower:
        return DatabaseUnavailable(
            f"The disk refused to read or write the SQLite database {where} ({shown}): check the disk and its "
            "free space.",
            shown,
        )
    return None


def _classify_postgres(message: str, shown: str, parsed: URL) -> DatabaseUnavailable | None:
    lower = message.lower()
    server = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    if "does not exist" in lower and "database" in lower:
        name = parsed.database or "(none given)"
        return DatabaseUnavailable(
            f"The database {name} does not exist on the PostgreSQL server {server} ({shown}): create it "
            f"(createdb {name}) or correct the database name in {URL_SETTING}.",
            shown,
        )
    if (
        "password authentication failed" in lower
        or ("role" in lower and "does not exist" in lower)
        or "no password supplied" in lower
        or "no pg_hba.conf entry" in lower
        or "authentication failed" in lower
    ):
        return DatabaseUnavailable(
            f"The PostgreSQL server {server} refused the user name or password ({shown}): correct them in "
            f"{URL_SETTING}.",
            shown,
        )
    unreachable = (
        ("connection refused", "refused the connection"),
        ("failed to resolve host", "its host name is unknown"),
        ("could not translate host name", "its host name is unknown"),
        ("name or service not known", "its host name is unknown"),
        ("timeout expired", "it did not answer in time"),
        ("timed out", "it did not answer in time"),
        ("no route to host", "there is no network route to it"),
        ("network is unreachable", "there is no network route to it"),
        ("server closed the connection", "it closed the connection"),
        ("connection failed", "the connection failed"),
        ("terminating connection", "it closed the connection"),
        ("the database system is starting up", "it is still starting"),
        ("the database system is shutting down", "it is shutting down"),
    )
    for marker, why in unreachable:
        if marker in lower:
            return DatabaseUnavailable(
                f"Cannot reach the PostgreSQL server {server} ({why}; {shown}): start the server, or correct the "
                f"host and port in {URL_SETTING}.",
                shown,
            )
    if "read-only transaction" in lower:
        return DatabaseReadOnly(
            f"Saving is not possible: the PostgreSQL database ({shown}) only accepts reads (a standby or a "
            "read-only user). Ask your administrator to point medrev at the primary server.",
            shown,
        )
    if "permission denied" in lower:
        return DatabaseUnavailable(
            f"The PostgreSQL user in {shown} lacks a permission medrev needs ({message.strip().splitlines()[0]}): "
            "run `medrev db upgrade` once as the database owner, or grant the user rights on the schema.",
            shown,
        )
    return None


def location_fault(path: Path, shown: str) -> DatabaseUnavailable | None:
    """What is wrong with the place a SQLite file should be, before (or after) SQLite fails to open it."""
    folder = path.parent
    if path.is_dir():
        return DatabaseUnavailable(
            f"{path} is a folder, not a database file ({shown}): point {URL_SETTING} at a file inside it, "
            f"such as sqlite:///{path / 'medrev.db'}.",
            shown,
        )
    if not folder.exists():
        return DatabaseUnavailable(
            f"The folder {folder} for the SQLite database does not exist ({shown}): create it, or correct the "
            f"path in {URL_SETTING}.",
            shown,
        )
    if not folder.is_dir():
        return DatabaseUnavailable(
            f"{folder} is a file, so it cannot hold the SQLite database ({shown}): correct the path in {URL_SETTING}.",
            shown,
        )
    return None


def unknown_fault(exc: BaseException, url: str | URL, doing: str) -> DatabaseUnavailable:
    """The last resort: a fault no rule above knows, still as one sentence with the driver's own first line."""
    return DatabaseUnavailable(
        f"The database {safe_url(url)} could not be {doing} ({_first_line(exc)}): check {URL_SETTING} and the "
        "database server, then try again.",
        url,
    )
