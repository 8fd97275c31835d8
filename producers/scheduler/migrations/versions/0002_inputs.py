"""What the scheduler knows of its tables' inputs, followed from ``lineage.jobs`` (issue 41).

* ``lw_input_datasets``: per dataset (namespace, name; ``key`` is ``namespace\\x1fname``, or its sha256 when
  longer than the key column) its last successful write (time, writer job and run), its last write attempt
  (time, job, run, SUCCEEDED or FAILED), the flattened schema of its last successful write and the breaking
  change that schema still carries against an earlier one (``schema_at``: the time of the event they are from);
* ``lw_input_symlinks``: the table names (``db.table``) the emitter gives a dataset in its symlinks, so a
  query's table names find the dataset;
* ``lw_input_jobs``: per job its last run's status (the Flink status), error and time, and its job type
  (a STREAMING writer is running by nature);
* ``lw_input_writes``: every successful write of a dataset (one row per action of a run), with the time the
  scheduler learnt of it, for the ``trigger: upstream`` loop;
* ``lw_input_reads``: what each refresh job's runs read (dataset, columns, complete lineage or not).

Times are BIGINT microseconds since the epoch, UTC, as in the baseline.

Revision ID: 0002_inputs
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_inputs"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lw_input_datasets",
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("last_write_at", sa.BigInteger(), nullable=True),
        sa.Column("writer_namespace", sa.String(length=200), nullable=True),
        sa.Column("writer_job", sa.String(length=400), nullable=True),
        sa.Column("writer_run", sa.String(length=200), nullable=True),
        sa.Column("attempt_at", sa.BigInteger(), nullable=True),
        sa.Column("attempt_namespace", sa.String(length=200), nullable=True),
        sa.Column("attempt_job", sa.String(length=400), nullable=True),
        sa.Column("attempt_run", sa.String(length=200), nullable=True),
        sa.Column("attempt_status", sa.String(length=16), nullable=True),
        sa.Column("fields", sa.JSON(), nullable=True),
        sa.Column("breaking", sa.JSON(), nullable=True),
        sa.Column("schema_at", sa.BigInteger(), nullable=True),
        sa.Column("updated", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "lw_input_symlinks",
        sa.Column("table_name", sa.String(length=400), nullable=False),
        sa.Column("dataset_key", sa.String(length=400), nullable=False),
        sa.PrimaryKeyConstraint("table_name", "dataset_key"),
    )
    op.create_index("ix_lw_input_symlinks_dataset", "lw_input_symlinks", ["dataset_key"], unique=False)
    op.create_table(
        "lw_input_jobs",
        sa.Column("job_namespace", sa.String(length=200), nullable=False),
        sa.Column("job_name", sa.String(length=400), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("status_at", sa.BigInteger(), nullable=False),
        sa.Column("job_type", sa.String(length=16), nullable=True),
        sa.PrimaryKeyConstraint("job_namespace", "job_name"),
    )
    op.create_table(
        "lw_input_writes",
        sa.Column("dataset_key", sa.String(length=400), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("action_id", sa.String(length=200), nullable=False),
        sa.Column("job_namespace", sa.String(length=200), nullable=False),
        sa.Column("job_name", sa.String(length=400), nullable=False),
        sa.Column("written_at", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("dataset_key", "run_id", "action_id"),
    )
    op.create_index("ix_lw_input_writes_recorded", "lw_input_writes", ["recorded_at"], unique=False)
    op.create_index("ix_lw_input_writes_dataset", "lw_input_writes", ["dataset_key", "written_at"], unique=False)
    op.create_table(
        "lw_input_reads",
        sa.Column("job_namespace", sa.String(length=200), nullable=False),
        sa.Column("job_name", sa.String(length=400), nullable=False),
        sa.Column("dataset_key", sa.String(length=400), nullable=False),
        sa.Column("run_id", sa.String(length=200), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=True),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("seen", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("job_namespace", "job_name", "dataset_key"),
    )


def downgrade() -> None:
    op.drop_table("lw_input_reads")
    op.drop_index("ix_lw_input_writes_dataset", table_name="lw_input_writes")
    op.drop_index("ix_lw_input_writes_recorded", table_name="lw_input_writes")
    op.drop_table("lw_input_writes")
    op.drop_table("lw_input_jobs")
    op.drop_index("ix_lw_input_symlinks_dataset", table_name="lw_input_symlinks")
    op.drop_table("lw_input_symlinks")
    op.drop_table("lw_input_datasets")
