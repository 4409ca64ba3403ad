"""access control and sessions: study leads, session versions, server-side sessions, sign-in throttle

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 10:00:00

Existing studies get every active lead as a study lead, so an upgraded deployment keeps today's
behaviour (any lead could manage any study) until an admin narrows it down.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("reviewer", sa.Column("session_version", sa.Integer(), nullable=False, server_default="1"))
    if op.get_bind().dialect.name == "sqlite":
        # SQLite can add a column with a REFERENCES clause, but not a constraint (alembic would rebuild
        # the table, which every other table references).
        op.execute("ALTER TABLE reviewer ADD COLUMN created_by_id INTEGER REFERENCES reviewer (id)")
    else:
        op.add_column("reviewer", sa.Column("created_by_id", sa.Integer(), nullable=True))
        op.create_foreign_key(None, "reviewer", "reviewer", ["created_by_id"], ["id"])
    op.create_table(
        "study_lead",
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("study.id"), primary_key=True),
        sa.Column("reviewer_id", sa.Integer(), sa.ForeignKey("reviewer.id"), primary_key=True),
        sa.Column("added_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    )
    op.create_index("ix_study_lead_reviewer_id", "study_lead", ["reviewer_id"])
    op.create_table(
        "auth_session",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True, unique=True),
        sa.Column("nonce_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True, unique=True),
        sa.Column("nonce_expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("reviewer_id", sa.Integer(), sa.ForeignKey("reviewer.id"), nullable=False),
        sa.Column("session_version", sa.Integer(), nullable=False),
        sa.Column("via", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("client", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("revoked_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    )
    op.create_index("ix_auth_session_reviewer_id", "auth_session", ["reviewer_id"])
    op.create_table(
        "signin_throttle",
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=200), primary_key=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("window_started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("locked_until", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    )
    op.create_table(
        "app_secret",
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=60), primary_key=True),
        sa.Column("value", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("created_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    )
    op.execute(
        "INSERT INTO study_lead (study_id, reviewer_id, added_at) "
        "SELECT study.id, reviewer.id, CURRENT_TIMESTAMP FROM study CROSS JOIN reviewer "
        "WHERE reviewer.role = 'lead' AND reviewer.active"
    )


def downgrade() -> None:
    op.drop_table("app_secret")
    op.drop_table("signin_throttle")
    op.drop_index("ix_auth_session_reviewer_id", table_name="auth_session")
    op.drop_table("auth_session")
    op.drop_index("ix_study_lead_reviewer_id", table_name="study_lead")
    op.drop_table("study_lead")
    with op.batch_alter_table("reviewer") as batch:
        batch.drop_column("created_by_id")
        batch.drop_column("session_version")
