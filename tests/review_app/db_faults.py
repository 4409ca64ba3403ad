"""Real broken databases, one per fault a deployment meets, for the CLI, data-layer and app tests.

Each builder makes the fault for real (a closed port, a role or database PostgreSQL does not
have, a missing folder, a folder or a text file where the SQLite file should be, another
application's tables, a schema revision from the future, a read-only file that still needs
migrating) and returns the URL plus the fragments its one sentence must contain. PostgreSQL URLs
carry a password (``secret-pw``) so the tests can check it never shows.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from review_app.db.engine import make_engine
from review_app.db.migrate import upgrade

from .conftest import PG_ADMIN, _pg, _pg_url
from .ui.browser_support import free_port

PASSWORD = "secret-pw"
PG_HOST = PG_ADMIN.split("@", 1)[1].split("/", 1)[0]  # 127.0.0.1:5432


@dataclass
class Fault:
    url: str
    must_say: list[str]
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def _pg_with_password(user: str, database: str, host: str = PG_HOST) -> str:
    return f"postgresql+psycopg://{user}:{PASSWORD}@{host}/{database}"


def pg_unreachable(tmp_path: Path) -> Fault:
    port = free_port()  # nothing listens there
    return Fault(
        _pg_with_password("medrev", "medrev", f"127.0.0.1:{port}"),
        ["Cannot reach the PostgreSQL server", f"127.0.0.1:{port}", "refused the connection", "MEDREV_DATABASE_URL"],
    )


def pg_wrong_user(tmp_path: Path) -> Fault:
    return Fault(
        _pg_with_password(f"nobody_{uuid.uuid4().hex[:6]}", "postgres"),
        ["refused the user name or password", "correct them in MEDREV_DATABASE_URL"],
    )


def pg_unknown_database(tmp_path: Path) -> Fault:
    name = f"medrev_absent_{uuid.uuid4().hex[:6]}"
    return Fault(
        _pg_with_password("postgres", name),
        [f"The database {name} does not exist", f"createdb {name}", "MEDREV_DATABASE_URL"],
    )


def pg_foreign_schema(tmp_path: Path) -> Fault:
    name = f"medrev_foreign_{uuid.uuid4().hex[:6]}"
    _pg(f'CREATE DATABASE "{name}"')
    engine = make_engine(_pg_url(name))
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE patients (id integer primary key, name text)")
    engine.dispose()
    fault = Fault(
        _pg_with_password("postgres", name), ["already holds tables that no medrev migration made (patients)"]
    )
    fault.cleanup.append(lambda: _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return fault


def sqlite_missing_folder(tmp_path: Path) -> Fault:
    folder = tmp_path / "no-such-folder"
    return Fault(
        f"sqlite:///{folder / 'review.db'}",
        [f"The folder {folder} for the SQLite database does not exist", "create it"],
    )


def sqlite_folder_in_place(tmp_path: Path) -> Fault:
    path = tmp_path / "review.db"
    path.mkdir()
    return Fault(f"sqlite:///{path}", [f"{path} is a folder, not a database file", f"sqlite:///{path}/medrev.db"])


def sqlite_not_a_database(tmp_path: Path) -> Fault:
    path = tmp_path / "notes.db"
    path.write_text("patient notes, not a database\n" * 200)
    return Fault(f"sqlite:///{path}", [f"The file {path} is not a SQLite database"])


def sqlite_foreign_schema(tmp_path: Path) -> Fault:
    path = tmp_path / "other-app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE reviewer (who TEXT)")
        connection.execute("CREATE TABLE visits (id INTEGER)")
    return Fault(f"sqlite:///{path}", ["already holds tables that no medrev migration made (reviewer, visits)"])


def sqlite_future_revision(tmp_path: Path) -> Fault:
    path = tmp_path / "future.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '0999_from_the_future'")
    engine.dispose()
    return Fault(
        f"sqlite:///{path}",
        ["is at schema revision 0999_from_the_future", "this version of medrev does not know", "upgrade medrev"],
    )


def sqlite_read_only_unmigrated(tmp_path: Path) -> Fault:
    path = tmp_path / "old.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine, "0001")
    engine.dispose()
    return Fault(
        f"sqlite:///file:{path}?mode=ro&uri=true",
        [f"The database file {path} is read-only (it is opened with mode=ro)", "not yet migrated", "0001"],
    )


FAULTS: dict[str, Callable[[Path], Fault]] = {
    "postgres-unreachable": pg_unreachable,
    "postgres-wrong-user": pg_wrong_user,
    "postgres-unknown-database": pg_unknown_database,
    "postgres-foreign-schema": pg_foreign_schema,
    "sqlite-missing-folder": sqlite_missing_folder,
    "sqlite-folder-in-place": sqlite_folder_in_place,
    "sqlite-not-a-database": sqlite_not_a_database,
    "sqlite-foreign-schema": sqlite_foreign_schema,
    "sqlite-future-revision": sqlite_future_revision,
    "sqlite-read-only-unmigrated": sqlite_read_only_unmigrated,
}


@contextmanager
def made(kind: str, tmp_path: Path) -> Iterator[Fault]:
    fault = FAULTS[kind](tmp_path)
    try:
        yield fault
    finally:
        for undo in fault.cleanup:
            undo()


@contextmanager
def read_only_file(path: Path) -> Iterator[str]:
    """Make ``path`` unwritable for this process for real; yields the reason medrev should give.

    As root, permission bits do not stop writes, so root sets Linux's immutable attribute
    (``chattr +i``), which does; other users get mode 0444.
    """
    import os
    import subprocess

    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            yield "it carries the immutable attribute, set with chattr +i"
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield "its permissions (444) do not let this user write it"
        finally:
            path.chmod(mode)


def copy_database(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    return target
