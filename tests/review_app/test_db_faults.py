"""Database trouble is one sentence: what is wrong, the URL without its password, what to do; exit code 1
(a fault of the machine).

Every fault is made for real (see ``db_faults``). The same sentence reaches the app (ui/test_db_faults_app.py).
A read-only SQLite file still serves reads and refuses saves with the reason.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from contextlib import nullcontext

import pytest
from sqlalchemy import event, func, text
from sqlmodel import select
from typer.testing import CliRunner

from review_app.cli import app
from review_app.db.connect import dispose_engines, get_engine, open_database
from review_app.db.engine import read_only_reason, read_session, write_session
from review_app.db.errors import DatabaseReadOnly, DatabaseUnavailable
from review_app.db.models import Reviewer, Study
from review_app.services import accounts, authentication, studies
from review_app.services.actors import SYSTEM

from .conftest import _pg, _pg_url
from .db_faults import FAULTS, PASSWORD, made, read_only_file

runner = CliRunner()
POSTGRES_FAULTS = {k for k in FAULTS if k.startswith("postgres")}
FAULT_PARAMS = [pytest.param(k, marks=pytest.mark.postgres) if k in POSTGRES_FAULTS else k for k in FAULTS]


@pytest.fixture(autouse=True)
def _fresh_engines():
    yield
    dispose_engines()


def _one_sentence(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0].removeprefix("error: ")


@pytest.mark.parametrize("kind", FAULT_PARAMS)
def test_each_fault_is_one_sentence_and_exit_code_1(kind, tmp_path, monkeypatch):
    with made(kind, tmp_path) as fault:
        monkeypatch.setenv("MEDREV_DATABASE_URL", fault.url)
        sentences = set()
        for command in (["review", "status"], ["review", "study", "list"], ["db", "upgrade"], ["app"]):
            result = runner.invoke(app, command)
            assert result.exit_code == 1, (command, result.output, result.exception)
            assert "Traceback" not in result.output and "sqlalche.me" not in result.output
            sentences.add(_one_sentence(result.stderr))
        (sentence,) = sentences  # every command says the same
        for fragment in fault.must_say:
            assert fragment in sentence, sentence
        assert PASSWORD not in sentence
        if fault.url.startswith("postgresql"):
            assert ":***@" in sentence  # the URL is there, its password is not
        with pytest.raises(DatabaseUnavailable) as raised:
            get_engine(fault.url)
        assert str(raised.value) == sentence


def test_a_real_process_prints_one_line_not_a_traceback(tmp_path):
    with made("postgres-unreachable", tmp_path) as fault:
        done = subprocess.run(
            [sys.executable, "-m", "review_app", "review", "status"],
            env=os.environ | {"MEDREV_DATABASE_URL": fault.url},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stdout == ""
    assert _one_sentence(done.stderr).startswith("Cannot reach the PostgreSQL server")


def test_the_default_home_folder_is_created_but_a_configured_folder_is_not(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDREV_DATABASE_URL", raising=False)
    monkeypatch.setenv("MEDREV_HOME", str(tmp_path / "home" / "medrev"))
    # from a folder with no medrev.toml above it: `make demo` writes one into the checkout the tests run in
    monkeypatch.chdir(tmp_path)
    missing = runner.invoke(app, ["review", "status"])  # a command that only reads never starts a database
    assert missing.exit_code == 1 and "There is no database at" in missing.stderr
    assert not (tmp_path / "home").exists()
    assert runner.invoke(app, ["review", "study", "create", "first"]).exit_code == 0
    assert (tmp_path / "home" / "medrev" / "medrev.db").is_file()
    elsewhere = tmp_path / "typo" / "medrev.db"
    result = runner.invoke(app, ["--database-url", f"sqlite:///{elsewhere}", "review", "status"])
    assert result.exit_code == 1 and "does not exist" in result.stderr
    assert not elsewhere.parent.exists()  # nothing was created behind the operator's back


def test_a_fault_is_not_cached_so_the_next_call_recovers(tmp_path):
    folder = tmp_path / "later"
    url = f"sqlite:///{folder / 'review.db'}"
    with pytest.raises(DatabaseUnavailable):
        get_engine(url)
    folder.mkdir()
    assert studies.list_studies(get_engine(url)) == []


# --- read-only SQLite -------------------------------------------------------------------------


def _seeded(tmp_path):
    """A migrated SQLite file with one lead and one study, checkpointed (no WAL left beside it)."""
    path = tmp_path / "review.db"
    engine = open_database(f"sqlite:///{path}")
    accounts.create_user(
        engine,
        accounts.UserProfile(username="lead1", display_name="Lead", role="lead"),
        password="lead-password-1",
        actor=SYSTEM,
    )
    studies.create_study(engine, "pilot", rubrics=["A"], actor=SYSTEM)
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path


def _count(engine, model) -> int:
    with read_session(engine) as session:
        return session.exec(select(func.count()).select_from(model)).one()


@pytest.mark.parametrize("how", ["file-attribute", "mode=ro", "immutable=1"])
def test_read_only_sqlite_reads_and_refuses_saves_with_the_reason(how, tmp_path):
    path = _seeded(tmp_path)
    before = path.read_bytes()
    urls = {
        "file-attribute": f"sqlite:///{path}",
        "mode=ro": f"sqlite:///file:{path}?mode=ro&uri=true",
        "immutable=1": f"sqlite:///file:{path}?immutable=1&uri=true",
    }
    with read_only_file(path) if how == "file-attribute" else nullcontext(f"it is opened with {how}") as reason:
        engine = get_engine(urls[how])
        assert read_only_reason(engine) == reason
        assert authentication.authenticate(engine, "lead1", "lead-password-1").username == "lead1"  # sign-in works
        assert authentication.authenticate(engine, "lead1", "wrong password") is None
        assert [s.name for s in studies.list_studies(engine)] == ["pilot"]
        with pytest.raises(DatabaseReadOnly) as refused:
            studies.create_study(engine, "second", rubrics=["A"], actor=SYSTEM)
        assert str(refused.value) == (
            f"Saving is not possible: the database file {path} is read-only ({reason}). "
            "Ask your administrator to make it writable; reading still works."
        )
        assert _count(engine, Study) == 1
    assert path.read_bytes() == before  # not a byte changed, not even sign-in bookkeeping


def test_a_write_the_file_system_refuses_midway_is_the_read_only_sentence(tmp_path):
    """The pre-check sees a writable file; SQLite still refuses the write: the refusal is classified too."""
    path = _seeded(tmp_path)
    engine = get_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _query_only(dbapi_connection, _record):
        dbapi_connection.execute("PRAGMA query_only = ON")  # SQLite answers SQLITE_READONLY to any write

    engine.dispose()  # new connections get the pragma
    assert read_only_reason(engine) is None
    refused = pytest.raises(DatabaseReadOnly, match=r"Saving is not possible: the database file .* is read-only")
    with refused, write_session(engine) as session:
        session.exec(text("UPDATE reviewer SET display_name = 'x'"))
    with read_session(engine) as session:
        assert session.exec(select(Reviewer.display_name)).one() == "Lead"


def test_cli_on_a_read_only_file_reads_and_refuses_a_save_with_exit_code_1(tmp_path, monkeypatch):
    path = _seeded(tmp_path)
    monkeypatch.setenv("MEDREV_DATABASE_URL", f"sqlite:///{path}")
    with read_only_file(path) as reason:
        listing = runner.invoke(app, ["review", "study", "list"])
        assert listing.exit_code == 0 and "pilot" in listing.output
        current = runner.invoke(app, ["db", "upgrade"])  # nothing to do: says so instead of failing
        assert current.exit_code == 0 and "database at revision" in current.output
        result = runner.invoke(app, ["review", "user", "add", "rev9", "--no-password"])
        assert result.exit_code == 1
        assert _one_sentence(result.stderr) == (
            f"Saving is not possible: the database file {path} is read-only ({reason}). "
            "Ask your administrator to make it writable; reading still works."
        )
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM reviewer").fetchone() == (1,)


@pytest.mark.postgres
def test_a_database_lost_while_running_is_the_same_kind_of_sentence(pg_template):
    """Faults inside a session (the database dropped under a running app) are classified too."""
    name = f"medrev_lost_{uuid.uuid4().hex[:8]}"
    _pg(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    try:
        engine = get_engine(_pg_url(name))
        assert studies.list_studies(engine) == []
        _pg(f'DROP DATABASE "{name}" WITH (FORCE)')
        with pytest.raises(DatabaseUnavailable, match=rf"^The database {name} does not exist on the PostgreSQL"):
            studies.list_studies(engine)
        with pytest.raises(DatabaseUnavailable, match=rf"^The database {name} does not exist"):
            studies.create_study(engine, "after", rubrics=["A"], actor=SYSTEM)
    finally:
        dispose_engines()
        _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
