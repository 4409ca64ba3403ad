"""What the review corpora of bad input build on: the seeded review database and the files under test.

Each ``review import`` and ``review`` command case runs against a review database that already holds a
study's data (items, responses, a roster, study S1), on SQLite and on PostgreSQL (the ``database``
fixture of ``tests/bad_inputs/conftest.py``), and ``check_on`` asserts through
``tests.bad_inputs.corpus.check``: the exit code (2 for bad input, 1 for a database that cannot be used),
no traceback, the message names the file and line (and field) where there is one, the case folder
unchanged, and the row count of every table of the database unchanged.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import func, select
from sqlmodel import SQLModel

from review_app.db.engine import make_engine, read_session
from review_app.db.migrate import upgrade
from review_app.services import importing, studies
from review_app.services.actors import SYSTEM
from tests.bad_inputs.corpus import Case, Outcome, check, write
from tests.review_app.factories import item_rows, response_rows

SEEDED = item_rows(3)  # in the database before every case
FRESH = item_rows(3, start=100)  # new items for the files under test
ROSTER_HEAD = "username,display_name,role,email\n"
LONG = "x" * 300


def jsonl(*rows: dict | str) -> str:
    """JSON Lines text; a str row is written as it is (a damaged line)."""
    return "".join((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n" for row in rows)


def items_file(work: Path, content: str | bytes, name: str = "items.jsonl") -> list[str]:
    """``review import`` of an items file holding ``content``."""
    return ["review", "import", write(work / name, content), "--kind", "items"]


def table_counts(url: str) -> dict[str, int]:
    """Rows in every table of the database (the "database unchanged" check)."""
    engine = make_engine(url)
    try:
        with read_session(engine) as session:
            return {
                name: session.execute(select(func.count()).select_from(table)).scalar_one()
                for name, table in sorted(SQLModel.metadata.tables.items())
            }
    finally:
        engine.dispose()


def seed(url: str, folder: Path) -> None:
    """A database holding a study's data already: items, responses and a roster."""
    engine = make_engine(url)
    try:
        upgrade(engine)
        folder.mkdir(parents=True, exist_ok=True)
        items = folder / "seed_items.jsonl"
        items.write_text(jsonl(*SEEDED), encoding="utf-8")
        importing.import_items(engine, items, actor=SYSTEM)
        responses = folder / "seed_responses.jsonl"
        responses.write_text(jsonl(*response_rows(SEEDED)), encoding="utf-8")
        importing.import_responses(engine, responses, actor=SYSTEM)
        roster = folder / "seed_roster.csv"
        roster.write_text(ROSTER_HEAD + "oldrev1,Old Reviewer,reviewer,\n", encoding="utf-8")
        importing.import_roster(engine, roster, actor=SYSTEM)
        studies.create_study(engine, "S1", actor=SYSTEM)
    finally:
        engine.dispose()



def check_on(case: Case, url: str, tmp_path: Path) -> Outcome:
    """``corpus.check`` of ``case`` run against the database at ``url``, its row counts part of the state."""
    counts: Callable[[Path], dict[str, int]] = lambda _work: table_counts(url)  # noqa: E731
    return check(dataclasses.replace(case, env={"MEDREV_DATABASE_URL": url, **case.env}, state=counts), tmp_path)
