"""Database fixtures: every data-layer test runs on SQLite and on the PostgreSQL server.

Each test gets a fresh database copied from a migrated template (a file copy on SQLite,
``CREATE DATABASE ... TEMPLATE`` on PostgreSQL), so tests are isolated and migrations run once
per session. The PostgreSQL databases are created on 127.0.0.1:5432 and dropped afterwards.
Set ``MEDREV_TEST_POSTGRES_URL`` to use another server (an admin URL to its ``postgres`` db).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from review_app.db.engine import make_engine
from review_app.db.migrate import upgrade
from tests.postgres_admin import PG_ADMIN, migrated_template, scratch_database
from tests.postgres_admin import pg_admin as _pg
from tests.postgres_admin import pg_url as _pg_url

__all__ = ["PG_ADMIN", "_pg", "_pg_url"]  # the server's admin helpers, as the review_app tests import them


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("template") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return str(path)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    with migrated_template("medrev_tpl") as name:
        yield name


def _sqlite_engine(template: str, tmp_path) -> Engine:
    path = tmp_path / "review.db"
    shutil.copyfile(template, path)
    return make_engine(f"sqlite:///{path}")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request, tmp_path) -> Iterator[Engine]:
    """A fresh, migrated review database on each backend."""
    if request.param == "sqlite":
        engine = _sqlite_engine(request.getfixturevalue("sqlite_template"), tmp_path)
        yield engine
        engine.dispose()
        return
    with scratch_database("medrev_t", template=request.getfixturevalue("pg_template")) as name:
        engine = make_engine(_pg_url(name))
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture
def sqlite_engine(sqlite_template, tmp_path) -> Iterator[Engine]:
    """A fresh, migrated SQLite database only (for tests about SQLite itself)."""
    engine = _sqlite_engine(sqlite_template, tmp_path)
    yield engine
    engine.dispose()


from tests.bench_core.conftest import fake_openai  # noqa: E402,F401  (the loopback model server, for run imports)
