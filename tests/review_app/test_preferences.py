"""The study a lead's pages open on, remembered per account (migration 0010), on both databases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import Engine, inspect, text

from review_app.db.engine import make_engine
from review_app.db.migrate import alembic_config, current_revision, upgrade
from review_app.services import accounts, preferences, studies
from review_app.services.actors import SYSTEM, Actor
from review_app.services.errors import NotFound, PermissionDenied, SessionEnded

from .conftest import _pg, _pg_url
from .factories import add_users


def _leads(engine: Engine) -> tuple:
    lead, other = add_users(engine, 2, prefix="lead", role="lead")
    admin = add_users(engine, 1, prefix="admin", role="admin")[0]
    reviewer = add_users(engine, 1)[0]
    for name in ("first", "second"):
        studies.create_study(engine, name, rubrics=["A"], actor=Actor(lead.id))
    return lead, other, admin, reviewer


def _stored(engine: Engine) -> list[tuple]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT reviewer_id, last_study_id FROM reviewer_preference"))
        return [tuple(row) for row in rows]


def test_a_lead_remembers_a_study_and_reads_it_back(engine):
    lead, other, *_ = _leads(engine)
    assert preferences.last_study(engine, Actor(lead.id)) is None
    assert preferences.remember_study(engine, "lead00", "second", actor=Actor(lead.id)) is True
    assert preferences.last_study(engine, Actor(lead.id)) == "second"
    assert preferences.last_study(engine, Actor(other.id)) is None  # another account's choice is its own
    assert preferences.remember_study(engine, "lead00", "second", actor=Actor(lead.id)) is False  # no write
    before = _stored(engine)
    assert preferences.remember_study(engine, "LEAD00", "first", actor=Actor(lead.id)) is True
    assert preferences.last_study(engine, Actor(lead.id)) == "first"
    assert len(before) == len(_stored(engine)) == 1  # one row per account, updated in place
    assert preferences.last_study(engine, SYSTEM) is None


def test_only_the_account_itself_sets_its_study(engine):
    lead, other, admin, reviewer = _leads(engine)
    for actor in (Actor(other.id), Actor(admin.id)):
        with pytest.raises(PermissionDenied, match="only yours"):
            preferences.remember_study(engine, "lead00", "first", actor=actor)
    with pytest.raises(PermissionDenied):
        preferences.remember_study(engine, "rev00", "first", actor=Actor(reviewer.id))  # not a lead page user
    with pytest.raises(SessionEnded):
        preferences.remember_study(engine, "lead00", "first", actor=Actor(lead.id, session_version=99))
    with pytest.raises(NotFound):
        preferences.remember_study(engine, "lead00", "no such study", actor=Actor(lead.id))
    with pytest.raises(NotFound):
        preferences.remember_study(engine, "nobody", "first", actor=SYSTEM)
    assert _stored(engine) == []
    accounts.set_active(engine, "lead00", False, actor=SYSTEM)
    with pytest.raises(SessionEnded):
        preferences.remember_study(engine, "lead00", "first", actor=Actor(lead.id))
    assert preferences.remember_study(engine, "lead00", "first", actor=SYSTEM) is True  # the operator at the shell
    assert _stored(engine) == [(lead.id, studies.get_study(engine, "first").id)]


def test_a_deleted_study_clears_the_choice(engine):
    lead = add_users(engine, 1, prefix="lead", role="lead")[0]
    with engine.begin() as connection:  # a study with nothing hanging on it (no audit event refuses the delete)
        connection.execute(
            text(
                "INSERT INTO study (name, description, rubrics, status, settings, created_at) "
                "VALUES ('gone', '', 'A', 'active', '{}', CURRENT_TIMESTAMP)"
            )
        )
    preferences.remember_study(engine, "lead00", "gone", actor=SYSTEM)
    assert preferences.last_study(engine, Actor(lead.id)) == "gone"
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM study WHERE name = 'gone'"))
    assert preferences.last_study(engine, Actor(lead.id)) is None
    assert _stored(engine) == [(lead.id, None)]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_engine(request, tmp_path) -> Iterator[Engine]:
    """An empty database (no migration run yet) on each backend."""
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
        yield engine
        engine.dispose()
        return
    name = f"medrev_m_{uuid.uuid4().hex[:12]}"
    _pg(f'CREATE DATABASE "{name}"')
    engine = make_engine(_pg_url(name))
    try:
        yield engine
    finally:
        engine.dispose()
        _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _downgrade(engine: Engine, revision: str) -> None:
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def test_migration_0010_adds_the_table_to_a_database_with_accounts_and_studies(empty_engine):
    engine = empty_engine
    assert upgrade(engine, "0009") == "0009"
    assert "reviewer_preference" not in inspect(engine).get_table_names()
    lead = add_users(engine, 1, prefix="lead", role="lead")[0]
    studies.create_study(engine, "kept", rubrics=["A"], actor=Actor(lead.id))

    assert upgrade(engine, "0010") == "0010"
    assert preferences.last_study(engine, Actor(lead.id)) is None  # nobody has chosen yet: the newest study
    preferences.remember_study(engine, "lead00", "kept", actor=Actor(lead.id))
    assert preferences.last_study(engine, Actor(lead.id)) == "kept"
    foreign_keys = {fk["referred_table"]: fk for fk in inspect(engine).get_foreign_keys("reviewer_preference")}
    assert foreign_keys["study"]["options"].get("ondelete") == "SET NULL"
    assert foreign_keys["reviewer"]["constrained_columns"] == ["reviewer_id"]

    _downgrade(engine, "0009")
    assert current_revision(engine) == "0009"
    assert "reviewer_preference" not in inspect(engine).get_table_names()
    assert upgrade(engine, "0010") == "0010"
    assert preferences.last_study(engine, Actor(lead.id)) is None
