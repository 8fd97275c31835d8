"""Runs keep their parent's job identity, and are found by parent run id.

An orchestrator's run (an Airflow task's, a refresh workflow's) is the parent of the Spark runs it
started; listing those runs by ``parent_run_id`` needs the index, and showing the parent needs its
namespace and name. Older rows keep NULL there: their events are not read again.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("parent_job_namespace", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("parent_job_name", sa.String(length=512), nullable=True))
        batch.create_index("ix_runs_parent_run_id", ["parent_run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_parent_run_id")
        batch.drop_column("parent_job_name")
        batch.drop_column("parent_job_namespace")
