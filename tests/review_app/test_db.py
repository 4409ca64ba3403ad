"""The schema enforces what must never be wrong, on both databases."""

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from review_app.db.migrate import current_revision, head_revision, upgrade
from review_app.rubrics import all_rubrics


def test_migrated_to_head_with_every_rubric_level(engine):
    assert current_revision(engine) == head_revision()
    with engine.connect() as connection:
        count = connection.execute(text("SELECT count(*) FROM rubric_level")).scalar()
    assert count == sum(len(d.levels) for r in all_rubrics() for d in r.dimensions)


def test_upgrade_is_idempotent(engine):
    assert upgrade(engine) == head_revision()
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1


def _annotation(connection):
    connection.execute(
        text(
            "INSERT INTO reviewer (id, username, display_name, role, profession, country, languages, active, "
            "failed_logins, created_at) VALUES (1, 'r', 'R', 'reviewer', '', '', 'en', true, 0, CURRENT_TIMESTAMP)"
        )
    )
    connection.execute(
        text(
            "INSERT INTO study (id, name, description, rubrics, status, settings, created_at) "
            "VALUES (1, 's', '', 'A', 'active', '{}', CURRENT_TIMESTAMP)"
        )
    )
    connection.execute(
        text(
            "INSERT INTO item (id, subset, external_id, kind, language, question, options, payload, content_hash, "
            "created_at) VALUES (1, 'X', 'x', 'mcq', 'en', 'q', '[]', '{}', 'h', CURRENT_TIMESTAMP)"
        )
    )
    connection.execute(
        text(
            "INSERT INTO task (id, study_id, rubric, item_id, unit_key, pool_rank, target_raters, locked, created_at) "
            "VALUES (1, 1, 'A', 1, 'A:i1', 1, 1, false, CURRENT_TIMESTAMP)"
        )
    )
    connection.execute(
        text(
            "INSERT INTO assignment (id, task_id, reviewer_id, study_id, slot, status, flagged, note, assigned_at) "
            "VALUES (1, 1, 1, 1, 1, 'assigned', false, '', CURRENT_TIMESTAMP)"
        )
    )
    connection.execute(
        text(
            "INSERT INTO annotation (id, assignment_id, task_id, reviewer_id, rubric, revision, flags, comment, "
            "seconds_on_task, client_token, created_at) "
            "VALUES (1, 1, 1, 1, 'A', 1, '[]', '', 0, 't', CURRENT_TIMESTAMP)"
        )
    )


@pytest.mark.parametrize("value", [3, 7, -1])
def test_database_refuses_an_out_of_range_score(engine, value):
    with engine.begin() as connection:
        _annotation(connection)
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO annotation_score (annotation_id, dimension, rubric, value) "
                "VALUES (1, 'base_validity', 'A', :v)"
            ),
            {"v": value},
        )
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO annotation_score (annotation_id, dimension, rubric, value) "
                "VALUES (1, 'base_validity', 'A', 2)"
            )
        )


@pytest.mark.parametrize("statement", ["UPDATE annotation SET comment = 'x'", "DELETE FROM annotation"])
def test_annotations_are_append_only(engine, statement):
    with engine.begin() as connection:
        _annotation(connection)
    with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
        connection.execute(text(statement))


def test_check_constraints_refuse_unknown_roles_and_taxonomy(engine):
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO reviewer (username, display_name, role, profession, country, languages, active, "
                "failed_logins, created_at) VALUES ('x', 'X', 'superuser', '', '', 'en', true, 0, CURRENT_TIMESTAMP)"
            )
        )
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO item (subset, external_id, kind, language, question, options, payload, content_hash, "
                "content_type, created_at) VALUES ('X', 'y', 'mcq', 'en', 'q', '[]', '{}', 'h', 'dose_inflation', "
                "CURRENT_TIMESTAMP)"
            )
        )


def test_sqlite_pragmas(sqlite_engine):
    with sqlite_engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000


def test_migrations_match_the_models(engine):
    """Alembic's autogenerate finds nothing to add: the migrations build exactly the SQLModel schema."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    import review_app.db.models  # noqa: F401

    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), SQLModel.metadata) == []


def test_pool_size_comes_from_the_environment(tmp_path, monkeypatch):
    from review_app.db.connect import open_database
    from review_app.db.engine import POOL_DEFAULTS, make_engine
    from review_app.db.errors import DatabaseUnavailable

    url = f"sqlite:///{tmp_path / 'pool.db'}"
    engine = make_engine(url)
    assert (engine.pool.size(), engine.pool._max_overflow) == POOL_DEFAULTS["sqlite"]
    engine.dispose()
    pg = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert (pg.pool.size(), pg.pool._max_overflow) == POOL_DEFAULTS["postgresql"] == (10, 20)
    monkeypatch.setenv("MEDREV_DB_POOL_SIZE", "3")
    monkeypatch.setenv("MEDREV_DB_MAX_OVERFLOW", "0")
    engine = open_database(url)
    assert (engine.pool.size(), engine.pool._max_overflow) == (3, 0)
    engine.dispose()
    monkeypatch.setenv("MEDREV_DB_POOL_SIZE", "ten")
    with pytest.raises(DatabaseUnavailable, match="MEDREV_DB_POOL_SIZE must be a whole number, got 'ten'"):
        open_database(url)
    monkeypatch.setenv("MEDREV_DB_POOL_SIZE", "0")
    with pytest.raises(DatabaseUnavailable, match="MEDREV_DB_POOL_SIZE must be at least 1"):
        open_database(url)
