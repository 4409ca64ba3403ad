"""task flags: a reviewer's flag on a task, its comment, and the lead's resolution

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 11:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_flag",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("reviewer_id", sa.Integer(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("reply", sa.Text(), nullable=False),
        sa.Column("resolved_by_id", sa.Integer(), nullable=True),
        sa.Column("resolved_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.CheckConstraint("kind IN ('item', 'response', 'rubric', 'other')", name="ck_task_flag_kind"),
        sa.CheckConstraint("status IN ('open', 'resolved', 'excluded', 'withdrawn')", name="ck_task_flag_status"),
        sa.ForeignKeyConstraint(["assignment_id"], ["assignment.id"]),
        sa.ForeignKeyConstraint(["resolved_by_id"], ["reviewer.id"]),
        sa.ForeignKeyConstraint(["reviewer_id"], ["reviewer.id"]),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.ForeignKeyConstraint(["task_id"], ["task.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("task_flag", schema=None) as batch_op:
        batch_op.create_index("ix_task_flag_study_status", ["study_id", "status"], unique=False)
        batch_op.create_index(batch_op.f("ix_task_flag_task_id"), ["task_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_task_flag_assignment_id"), ["assignment_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("task_flag", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_task_flag_assignment_id"))
        batch_op.drop_index(batch_op.f("ix_task_flag_task_id"))
        batch_op.drop_index("ix_task_flag_study_status")
    op.drop_table("task_flag")
