"""Lifecycle changes of datasets (issue 39.2): ``dataset_changes``, what each action did to a dataset itself.

One row per run, action, dataset and change (CREATE, ALTER, RENAME, TRUNCATE, DROP, OVERWRITE), with the
event's time and sequence, and for a RENAME the dataset under its old name (``previous_id``). Runs applied
before this revision have no rows here (their events carried no lifecycle change).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dataset_changes",
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=128), nullable=False),
        sa.Column("action_id", sa.String(length=128), nullable=False),
        sa.Column("change", sa.String(length=16), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("previous_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"]),
        sa.ForeignKeyConstraint(["previous_id"], ["datasets.id"]),
        sa.UniqueConstraint("run_id", "action_id", "dataset_id", "change", name="uq_dataset_changes"),
    )
    op.create_index("ix_dataset_changes_dataset_id", "dataset_changes", ["dataset_id"], unique=False)
    op.create_index("ix_dataset_changes_previous_id", "dataset_changes", ["previous_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_dataset_changes_previous_id", table_name="dataset_changes")
    op.drop_index("ix_dataset_changes_dataset_id", table_name="dataset_changes")
    op.drop_table("dataset_changes")
