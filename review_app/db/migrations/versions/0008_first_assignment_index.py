"""index of a study's assignments by reviewer and id: each reviewer's first assignment in one probe

Pseudonyms (R01, R02, ...) follow the order in which reviewers first received work in a study, the
lowest assignment id per reviewer. Grouping every assignment of the study to find it grows with
the study, on every first load of a lead page. With (study, reviewer, id) indexed, a reviewer's
first assignment in a study is the front of one index range: one probe per reviewer.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 18:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_assignment_first", "assignment", ["study_id", "reviewer_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_assignment_first", table_name="assignment")
