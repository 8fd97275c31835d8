"""Run diffs (issue 40.1): ``run_diffs``, what changed in an ended run since its job's previous successful run.

One row per run that ended after this revision: the run it was compared with (none when there was no
successful run before it), whether anything changed, and the diff as JSON, so that ``runs diff``, the REST
API and the UI's run page read one row. Runs that ended before this revision have no row; their diff is
computed when asked for.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_diffs",
        sa.Column("run_id", sa.String(length=128), nullable=False),
        sa.Column("against_run_id", sa.String(length=128), nullable=True),
        sa.Column("changed", sa.Boolean(), nullable=False),
        sa.Column("diff_json", sa.Text(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"]),
        sa.PrimaryKeyConstraint("run_id"),
    )


def downgrade() -> None:
    op.drop_table("run_diffs")
