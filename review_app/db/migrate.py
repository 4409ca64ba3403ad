"""Apply Alembic migrations programmatically, once, under a lock; seed rubric levels.

The Alembic scripts live in ``review_app/db/migrations``; no alembic.ini is needed, so
``medrev db upgrade`` and the automatic upgrade on first use work from an installed package.
A database that is already current is only read (``needs_upgrade``), so a read-only file and a
busy panel never wait for the write lock at start-up. A database medrev cannot own (tables of
another application, a schema revision this version does not know) is refused in one sentence.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

from review_app.db.engine import is_sqlite, writer
from review_app.db.errors import URL_SETTING, DatabaseUnavailable, safe_url
from review_app.rubrics import all_rubrics

MIGRATIONS = Path(__file__).with_name("migrations")
_ADVISORY_LOCK_KEY = 74_201_113  # arbitrary, constant: "medrev migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def known_revisions() -> set[str]:
    return {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def check_schema(connection: Connection) -> str | None:
    """The current revision, after refusing a schema medrev did not make or does not know."""
    current = MigrationContext.configure(connection).get_current_revision()
    shown = safe_url(connection.engine.url)
    if current is None:
        tables = sorted(set(inspect(connection).get_table_names()) - {"alembic_version"})
        if tables:
            listed = ", ".join(tables[:4]) + (", ..." if len(tables) > 4 else "")
            raise DatabaseUnavailable(
                f"The database {shown} already holds tables that no medrev migration made ({listed}): point "
                f"{URL_SETTING} at an empty database or a new SQLite file.",
                shown,
            )
    elif current not in known_revisions():
        raise DatabaseUnavailable(
            f"The database {shown} is at schema revision {current}, which this version of medrev does not know "
            f"(a newer medrev or another application made it): upgrade medrev, or point {URL_SETTING} at "
            "another database.",
            shown,
        )
    return current


def needs_upgrade(engine: Engine) -> bool:
    """Whether ``upgrade`` has anything to do; only reads (and refuses a foreign schema)."""
    with engine.connect() as connection:
        if check_schema(connection) != head_revision():
            return True
        return bool(_missing_rubric_levels(connection))


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Bring the database to ``revision`` and make sure every rubric level exists.

    Runs in one write transaction: on SQLite the IMMEDIATE lock, on PostgreSQL a transaction
    advisory lock, so concurrent first uses migrate exactly once. Returns the new revision.
    """
    config = alembic_config()
    with writer(engine).begin() as connection:
        if not is_sqlite(engine):
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})
        before = check_schema(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        sync_rubric_levels(connection)
        after = MigrationContext.configure(connection).get_current_revision()
    if before is not None and after != before:
        # A migration can rewrite a whole table (0007 counted every task's submissions into it):
        # fresh statistics, and on a server without autovacuum the dead row versions removed.
        from review_app.db.statistics import refresh_statistics

        refresh_statistics(engine, _tables(engine))
    return after


def _tables(engine: Engine) -> list[str]:
    """medrev's tables that exist in the database (all of them once migrated)."""
    from review_app.db.models import SQLModel

    present = set(inspect(engine).get_table_names())
    return [name for name in SQLModel.metadata.tables if name in present]


def sync_rubric_levels(connection) -> None:
    """Insert any (rubric, dimension, value) of ``review_app.rubrics`` missing from ``rubric_level``.

    Levels are only added, never removed: annotations already stored keep their foreign keys.
    """
    missing = _missing_rubric_levels(connection)
    if missing:
        connection.execute(
            text(
                "INSERT INTO rubric_level (rubric, dimension, value, label) "
                "VALUES (:rubric, :dimension, :value, :label)"
            ),
            missing,
        )


def _missing_rubric_levels(connection) -> list[dict]:
    existing = {tuple(row) for row in connection.execute(text("SELECT rubric, dimension, value FROM rubric_level"))}
    return [
        {"rubric": rubric.key, "dimension": dimension.key, "value": level.value, "label": level.label}
        for rubric in all_rubrics()
        for dimension in rubric.dimensions
        for level in dimension.levels
        if (rubric.key, dimension.key, level.value) not in existing
    ]
