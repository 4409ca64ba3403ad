"""Progress as counters: per-cell task counts and per-reviewer assignment counts kept by triggers

The Progress page aggregated every task and assignment of the study on each load: at 500,000 items
(1,000,000 tasks, 1,250,000 assignments) the three GROUP BYs took 20-50 s on SQLite and scaled with
the study, not with what changed. The database now keeps the answers as it is written:

* ``task.submitted_count``: the task's assignments in status ``submitted``;
* ``progress_cell`` (study, rubric, subset): tasks, complete tasks (``submitted_count >=
  target_raters``), dual-rated tasks planned, complete and not started;
* ``assignment_tally`` (study, reviewer, status): assignments and flagged assignments;
* ``first_submission``: each assignment's first submitted annotation (revision 1) with its study,
  reviewer, time on task and time, indexed by (study, reviewer, time on task) and (study, reviewer,
  time): throughput and the median time on task read one narrow index, not every annotation joined
  to its assignment (4-9 s at 200,000 annotations). Annotations are append-only, so it only grows;
* ``study_tally`` (study): its annotations and the highest annotation id, so the lead pages' cache
  key (:func:`review_app.services.study_cache.data_version`) is read from counters, not by joining
  every annotation to its assignment on each rerun.

Also ``ix_task_pool_order`` (study, pool rank, id): the first unrated tasks in pool order (the
Reviewers' quality page offers them as gold) are read from the front of an index, not sorted out of
every task; and ``ix_task_locked``, a partial index of the (few) locked tasks, which the adjudication
queue reads on every rerun (it scanned the rubric's 500,000 tasks).

Triggers on ``assignment`` and ``task`` subtract a row's old contribution and add its new one on
every insert, update of a counted column and delete, whatever service (or SQL) wrote it, inside the
writer's transaction, so the counters are exactly the scan's answer at every commit. An item's
subset never changes (items are identified by subset and external id), so it is read from the item
when a task's contribution is counted. Existing rows are counted once here.

A later migration that makes SQLite rebuild ``assignment``, ``task`` or ``annotation`` (Alembic's
batch mode copies the table) drops their triggers with the old table: it must create them again
(``SQLITE`` below) and recount, or the counters stop following the writes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 15:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One task's contribution to its cell: (tasks, complete, planned pairs, complete pairs, unstarted pairs).
_CELL = (
    "1, CASE WHEN {r}.submitted_count >= {r}.target_raters THEN 1 ELSE 0 END, "
    "CASE WHEN {r}.target_raters >= 2 THEN 1 ELSE 0 END, "
    "CASE WHEN {r}.target_raters >= 2 AND {r}.submitted_count >= {r}.target_raters THEN 1 ELSE 0 END, "
    "CASE WHEN {r}.target_raters >= 2 AND {r}.submitted_count = 0 THEN 1 ELSE 0 END"
)
_CELL_COLUMNS = "study_id, rubric, subset, tasks, complete, planned_pairs, complete_pairs, unstarted_pairs"
_CELL_UPSERT = (
    "ON CONFLICT (study_id, rubric, subset) DO UPDATE SET tasks = progress_cell.tasks + excluded.tasks, "
    "complete = progress_cell.complete + excluded.complete, "
    "planned_pairs = progress_cell.planned_pairs + excluded.planned_pairs, "
    "complete_pairs = progress_cell.complete_pairs + excluded.complete_pairs, "
    "unstarted_pairs = progress_cell.unstarted_pairs + excluded.unstarted_pairs"
)


def _add_cell(row: str) -> str:
    return (
        f"INSERT INTO progress_cell ({_CELL_COLUMNS}) SELECT {row}.study_id, {row}.rubric, item.subset, "
        f"{_CELL.format(r=row)} FROM item WHERE item.id = {row}.item_id {_CELL_UPSERT}"
    )


def _subtract_cell(row: str) -> str:
    parts = _CELL.format(r=row).split(", ")
    return (
        f"UPDATE progress_cell SET tasks = tasks - 1, complete = complete - ({parts[1]}), "
        f"planned_pairs = planned_pairs - ({parts[2]}), complete_pairs = complete_pairs - ({parts[3]}), "
        f"unstarted_pairs = unstarted_pairs - ({parts[4]}) WHERE study_id = {row}.study_id AND rubric = {row}.rubric "
        f"AND subset = (SELECT subset FROM item WHERE item.id = {row}.item_id)"
    )


def _add_tally(row: str, flagged: str) -> str:
    return (
        "INSERT INTO assignment_tally (study_id, reviewer_id, status, n, flagged) "
        f"SELECT {row}.study_id, {row}.reviewer_id, {row}.status, 1, {flagged} WHERE 1 = 1 "
        "ON CONFLICT (study_id, reviewer_id, status) DO UPDATE SET n = assignment_tally.n + 1, "
        "flagged = assignment_tally.flagged + excluded.flagged"
    )


def _subtract_tally(row: str, flagged: str) -> str:
    return (
        f"UPDATE assignment_tally SET n = n - 1, flagged = flagged - {flagged} "
        f"WHERE study_id = {row}.study_id AND reviewer_id = {row}.reviewer_id AND status = {row}.status"
    )


def _count_submitted(row: str, step: str) -> str:
    return (
        f"UPDATE task SET submitted_count = submitted_count {step} 1 WHERE id = {row}.task_id "
        f"AND {row}.status = 'submitted'"
    )


_FIRST_SUBMISSION = (
    "INSERT INTO first_submission (annotation_id, study_id, reviewer_id, seconds_on_task, created_at) "
    "SELECT NEW.id, assignment.study_id, NEW.reviewer_id, NEW.seconds_on_task, NEW.created_at FROM assignment "
    "WHERE assignment.id = NEW.assignment_id"
)
_STUDY_TALLY = (
    "INSERT INTO study_tally (study_id, annotations, last_annotation_id) "
    "SELECT assignment.study_id, 1, NEW.id FROM assignment WHERE assignment.id = NEW.assignment_id "
    "ON CONFLICT (study_id) DO UPDATE SET annotations = study_tally.annotations + 1, "
    "last_annotation_id = {greatest}(study_tally.last_annotation_id, excluded.last_annotation_id)"
)
_ASSIGNMENT_COLUMNS = "status, flagged, reviewer_id, study_id, task_id"
_TASK_COLUMNS = "submitted_count, target_raters, study_id, rubric, item_id"

SQLITE = (
    f"CREATE TRIGGER progress_assignment_insert AFTER INSERT ON assignment BEGIN "
    f"{_add_tally('NEW', 'NEW.flagged')}; {_count_submitted('NEW', '+')}; END",
    f"CREATE TRIGGER progress_assignment_delete AFTER DELETE ON assignment BEGIN "
    f"{_subtract_tally('OLD', 'OLD.flagged')}; {_count_submitted('OLD', '-')}; END",
    f"CREATE TRIGGER progress_assignment_update AFTER UPDATE OF {_ASSIGNMENT_COLUMNS} ON assignment BEGIN "
    f"{_subtract_tally('OLD', 'OLD.flagged')}; {_count_submitted('OLD', '-')}; "
    f"{_add_tally('NEW', 'NEW.flagged')}; {_count_submitted('NEW', '+')}; END",
    f"CREATE TRIGGER progress_task_insert AFTER INSERT ON task BEGIN {_add_cell('NEW')}; END",
    f"CREATE TRIGGER progress_task_delete AFTER DELETE ON task BEGIN {_subtract_cell('OLD')}; END",
    f"CREATE TRIGGER progress_task_update AFTER UPDATE OF {_TASK_COLUMNS} ON task BEGIN "
    f"{_subtract_cell('OLD')}; {_add_cell('NEW')}; END",
    f"CREATE TRIGGER progress_first_submission AFTER INSERT ON annotation WHEN NEW.revision = 1 BEGIN "
    f"{_FIRST_SUBMISSION}; END",
    f"CREATE TRIGGER progress_study_tally AFTER INSERT ON annotation BEGIN {_STUDY_TALLY.format(greatest='max')}; END",
)
SQLITE_DROP = (
    "progress_study_tally",
    "progress_first_submission",
    "progress_assignment_insert",
    "progress_assignment_delete",
    "progress_assignment_update",
    "progress_task_insert",
    "progress_task_delete",
    "progress_task_update",
)

POSTGRES = (
    "CREATE FUNCTION medrev_progress_assignment() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_OP <> 'INSERT' THEN "
    f"{_subtract_tally('OLD', 'OLD.flagged::int')}; {_count_submitted('OLD', '-')}; END IF; "
    "IF TG_OP <> 'DELETE' THEN "
    f"{_add_tally('NEW', 'NEW.flagged::int')}; {_count_submitted('NEW', '+')}; END IF; "
    "RETURN NULL; END $$",
    f"CREATE TRIGGER progress_assignment AFTER INSERT OR DELETE OR UPDATE OF {_ASSIGNMENT_COLUMNS} ON assignment "
    "FOR EACH ROW EXECUTE FUNCTION medrev_progress_assignment()",
    "CREATE FUNCTION medrev_progress_task() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"IF TG_OP <> 'INSERT' THEN {_subtract_cell('OLD')}; END IF; "
    f"IF TG_OP <> 'DELETE' THEN {_add_cell('NEW')}; END IF; "
    "RETURN NULL; END $$",
    f"CREATE TRIGGER progress_task AFTER INSERT OR DELETE OR UPDATE OF {_TASK_COLUMNS} ON task "
    "FOR EACH ROW EXECUTE FUNCTION medrev_progress_task()",
    "CREATE FUNCTION medrev_first_submission() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"{_FIRST_SUBMISSION}; RETURN NULL; END $$",
    "CREATE TRIGGER progress_first_submission AFTER INSERT ON annotation FOR EACH ROW "
    "WHEN (NEW.revision = 1) EXECUTE FUNCTION medrev_first_submission()",
    "CREATE FUNCTION medrev_study_tally() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"{_STUDY_TALLY.format(greatest='GREATEST')}; RETURN NULL; END $$",
    "CREATE TRIGGER progress_study_tally AFTER INSERT ON annotation FOR EACH ROW "
    "EXECUTE FUNCTION medrev_study_tally()",
)

BACKFILL = (
    "UPDATE task SET submitted_count = (SELECT count(*) FROM assignment "
    "WHERE assignment.task_id = task.id AND assignment.status = 'submitted')",
    f"INSERT INTO progress_cell ({_CELL_COLUMNS}) SELECT task.study_id, task.rubric, item.subset, count(*), "
    "sum(CASE WHEN task.submitted_count >= task.target_raters THEN 1 ELSE 0 END), "
    "sum(CASE WHEN task.target_raters >= 2 THEN 1 ELSE 0 END), "
    "sum(CASE WHEN task.target_raters >= 2 AND task.submitted_count >= task.target_raters THEN 1 ELSE 0 END), "
    "sum(CASE WHEN task.target_raters >= 2 AND task.submitted_count = 0 THEN 1 ELSE 0 END) "
    "FROM task JOIN item ON item.id = task.item_id GROUP BY task.study_id, task.rubric, item.subset",
    "INSERT INTO assignment_tally (study_id, reviewer_id, status, n, flagged) "
    "SELECT study_id, reviewer_id, status, count(*), sum(CASE WHEN flagged THEN 1 ELSE 0 END) "
    "FROM assignment GROUP BY study_id, reviewer_id, status",
    "INSERT INTO first_submission (annotation_id, study_id, reviewer_id, seconds_on_task, created_at) "
    "SELECT annotation.id, assignment.study_id, annotation.reviewer_id, annotation.seconds_on_task, "
    "annotation.created_at FROM annotation JOIN assignment ON assignment.id = annotation.assignment_id "
    "WHERE annotation.revision = 1",
    "INSERT INTO study_tally (study_id, annotations, last_annotation_id) "
    "SELECT assignment.study_id, count(*), max(annotation.id) FROM annotation "
    "JOIN assignment ON assignment.id = annotation.assignment_id GROUP BY assignment.study_id",
)


def upgrade() -> None:
    with op.batch_alter_table("task", schema=None) as batch_op:
        batch_op.add_column(sa.Column("submitted_count", sa.Integer(), server_default="0", nullable=False))
    op.create_table(
        "progress_cell",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("rubric", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("subset", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("tasks", sa.Integer(), nullable=False),
        sa.Column("complete", sa.Integer(), nullable=False),
        sa.Column("planned_pairs", sa.Integer(), nullable=False),
        sa.Column("complete_pairs", sa.Integer(), nullable=False),
        sa.Column("unstarted_pairs", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.PrimaryKeyConstraint("study_id", "rubric", "subset"),
    )
    op.create_table(
        "assignment_tally",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("flagged", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["reviewer_id"], ["reviewer.id"]),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.PrimaryKeyConstraint("study_id", "reviewer_id", "status"),
    )
    op.create_table(
        "first_submission",
        sa.Column("annotation_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=False),
        sa.Column("seconds_on_task", sa.Float(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["annotation_id"], ["annotation.id"]),
        sa.ForeignKeyConstraint(["reviewer_id"], ["reviewer.id"]),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.PrimaryKeyConstraint("annotation_id"),
    )
    with op.batch_alter_table("first_submission", schema=None) as batch_op:
        batch_op.create_index(
            "ix_first_submission_seconds", ["study_id", "reviewer_id", "seconds_on_task"], unique=False
        )
        batch_op.create_index("ix_first_submission_time", ["study_id", "reviewer_id", "created_at"], unique=False)
    op.create_table(
        "study_tally",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("annotations", sa.Integer(), nullable=False),
        sa.Column("last_annotation_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.PrimaryKeyConstraint("study_id"),
    )
    with op.batch_alter_table("task", schema=None) as batch_op:
        batch_op.create_index("ix_task_pool_order", ["study_id", "pool_rank", "id"], unique=False)
        batch_op.create_index(
            "ix_task_locked",
            ["study_id", "rubric"],
            unique=False,
            sqlite_where=sa.text("locked = 1"),
            postgresql_where=sa.text("locked"),
        )
    for statement in BACKFILL:
        op.execute(statement)
    for statement in SQLITE if op.get_bind().dialect.name == "sqlite" else POSTGRES:
        op.execute(statement)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ANALYZE task")
        op.execute("ANALYZE first_submission")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in SQLITE_DROP:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    else:
        op.execute("DROP TRIGGER IF EXISTS progress_assignment ON assignment")
        op.execute("DROP TRIGGER IF EXISTS progress_task ON task")
        op.execute("DROP FUNCTION IF EXISTS medrev_progress_assignment()")
        op.execute("DROP FUNCTION IF EXISTS medrev_progress_task()")
        op.execute("DROP TRIGGER IF EXISTS progress_first_submission ON annotation")
        op.execute("DROP FUNCTION IF EXISTS medrev_first_submission()")
        op.execute("DROP TRIGGER IF EXISTS progress_study_tally ON annotation")
        op.execute("DROP FUNCTION IF EXISTS medrev_study_tally()")
    op.drop_table("study_tally")
    op.drop_table("first_submission")
    with op.batch_alter_table("task", schema=None) as batch_op:
        batch_op.drop_index("ix_task_locked")
        batch_op.drop_index("ix_task_pool_order")
    op.drop_table("assignment_tally")
    op.drop_table("progress_cell")
    with op.batch_alter_table("task", schema=None) as batch_op:
        batch_op.drop_column("submitted_count")
