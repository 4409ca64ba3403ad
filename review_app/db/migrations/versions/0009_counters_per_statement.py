"""PostgreSQL: progress counters kept per statement, not per row (bulk writes were quadratic)

Migration 0007's row-level triggers update a counter row (``progress_cell``, ``assignment_tally``,
``study_tally``) once per written row. PostgreSQL's MVCC makes every update of a row a new version
of it, and within one transaction a later update of the same row must step over the versions the
earlier ones left: N updates of one counter row in one transaction cost O(N^2). Measured here:
inserting 5,000 / 10,000 / 20,000 / 40,000 rows in one transaction through such a trigger took
0.5 / 2.4 / 7.7 / 33 s, so drawing a pool of 1,000,000 tasks would have taken hours.

On PostgreSQL the counters are now kept by statement-level triggers with transition tables: each
INSERT, UPDATE or DELETE statement adds its rows' contributions to each counter row once, grouped
(an ORM flush writes up to 1,000 rows a statement; set-based updates any number). The arithmetic is
0007's: a row's old contribution is subtracted and its new one added; an update subtracts and adds
only the rows whose counted columns changed. Services that change many rows do it in set-based
statements (``assignment.assign`` sets target raters by id lists), so no bulk path updates a counter
row once per row. SQLite keeps 0007's row triggers: it updates a row in place, so they stay linear.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 19:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A set of task rows' contributions to their cells, grouped: (tasks, complete, planned pairs,
# complete pairs, unstarted pairs), as 0007's _CELL counts one task.
_CELL_SUMS = (
    "SELECT r.study_id, r.rubric, item.subset, count(*) AS tasks, "
    "sum(CASE WHEN r.submitted_count >= r.target_raters THEN 1 ELSE 0 END) AS complete, "
    "sum(CASE WHEN r.target_raters >= 2 THEN 1 ELSE 0 END) AS planned_pairs, "
    "sum(CASE WHEN r.target_raters >= 2 AND r.submitted_count >= r.target_raters THEN 1 ELSE 0 END) "
    "AS complete_pairs, "
    "sum(CASE WHEN r.target_raters >= 2 AND r.submitted_count = 0 THEN 1 ELSE 0 END) AS unstarted_pairs "
    "FROM {rows} JOIN item ON item.id = r.item_id {where} GROUP BY r.study_id, r.rubric, item.subset"
)
_ADD_CELLS = (
    "INSERT INTO progress_cell (study_id, rubric, subset, tasks, complete, planned_pairs, complete_pairs, "
    "unstarted_pairs) " + _CELL_SUMS + " ON CONFLICT (study_id, rubric, subset) DO UPDATE SET "
    "tasks = progress_cell.tasks + excluded.tasks, complete = progress_cell.complete + excluded.complete, "
    "planned_pairs = progress_cell.planned_pairs + excluded.planned_pairs, "
    "complete_pairs = progress_cell.complete_pairs + excluded.complete_pairs, "
    "unstarted_pairs = progress_cell.unstarted_pairs + excluded.unstarted_pairs"
)
_SUBTRACT_CELLS = (
    "UPDATE progress_cell c SET tasks = c.tasks - d.tasks, complete = c.complete - d.complete, "
    "planned_pairs = c.planned_pairs - d.planned_pairs, complete_pairs = c.complete_pairs - d.complete_pairs, "
    "unstarted_pairs = c.unstarted_pairs - d.unstarted_pairs FROM (" + _CELL_SUMS + ") d "
    "WHERE c.study_id = d.study_id AND c.rubric = d.rubric AND c.subset = d.subset"
)
# The rows of an UPDATE whose counted columns changed, joined on id (a hash join of the two transition
# tables: an IN (subquery) over them was planned as nested loops, cubic in the statement's rows).
_TASK_COLUMNS = ("submitted_count", "target_raters", "study_id", "rubric", "item_id")
_ASSIGNMENT_COLUMNS = ("status", "flagged", "reviewer_id", "study_id", "task_id")


def _changed(table: str, other: str, columns: tuple[str, ...]) -> tuple[str, str]:
    """(FROM rows, WHERE) for the rows ``r`` of transition table ``table`` that differ from ``other``'s."""
    mine = ", ".join(f"r.{c}" for c in columns)
    theirs = ", ".join(f"x.{c}" for c in columns)
    return f"{table} r JOIN {other} x ON x.id = r.id", f"WHERE ({mine}) IS DISTINCT FROM ({theirs})"


_TALLY_SUMS = (
    "SELECT r.study_id, r.reviewer_id, r.status, count(*) AS n, sum(CASE WHEN r.flagged THEN 1 ELSE 0 END) "
    "AS flagged FROM {rows} {where} GROUP BY r.study_id, r.reviewer_id, r.status"
)
_ADD_TALLY = (
    "INSERT INTO assignment_tally (study_id, reviewer_id, status, n, flagged) " + _TALLY_SUMS + " "
    "ON CONFLICT (study_id, reviewer_id, status) DO UPDATE SET n = assignment_tally.n + excluded.n, "
    "flagged = assignment_tally.flagged + excluded.flagged"
)
_SUBTRACT_TALLY = (
    "UPDATE assignment_tally t SET n = t.n - d.n, flagged = t.flagged - d.flagged FROM (" + _TALLY_SUMS + ") d "
    "WHERE t.study_id = d.study_id AND t.reviewer_id = d.reviewer_id AND t.status = d.status"
)
_SUBMITTED = (
    "UPDATE task t SET submitted_count = t.submitted_count {step} d.n FROM (SELECT r.task_id, count(*) AS n "
    "FROM {rows} {where} GROUP BY r.task_id) d WHERE t.id = d.task_id"
)


def _and(where: str, condition: str) -> str:
    return f"{where} AND {condition}" if where else f"WHERE {condition}"


def _assignment_rows(rows: str, where: str, sign: str) -> str:
    """Statements adding (``+``) or subtracting (``-``) a set of assignment rows' contributions."""
    tally = (_ADD_TALLY if sign == "+" else _SUBTRACT_TALLY).format(rows=rows, where=where)
    submitted = _SUBMITTED.format(step=sign, rows=rows, where=_and(where, "r.status = 'submitted'"))
    return f"{tally}; {submitted};"


_OLD_TASKS = _changed("old_rows", "new_rows", _TASK_COLUMNS)
_NEW_TASKS = _changed("new_rows", "old_rows", _TASK_COLUMNS)
_TASK_FUNCTION = (
    "CREATE FUNCTION medrev_progress_task_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_OP = 'INSERT' THEN " + _ADD_CELLS.format(rows="new_rows r", where="") + "; "
    "ELSIF TG_OP = 'DELETE' THEN " + _SUBTRACT_CELLS.format(rows="old_rows r", where="") + "; "
    "ELSE "
    + _SUBTRACT_CELLS.format(rows=_OLD_TASKS[0], where=_OLD_TASKS[1])
    + "; "
    + _ADD_CELLS.format(rows=_NEW_TASKS[0], where=_NEW_TASKS[1])
    + "; END IF; RETURN NULL; END $$"
)
_OLD_ASSIGNMENTS = _changed("old_rows", "new_rows", _ASSIGNMENT_COLUMNS)
_NEW_ASSIGNMENTS = _changed("new_rows", "old_rows", _ASSIGNMENT_COLUMNS)
_ASSIGNMENT_FUNCTION = (
    "CREATE FUNCTION medrev_progress_assignment_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_OP = 'INSERT' THEN " + _assignment_rows("new_rows r", "", "+") + " "
    "ELSIF TG_OP = 'DELETE' THEN " + _assignment_rows("old_rows r", "", "-") + " "
    "ELSE "
    + _assignment_rows(*_OLD_ASSIGNMENTS, "-")
    + " "
    + _assignment_rows(*_NEW_ASSIGNMENTS, "+")
    + " END IF; RETURN NULL; END $$"
)
_ANNOTATION_FUNCTION = (
    "CREATE FUNCTION medrev_annotation_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO first_submission (annotation_id, study_id, reviewer_id, seconds_on_task, created_at) "
    "SELECT r.id, a.study_id, r.reviewer_id, r.seconds_on_task, r.created_at FROM new_rows r "
    "JOIN assignment a ON a.id = r.assignment_id WHERE r.revision = 1; "
    "INSERT INTO study_tally (study_id, annotations, last_annotation_id) "
    "SELECT a.study_id, count(*), max(r.id) FROM new_rows r JOIN assignment a ON a.id = r.assignment_id "
    "GROUP BY a.study_id ON CONFLICT (study_id) DO UPDATE SET "
    "annotations = study_tally.annotations + excluded.annotations, "
    "last_annotation_id = GREATEST(study_tally.last_annotation_id, excluded.last_annotation_id); "
    "RETURN NULL; END $$"
)


def _triggers(table: str, function: str) -> list[str]:
    return [
        f"CREATE TRIGGER {table}_rows_insert AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {table}_rows_update AFTER UPDATE ON {table} REFERENCING OLD TABLE AS old_rows "
        f"NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        f"CREATE TRIGGER {table}_rows_delete AFTER DELETE ON {table} REFERENCING OLD TABLE AS old_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
    ]


POSTGRES = (
    _TASK_FUNCTION,
    *_triggers("task", "medrev_progress_task_rows"),
    _ASSIGNMENT_FUNCTION,
    *_triggers("assignment", "medrev_progress_assignment_rows"),
    _ANNOTATION_FUNCTION,
    "CREATE TRIGGER annotation_rows_insert AFTER INSERT ON annotation REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION medrev_annotation_rows()",
)
ROW_TRIGGERS = (
    ("progress_assignment", "assignment", "medrev_progress_assignment"),
    ("progress_task", "task", "medrev_progress_task"),
    ("progress_first_submission", "annotation", "medrev_first_submission"),
    ("progress_study_tally", "annotation", "medrev_study_tally"),
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # The counters stay exact across the switch: one transaction drops the row triggers and creates
    # the statement triggers, and no row is written in between.
    for trigger, table, function in ROW_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {function}()")
    for statement in POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in ("task", "assignment"):
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_rows_{event} ON {table}")
    op.execute("DROP TRIGGER IF EXISTS annotation_rows_insert ON annotation")
    for function in ("medrev_progress_task_rows", "medrev_progress_assignment_rows", "medrev_annotation_rows"):
        op.execute(f"DROP FUNCTION IF EXISTS {function}()")
    for statement in _row_triggers_0007():
        op.execute(statement)


def _row_triggers_0007() -> tuple[str, ...]:
    """0007's row-level trigger statements for PostgreSQL (its module name starts with a digit)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name("0007_progress_counters.py")
    spec = importlib.util.spec_from_file_location("medrev_migration_0007", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.POSTGRES
