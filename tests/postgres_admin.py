"""The PostgreSQL server that tests and bench scripts make their scratch databases on.

``MEDREV_TEST_POSTGRES_URL`` names another server (an admin URL to its ``postgres`` database); the
default is the local one on 127.0.0.1:5432. Every scratch database is created through the admin
URL and reached through the same server's address, so a test and a bench script never disagree on
where their data went. ``psycopg`` and the migrations are imported on first use, so a script that
only runs on SQLite does not need them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

PG_ADMIN = os.environ.get("MEDREV_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def pg_admin(sql: str) -> None:
    """Run one statement on the admin database (outside a transaction: CREATE and DROP DATABASE need that)."""
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


def pg_url(name: str) -> str:
    """The SQLAlchemy URL (psycopg 3 driver) of database ``name`` on the admin URL's server, as its user."""
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{name}"


def create_database(prefix: str, *, template: str | None = None) -> str:
    """A new, uniquely named database (a copy of ``template`` if given); returns its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    pg_admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return name


def drop_database(name: str) -> None:
    """Drop database ``name`` if it exists, ending the sessions still connected to it."""
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def scratch_database(prefix: str, *, template: str | None = None) -> Iterator[str]:
    """A new database (a copy of ``template`` if given) for the ``with`` block, dropped however it ends."""
    name = create_database(prefix, template=template)
    try:
        yield name
    finally:
        drop_database(name)


@contextmanager
def migrated_template(prefix: str) -> Iterator[str]:
    """A database migrated to the latest revision, for each test to copy: the migrations run once."""
    from review_app.db.engine import make_engine
    from review_app.db.migrate import upgrade

    with scratch_database(prefix) as name:
        engine = make_engine(pg_url(name))
        upgrade(engine)
        engine.dispose()
        yield name
