"""PostgreSQL plans next-task and Progress as index lookups right after a bulk import.

The data go through medrev's own services (import, pool draw, assignment), which refresh the
planner's statistics once they commit; the test then reads PostgreSQL's plans of the exact
statements the services send. A big study fills the tables (tens of thousands of rows); the
reviewer and the study the queries ask about are a small part of them, as in a database that
holds many studies.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event, select, text

from review_app.db.engine import make_engine
from review_app.db.models import Assignment, Reviewer, Task, utcnow
from review_app.services import accounts, assignment, importing, progress, review_queue, studies
from review_app.services.actors import SYSTEM

from .conftest import _pg, _pg_url
from .factories import item_rows, seed_items, write_jsonl

BIG_TABLES = ("item", "task", "assignment", "annotation", "model_response")


def _statements(engine, call) -> list[tuple[str, dict]]:
    """The SELECT statements (and their parameters) ``call`` sends to the database."""
    seen: list[tuple[str, dict]] = []

    def listen(_conn, _cursor, statement, parameters, _context, _many) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", listen)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    return seen


def _plans(engine, statements) -> list[dict]:
    with engine.connect() as connection:
        return [
            connection.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).scalar()[0]["Plan"]
            for statement, parameters in statements
        ]


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _scans(plans: list[dict]) -> list[tuple[str, str, str | None]]:
    return [
        (node["Node Type"], node["Relation Name"], node.get("Index Name"))
        for plan in plans
        for node in _nodes(plan)
        if "Relation Name" in node
    ]


@pytest.fixture(scope="module")
def big_database(pg_template, tmp_path_factory):
    """PostgreSQL: 30,000 items imported, a 20,000-unit study assigned to 6 reviewers, a 300-unit study."""
    name = f"medrev_plans_{uuid.uuid4().hex[:10]}"
    _pg(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    engine = make_engine(_pg_url(name))
    tmp_path = tmp_path_factory.mktemp("plans")
    try:
        importing.import_items(engine, write_jsonl(tmp_path / "items.jsonl", item_rows(30_000)), actor=SYSTEM)
        for n in range(8):
            profile = accounts.UserProfile(username=f"rev{n}", display_name=f"Reviewer {n}", languages="en,zh")
            accounts.create_user(engine, profile, actor=SYSTEM)
        studies.create_study(engine, "big", rubrics=["A"], actor=SYSTEM)
        studies.create_study(engine, "small", rubrics=["A"], actor=SYSTEM)
        assignment.enrol(engine, "big", [f"rev{n}" for n in range(6)], actor=SYSTEM)
        assignment.enrol(engine, "small", ["rev6", "rev7"], actor=SYSTEM)
        studies.draw_pool(engine, "big", 20_000, seed=1, actor=SYSTEM)
        assignment.assign(engine, "big", raters=1, seed=1, actor=SYSTEM)
        studies.draw_pool(engine, "small", 300, seed=2, actor=SYSTEM)
        assignment.assign(engine, "small", raters=2, seed=2, actor=SYSTEM)
        yield engine
    finally:
        engine.dispose()
        _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_the_services_refresh_statistics_after_their_bulk_writes(big_database):
    with big_database.connect() as connection:
        rows = dict(
            connection.execute(
                text("SELECT relname, n_live_tup FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL")
            ).all()
        )
        estimates = dict(
            connection.execute(
                text("SELECT relname, reltuples FROM pg_class WHERE relname IN ('item', 'task', 'assignment')")
            ).all()
        )
    assert {"item", "task", "assignment"} <= set(rows), rows  # analysed by the services, not by autovacuum alone
    assert estimates["item"] == pytest.approx(30_000, rel=0.05)
    assert estimates["task"] == pytest.approx(20_300, rel=0.05)
    assert estimates["assignment"] == pytest.approx(20_600, rel=0.05)


INDEXED = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")


@pytest.mark.postgres
@pytest.mark.parametrize("username", ["rev0", "rev6"])  # 3,333 open tasks in the big study; 300 in the small one
def test_next_task_is_an_index_lookup(big_database, username):
    engine = big_database
    with engine.connect() as connection:
        reviewer = connection.execute(select(Reviewer.id).where(Reviewer.username == username)).scalar_one()
    statements = _statements(engine, lambda: review_queue.next_assignment(engine, reviewer))
    scans = _scans(_plans(engine, statements))
    assert [s for s in scans if s[1] in BIG_TABLES] and all(s[0] in INDEXED for s in scans if s[1] in BIG_TABLES), scans
    if username == "rev0":  # a long queue is read in queue order, from the start of the index
        assert ("Index Scan", "assignment", "ix_assignment_next") in scans, scans
    with engine.connect() as connection:
        expected = connection.execute(
            select(Assignment.id)
            .join(Task, Task.id == Assignment.task_id)
            .where(Assignment.reviewer_id == reviewer)
            .order_by(Task.study_id, Task.pool_rank, Assignment.id)
            .limit(1)
        ).scalar_one()
    assert review_queue.next_assignment(engine, reviewer) == expected


@pytest.mark.postgres
def test_progress_of_a_study_reads_indexes(big_database):
    engine = big_database
    statements = _statements(engine, lambda: progress.study_progress(engine, "small"))
    scans = _scans(_plans(engine, statements))
    # Counters kept by triggers (migration 0007): no task, assignment or annotation is read at all.
    assert not [s for s in scans if s[1] in BIG_TABLES], scans
    assert {"progress_cell", "assignment_tally", "first_submission"} <= {s[1] for s in scans}, scans
    report = progress.study_progress(engine, "small")
    assert report.tasks == 300 and report.assignments == {"assigned": 600}


def test_assignments_carry_their_tasks_pool_rank_and_rubric(engine, tmp_path):
    """A trigger copies them from the task on insert, whatever the inserting code passed."""
    seed_items(engine, tmp_path, 40)
    profile = accounts.UserProfile(username="rev", display_name="Reviewer", languages="en,zh")
    accounts.create_user(engine, profile, actor=SYSTEM)
    studies.create_study(engine, "s", rubrics=["A"], actor=SYSTEM)
    assignment.enrol(engine, "s", ["rev"], actor=SYSTEM)
    studies.draw_pool(engine, "s", 30, seed=1, actor=SYSTEM)
    assignment.assign(engine, "s", raters=1, seed=1, actor=SYSTEM)
    with engine.begin() as connection:
        task, study = connection.execute(select(Task.id, Task.study_id).order_by(Task.pool_rank.desc())).first()
        reviewer = connection.execute(select(Reviewer.id).where(Reviewer.username == "rev")).scalar_one()
        connection.execute(text("DELETE FROM assignment WHERE task_id = :t"), {"t": task})
        row = {"task_id": task, "reviewer_id": reviewer, "study_id": study, "slot": 1, "assigned_at": utcnow()}
        connection.execute(Assignment.__table__.insert(), row | {"pool_rank": -5, "rubric": "Z"})
        mismatched = connection.execute(
            text(
                "SELECT count(*) FROM assignment a JOIN task t ON t.id = a.task_id "
                "WHERE a.pool_rank <> t.pool_rank OR a.rubric <> t.rubric"
            )
        ).scalar()
        total = connection.execute(text("SELECT count(*) FROM assignment")).scalar()
    assert total == 30 and mismatched == 0
