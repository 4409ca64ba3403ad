"""PostgreSQL progress counters under bulk writes: row-level triggers (0007/0008) against per-statement ones (0009).

Migration 0007 kept the progress counters with row-level triggers: every written task or assignment
updated its counter row, and PostgreSQL makes each update of a row a new version that later updates
in the same transaction step over, so N rows written in one transaction cost O(N^2). Migration 0009
keeps them with statement-level triggers (one grouped update per statement). This script builds two
scratch databases in the same run, one at revision 0008 (row triggers) and one at head, and in each
draws N tasks in one transaction (multi-row INSERTs of 1,000 rows, as an ORM flush writes them) and
then sets every task's target raters in set-based UPDATEs (as ``assignment.assign`` does); it prints
seconds per N and the ratio, and checks that both databases' counters equal a scan.

    .venv/bin/python bench/counter_triggers_speed.py [--sizes 5000,10000,20000]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.postgres_admin import create_database, drop_database, pg_url

ROWS_PER_STATEMENT = 1_000


def scratch(revision: str) -> tuple[str, str]:
    """A new database migrated to ``revision``: (SQLAlchemy URL, name)."""
    from review_app.db.engine import make_engine
    from review_app.db.migrate import upgrade

    name = create_database("medrev_counters")
    url = pg_url(name)
    engine = make_engine(url)
    upgrade(engine, revision)
    engine.dispose()
    return url, name


def draw(url: str, n: int) -> float:
    """Seconds to insert ``n`` tasks of a new study and then set their target raters, in one transaction."""
    from sqlalchemy import insert, update

    from bench_core.medmisbench import taxonomy
    from review_app.db.engine import make_engine, write_session
    from review_app.db.models import Item, Study, Task, utcnow

    engine = make_engine(url)
    now = utcnow()
    tag = uuid.uuid4().hex[:6]
    with write_session(engine) as session:
        study = Study(name=f"s{tag}", rubrics="A", created_at=now)
        session.add(study)
        session.flush()
        items = [
            {
                "subset": "MEDMISQA",
                "external_id": f"{tag}-{i}",
                "kind": "mcq",
                "language": "en",
                "question": f"question {i}",
                "options": [["A", "a"], ["B", "b"]],
                "gold_label": "A",
                "content_type": taxonomy.CONTENT_TYPES[0].id,
                "provenance": taxonomy.PROVENANCES[0].id,
                "injections": {},
                "target_label": "B",
                "payload": {},
                "content_hash": f"{tag}-{i}",
                "created_at": now,
            }
            for i in range(n)
        ]
        for start in range(0, n, ROWS_PER_STATEMENT):
            session.execute(insert(Item).values(items[start : start + ROWS_PER_STATEMENT]))
        item_ids = [i for (i,) in session.execute(Item.__table__.select().with_only_columns(Item.id)).all()][-n:]
    started = time.perf_counter()
    with write_session(engine) as session:
        tasks = [
            {
                "study_id": study.id,
                "rubric": "A",
                "item_id": item_id,
                "unit_key": f"A:i{item_id}",
                "pool_rank": rank,
                "target_raters": 1,
                "locked": False,
                "created_at": now,
            }
            for rank, item_id in enumerate(item_ids, start=1)
        ]
        for start in range(0, n, ROWS_PER_STATEMENT):
            session.execute(insert(Task).values(tasks[start : start + ROWS_PER_STATEMENT]))
        for start in range(0, n, 10_000):
            session.execute(
                update(Task)
                .where(Task.study_id == study.id, Task.pool_rank > start, Task.pool_rank <= start + 10_000)
                .values(target_raters=2)
            )
    seconds = time.perf_counter() - started
    engine.dispose()
    return seconds


def counters_match(url: str) -> bool:
    """The counters equal a scan of the tasks (what Progress would otherwise aggregate)."""
    from sqlalchemy import text

    from review_app.db.engine import make_engine, read_session

    engine = make_engine(url)
    with read_session(engine) as session:
        kept = session.execute(
            text(
                "SELECT study_id, rubric, subset, tasks, planned_pairs FROM progress_cell "
                "WHERE tasks > 0 ORDER BY 1, 2, 3"
            )
        ).all()
        scanned = session.execute(
            text(
                "SELECT task.study_id, task.rubric, item.subset, count(*), "
                "sum(CASE WHEN task.target_raters >= 2 THEN 1 ELSE 0 END) "
                "FROM task JOIN item ON item.id = task.item_id GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            )
        ).all()
    engine.dispose()
    return [tuple(r) for r in kept] == [tuple(r) for r in scanned]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,10000,20000", help="tasks per transaction, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    made = []
    try:
        row_url, row_name = scratch("0008")
        made.append(row_name)
        statement_url, statement_name = scratch("head")
        made.append(statement_name)
        print(f"{'tasks':>8} {'row triggers (0008) s':>22} {'per statement (head) s':>23} {'ratio':>7}")
        for n in sizes:
            row = draw(row_url, n)
            statement = draw(statement_url, n)
            print(f"{n:>8,} {row:>22.2f} {statement:>23.2f} {row / statement:>6.1f}x", flush=True)
        same = counters_match(row_url), counters_match(statement_url)
        print(f"counters equal a scan: row triggers {same[0]}, per statement {same[1]}")
    finally:
        for name in made:
            drop_database(name)


if __name__ == "__main__":
    main()
