"""gold tasks: expected scores of tasks used only to measure reviewer quality

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gold_task",
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("expected_scores", sa.JSON(), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("source_task_id", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.Integer(), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.CheckConstraint("source IN ('adjudication', 'consensus')", name="ck_gold_source"),
        sa.ForeignKeyConstraint(["created_by"], ["reviewer.id"]),
        sa.ForeignKeyConstraint(["source_task_id"], ["task.id"]),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.ForeignKeyConstraint(["task_id"], ["task.id"]),
        sa.PrimaryKeyConstraint("task_id"),
    )
    with op.batch_alter_table("gold_task", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gold_task_study_id"), ["study_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("gold_task", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gold_task_study_id"))
    op.drop_table("gold_task")
