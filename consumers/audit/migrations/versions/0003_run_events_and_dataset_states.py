"""The web UI's tables: each run's events, each dataset's schema and version as a run saw it.

``run_events`` lets a run be shown action by action (name, SQL, duration, column lineage,
lineage_complete) with its raw JSON, without the archive; ``dataset_states`` is a dataset's schema
history and the Delta/Iceberg versions runs read or wrote. ``ix_runs_job_created`` serves a job's
runs newest first. Runs applied before this revision have no rows here: their events are not read
again (replay them into ``consume registry`` to fill them).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_events",
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("event_id"),
    )
    op.create_index("ix_run_events_run_id", "run_events", ["run_id"], unique=False)
    op.create_table(
        "dataset_states",
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=128), nullable=False),
        sa.Column("direction", sa.String(length=3), nullable=False),
        sa.Column("fields_json", sa.Text(), nullable=True),
        sa.Column("version", sa.String(length=128), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"]),
        sa.UniqueConstraint("run_id", "dataset_id", "direction", name="uq_dataset_states"),
    )
    op.create_index("ix_dataset_states_dataset_id", "dataset_states", ["dataset_id"], unique=False)
    op.create_index("ix_runs_job_created", "runs", ["job_id", "created_at", "run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_runs_job_created", table_name="runs")
    op.drop_index("ix_dataset_states_dataset_id", table_name="dataset_states")
    op.drop_table("dataset_states")
    op.drop_index("ix_run_events_run_id", table_name="run_events")
    op.drop_table("run_events")
