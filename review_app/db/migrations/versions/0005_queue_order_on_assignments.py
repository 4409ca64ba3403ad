"""next task as an index lookup: each assignment carries its task's pool rank and rubric

The reviewer's next task is the first open assignment in (status, study, pool rank, rubric) order.
Pool rank and rubric lived only on ``task``, so PostgreSQL and SQLite joined every open assignment
of the reviewer to its task and sorted them all (6,000 probes per call at 500,000 items). Copied
onto ``assignment`` (by a trigger, from the task, on every insert: a task's rank and rubric never
change), one index in queue order answers the question by reading its first entries. That index,
``ix_assignment_next`` (reviewer, status, study, pool rank, rubric, id), replaces
``ix_assignment_queue`` (reviewer, status, id), whose prefix it keeps for the queue counts.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 11:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_TRIGGER = (
    "CREATE TRIGGER assignment_queue_keys AFTER INSERT ON assignment BEGIN "
    "UPDATE assignment SET pool_rank = (SELECT pool_rank FROM task WHERE task.id = NEW.task_id), "
    "rubric = (SELECT rubric FROM task WHERE task.id = NEW.task_id) WHERE id = NEW.id; END"
)
POSTGRES_FUNCTION = (
    "CREATE FUNCTION medrev_assignment_queue_keys() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN SELECT pool_rank, rubric INTO NEW.pool_rank, NEW.rubric FROM task WHERE task.id = NEW.task_id; "
    "RETURN NEW; END $$"
)
POSTGRES_TRIGGER = (
    "CREATE TRIGGER assignment_queue_keys BEFORE INSERT ON assignment "
    "FOR EACH ROW EXECUTE FUNCTION medrev_assignment_queue_keys()"
)


def upgrade() -> None:
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pool_rank", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(
            sa.Column("rubric", sqlmodel.sql.sqltypes.AutoString(length=40), server_default="", nullable=False)
        )
    op.execute(
        "UPDATE assignment SET pool_rank = (SELECT pool_rank FROM task WHERE task.id = assignment.task_id), "
        "rubric = (SELECT rubric FROM task WHERE task.id = assignment.task_id)"
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute(SQLITE_TRIGGER)
    else:
        op.execute(POSTGRES_FUNCTION)
        op.execute(POSTGRES_TRIGGER)
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_index("ix_assignment_queue")
        batch_op.create_index(
            "ix_assignment_next", ["reviewer_id", "status", "study_id", "pool_rank", "rubric", "id"], unique=False
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ANALYZE assignment")


def downgrade() -> None:
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_index("ix_assignment_next")
        batch_op.create_index("ix_assignment_queue", ["reviewer_id", "status", "id"], unique=False)
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS assignment_queue_keys")
    else:
        op.execute("DROP TRIGGER IF EXISTS assignment_queue_keys ON assignment")
        op.execute("DROP FUNCTION IF EXISTS medrev_assignment_queue_keys()")
    with op.batch_alter_table("assignment", schema=None) as batch_op:
        batch_op.drop_column("rubric")
        batch_op.drop_column("pool_rank")
