"""The job registry's tables (SQLAlchemy Core): jobs, runs, spec snapshots, transitions, datasets, lineage.

One schema for SQLite (the default, a local file) and PostgreSQL. Every
table that an event fills has a natural unique key, so applying the same
event twice changes nothing (``applied_events`` also remembers event ids).

=================  ==========================================================
table              one row per
=================  ==========================================================
jobs               job (namespace, name)
runs               run id: latest status by event time, times, error, spec, producer
specs              distinct spec snapshot of a job (by SHA-256 of its JSON)
transitions        status event of a run
datasets           dataset (OpenLineage namespace, name)
dataset_aliases    other name of a dataset (catalog table symlink)
run_datasets       dataset a run read (``in``) or wrote (``out``)
dataset_edges      source -> sink dataset, per job; first and last seen
column_edges       source column -> sink column, per job; first and last seen
applied_events     event id already applied
run_events         event of a run, as JSON (the UI's run page, raw event link)
dataset_states     dataset a run read or wrote: its schema and version then
dataset_changes    lifecycle change of a dataset (CREATE, ALTER, RENAME, ...) by an action of a run
run_diffs          ended run: what changed since its job's previous successful run (``run_diff``)
=================  ==========================================================
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from lineagewire.db import Store

__all__ = [
    "METADATA",
    "STORE",
    "applied_events",
    "column_edges",
    "dataset_aliases",
    "dataset_changes",
    "dataset_edges",
    "dataset_states",
    "datasets",
    "jobs",
    "run_datasets",
    "run_diffs",
    "run_events",
    "runs",
    "specs",
    "transitions",
]

METADATA = MetaData()


def _ts(name: str, **kw: object) -> Column:
    return Column(name, DateTime(timezone=True), **kw)  # type: ignore[arg-type]


jobs = Table(
    "jobs", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("namespace", String(512), nullable=False),
    Column("name", String(512), nullable=False),
    _ts("first_seen", nullable=False),
    _ts("last_seen", nullable=False),
    UniqueConstraint("namespace", "name", name="uq_jobs_identity"),
)

specs = Table(
    "specs", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, ForeignKey("jobs.id"), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("spec_json", Text, nullable=False),
    Column("first_run_id", String(128), nullable=False),
    _ts("first_seen", nullable=False),
    UniqueConstraint("job_id", "sha256", name="uq_specs_job_hash"),
)

runs = Table(
    "runs", METADATA,
    Column("run_id", String(128), primary_key=True),
    Column("job_id", Integer, ForeignKey("jobs.id"), nullable=False, index=True),
    Column("parent_run_id", String(128), index=True),
    # The parent's job identity (an Airflow task, a refresh workflow) and the root of the chain (an Airflow
    # DAG run, ``header.root_parent_run``): migration 0002.
    Column("parent_job_namespace", String(512)),
    Column("parent_job_name", String(512)),
    Column("root_parent_run_id", String(128), index=True),
    Column("root_parent_job_namespace", String(512)),
    Column("root_parent_job_name", String(512)),
    Column("status", String(32)),
    Column("lifecycle_state", String(32)),
    # The run's newest event by (event time, sequence), the one its status is from (migration 0006): events of a run
    # ingested from OpenLineage may arrive out of order, and a late START must not reopen a run that has ended.
    Column("last_sequence", BigInteger, nullable=False, default=-1),
    _ts("last_event_time"),
    # ``header.producer`` of the run's first event: ``lineagewire``, or the original OpenLineage producer URI of
    # an ingested run (migration 0006; None for runs applied before it)
    Column("producer", String(1024)),
    Column("producer_version", String(128)),
    _ts("created_at"),
    _ts("started_at"),
    _ts("ended_at"),
    Column("duration_ms", BigInteger),
    Column("restarts", Integer, nullable=False, default=0),
    Column("error_class", Text),
    Column("error_message", Text),
    Column("spec_id", Integer, ForeignKey("specs.id")),
    Column("workflow_id", String(128)),
    _ts("nominal_time"),
    # a job's newest runs (the UI's last status and sparkline) without sorting all of its runs
    Index("ix_runs_job_created", "job_id", "created_at", "run_id"),
)

transitions = Table(
    "transitions", METADATA,
    Column("event_id", String(64), primary_key=True),
    Column("run_id", String(128), nullable=False, index=True),
    Column("sequence", BigInteger, nullable=False),
    Column("old_status", String(32)),
    Column("new_status", String(32), nullable=False),
    Column("lifecycle_state", String(32)),
    _ts("transition_time", nullable=False),
    Column("restarts", Integer, nullable=False, default=0),
    Column("duration_ms", BigInteger),
    Column("error_class", Text),
    Column("error_message", Text),
    Column("error_stack", Text),
)

datasets = Table(
    "datasets", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False),
    Column("format", String(64)),
    _ts("first_seen", nullable=False),
    _ts("last_seen", nullable=False),
    UniqueConstraint("namespace", "name", name="uq_datasets_identity"),
)

dataset_aliases = Table(
    "dataset_aliases", METADATA,
    Column("dataset_id", Integer, ForeignKey("datasets.id"), nullable=False),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False, index=True),
    Column("type", String(32)),
    UniqueConstraint("dataset_id", "namespace", "name", name="uq_aliases"),
)

run_datasets = Table(
    "run_datasets", METADATA,
    Column("run_id", String(128), nullable=False),
    Column("dataset_id", Integer, ForeignKey("datasets.id"), nullable=False, index=True),
    Column("direction", String(3), nullable=False),
    Column("operation", String(64)),
    _ts("seen_at", nullable=False),
    UniqueConstraint("run_id", "dataset_id", "direction", name="uq_run_datasets"),
)

dataset_edges = Table(
    "dataset_edges", METADATA,
    Column("source_id", Integer, ForeignKey("datasets.id"), nullable=False),
    Column("sink_id", Integer, ForeignKey("datasets.id"), nullable=False),
    Column("job_id", Integer, ForeignKey("jobs.id"), nullable=False),
    Column("last_run_id", String(128), nullable=False),
    _ts("first_seen", nullable=False),
    _ts("last_seen", nullable=False),
    UniqueConstraint("source_id", "sink_id", "job_id", name="uq_dataset_edges"),
    Index("ix_dataset_edges_sink", "sink_id"),
)

column_edges = Table(
    "column_edges", METADATA,
    Column("source_id", Integer, ForeignKey("datasets.id"), nullable=False),
    Column("source_field", String(512), nullable=False),
    Column("sink_id", Integer, ForeignKey("datasets.id"), nullable=False),
    Column("sink_field", String(512), nullable=False),
    Column("job_id", Integer, ForeignKey("jobs.id"), nullable=False),
    Column("transformation", String(128)),
    Column("last_run_id", String(128), nullable=False),
    _ts("first_seen", nullable=False),
    _ts("last_seen", nullable=False),
    UniqueConstraint("source_id", "source_field", "sink_id", "sink_field", "job_id", name="uq_column_edges"),
    Index("ix_column_edges_sink", "sink_id", "sink_field"),
)

applied_events = Table(
    "applied_events", METADATA,
    Column("event_id", String(64), primary_key=True),
    _ts("applied_at", nullable=False),
)

# The event itself, so that a run can be shown action by action (name, SQL, duration, column lineage,
# lineage_complete) and its raw JSON linked, without the archive.
run_events = Table(
    "run_events", METADATA,
    Column("event_id", String(64), primary_key=True),
    Column("run_id", String(128), nullable=False, index=True),
    Column("kind", String(64), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    _ts("event_time", nullable=False),
    Column("body", Text, nullable=False),
)

# A dataset's schema and version as one run saw it: the schema history (columns added, removed, retyped)
# and the Delta/Iceberg versions read or written.
dataset_states = Table(
    "dataset_states", METADATA,
    Column("dataset_id", Integer, ForeignKey("datasets.id"), nullable=False, index=True),
    Column("run_id", String(128), nullable=False),
    Column("direction", String(3), nullable=False),
    Column("fields_json", Text),
    Column("version", String(128)),
    _ts("seen_at", nullable=False),
    UniqueConstraint("run_id", "dataset_id", "direction", name="uq_dataset_states"),
)

# What an action did to a dataset itself (contract v2 ``lifecycle_change``), one row per run, action, dataset and
# change: a dataset whose newest change is DROP is dropped, by that run; a RENAME's ``previous_id`` is the dataset
# under its old name, so the new name's history goes on from the old one's.
dataset_changes = Table(
    "dataset_changes", METADATA,
    Column("dataset_id", Integer, ForeignKey("datasets.id"), nullable=False, index=True),
    Column("run_id", String(128), nullable=False),
    Column("action_id", String(128), nullable=False),  # "" for what a run's JobCreatedEvent announces
    Column("change", String(16), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    _ts("changed_at", nullable=False),
    Column("previous_id", Integer, ForeignKey("datasets.id"), index=True),
    UniqueConstraint("run_id", "action_id", "dataset_id", "change", name="uq_dataset_changes"),
)

# What changed since the job's previous successful run (``run_diff.compare``), computed once when the run ends
# (again if an event of it comes later), so that reading it is this one row; ``against_run_id`` is None when
# there was no successful run before it.
run_diffs = Table(
    "run_diffs", METADATA,
    Column("run_id", String(128), ForeignKey("runs.run_id"), primary_key=True),
    Column("against_run_id", String(128)),
    Column("changed", Boolean, nullable=False),
    Column("diff_json", Text, nullable=False),
    _ts("computed_at", nullable=False),
)


#: the tables above and their migration history (``migrations/`` beside this package's code)
STORE = Store("registry", METADATA, "lineagewire.consumers.audit", baseline="0001")
