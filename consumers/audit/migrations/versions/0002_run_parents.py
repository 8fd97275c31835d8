"""Runs keep their parent's and their root parent's job identity, and are found by either run id.

An orchestrator's run (an Airflow task's, a refresh workflow's) is the parent of the Spark runs it
started, and an Airflow DAG run their root (``header.root_parent_run``, contract v2); listing those
runs by either id needs the indexes, and showing them needs their namespace and name. Older rows keep
NULL there: their events are not read again.

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
        batch.add_column(sa.Column("root_parent_run_id", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("root_parent_job_namespace", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("root_parent_job_name", sa.String(length=512), nullable=True))
        batch.create_index("ix_runs_parent_run_id", ["parent_run_id"], unique=False)
        batch.create_index("ix_runs_root_parent_run_id", ["root_parent_run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_root_parent_run_id")
        batch.drop_index("ix_runs_parent_run_id")
        batch.drop_column("root_parent_job_name")
        batch.drop_column("root_parent_job_namespace")
        batch.drop_column("root_parent_run_id")
        batch.drop_column("parent_job_name")
        batch.drop_column("parent_job_namespace")
