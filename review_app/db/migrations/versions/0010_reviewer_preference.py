"""reviewer preferences: the study each lead chose last, so a new session opens on it

The lead pages' study selector kept its choice in the browser session only: every new session
opened on the newest study, whichever the lead had been working on. One row per account now holds
the study chosen last (written only when the choice changes). A table of its own rather than a
column on ``reviewer``: a foreign-key column there would rebuild ``reviewer`` on SQLite, which every
other table references. A deleted study clears the choice (ON DELETE SET NULL).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reviewer_preference",
        sa.Column("reviewer_id", sa.Integer(), nullable=False),
        sa.Column("last_study_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["last_study_id"], ["study.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["reviewer_id"], ["reviewer.id"]),
        sa.PrimaryKeyConstraint("reviewer_id"),
    )


def downgrade() -> None:
    op.drop_table("reviewer_preference")
