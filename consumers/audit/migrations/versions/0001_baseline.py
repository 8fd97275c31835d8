"""The job registry: the schema as lineagewire made it before its
stores had migrations (``create_all``).

A database made then has exactly these tables; ``lineagewire.db.upgrade`` stamps it at this revision
instead of running it. Frozen: later changes are new revisions, never edits here.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('applied_events',
    sa.Column('event_id', sa.String(length=64), nullable=False),
    sa.Column('applied_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('event_id')
    )
    op.create_table('datasets',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('namespace', sa.String(length=1024), nullable=False),
    sa.Column('name', sa.String(length=2048), nullable=False),
    sa.Column('format', sa.String(length=64), nullable=True),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('namespace', 'name', name='uq_datasets_identity')
    )
    op.create_table('jobs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('namespace', sa.String(length=512), nullable=False),
    sa.Column('name', sa.String(length=512), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('namespace', 'name', name='uq_jobs_identity')
    )
    op.create_table('transitions',
    sa.Column('event_id', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.String(length=128), nullable=False),
    sa.Column('sequence', sa.BigInteger(), nullable=False),
    sa.Column('old_status', sa.String(length=32), nullable=True),
    sa.Column('new_status', sa.String(length=32), nullable=False),
    sa.Column('lifecycle_state', sa.String(length=32), nullable=True),
    sa.Column('transition_time', sa.DateTime(timezone=True), nullable=False),
    sa.Column('restarts', sa.Integer(), nullable=False),
    sa.Column('duration_ms', sa.BigInteger(), nullable=True),
    sa.Column('error_class', sa.Text(), nullable=True),
    sa.Column('error_message', sa.Text(), nullable=True),
    sa.Column('error_stack', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('event_id')
    )
    op.create_index(op.f('ix_transitions_run_id'), 'transitions', ['run_id'], unique=False)
    op.create_table('column_edges',
    sa.Column('source_id', sa.Integer(), nullable=False),
    sa.Column('source_field', sa.String(length=512), nullable=False),
    sa.Column('sink_id', sa.Integer(), nullable=False),
    sa.Column('sink_field', sa.String(length=512), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('transformation', sa.String(length=128), nullable=True),
    sa.Column('last_run_id', sa.String(length=128), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.ForeignKeyConstraint(['sink_id'], ['datasets.id'], ),
    sa.ForeignKeyConstraint(['source_id'], ['datasets.id'], ),
    sa.UniqueConstraint('source_id', 'source_field', 'sink_id', 'sink_field', 'job_id', name='uq_column_edges')
    )
    op.create_index('ix_column_edges_sink', 'column_edges', ['sink_id', 'sink_field'], unique=False)
    op.create_table('dataset_aliases',
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('namespace', sa.String(length=1024), nullable=False),
    sa.Column('name', sa.String(length=2048), nullable=False),
    sa.Column('type', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], ),
    sa.UniqueConstraint('dataset_id', 'namespace', 'name', name='uq_aliases')
    )
    op.create_index(op.f('ix_dataset_aliases_name'), 'dataset_aliases', ['name'], unique=False)
    op.create_table('dataset_edges',
    sa.Column('source_id', sa.Integer(), nullable=False),
    sa.Column('sink_id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('last_run_id', sa.String(length=128), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.ForeignKeyConstraint(['sink_id'], ['datasets.id'], ),
    sa.ForeignKeyConstraint(['source_id'], ['datasets.id'], ),
    sa.UniqueConstraint('source_id', 'sink_id', 'job_id', name='uq_dataset_edges')
    )
    op.create_index('ix_dataset_edges_sink', 'dataset_edges', ['sink_id'], unique=False)
    op.create_table('run_datasets',
    sa.Column('run_id', sa.String(length=128), nullable=False),
    sa.Column('dataset_id', sa.Integer(), nullable=False),
    sa.Column('direction', sa.String(length=3), nullable=False),
    sa.Column('operation', sa.String(length=64), nullable=True),
    sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], ),
    sa.UniqueConstraint('run_id', 'dataset_id', 'direction', name='uq_run_datasets')
    )
    op.create_index(op.f('ix_run_datasets_dataset_id'), 'run_datasets', ['dataset_id'], unique=False)
    op.create_table('specs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('spec_json', sa.Text(), nullable=False),
    sa.Column('first_run_id', sa.String(length=128), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id', 'sha256', name='uq_specs_job_hash')
    )
    op.create_table('runs',
    sa.Column('run_id', sa.String(length=128), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('parent_run_id', sa.String(length=128), nullable=True),
    sa.Column('status', sa.String(length=32), nullable=True),
    sa.Column('lifecycle_state', sa.String(length=32), nullable=True),
    sa.Column('last_sequence', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('duration_ms', sa.BigInteger(), nullable=True),
    sa.Column('restarts', sa.Integer(), nullable=False),
    sa.Column('error_class', sa.Text(), nullable=True),
    sa.Column('error_message', sa.Text(), nullable=True),
    sa.Column('spec_id', sa.Integer(), nullable=True),
    sa.Column('workflow_id', sa.String(length=128), nullable=True),
    sa.Column('nominal_time', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ),
    sa.ForeignKeyConstraint(['spec_id'], ['specs.id'], ),
    sa.PrimaryKeyConstraint('run_id')
    )
    op.create_index(op.f('ix_runs_job_id'), 'runs', ['job_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_runs_job_id'), table_name='runs')
    op.drop_table('runs')
    op.drop_table('specs')
    op.drop_index(op.f('ix_run_datasets_dataset_id'), table_name='run_datasets')
    op.drop_table('run_datasets')
    op.drop_index('ix_dataset_edges_sink', table_name='dataset_edges')
    op.drop_table('dataset_edges')
    op.drop_index(op.f('ix_dataset_aliases_name'), table_name='dataset_aliases')
    op.drop_table('dataset_aliases')
    op.drop_index('ix_column_edges_sink', table_name='column_edges')
    op.drop_table('column_edges')
    op.drop_index(op.f('ix_transitions_run_id'), table_name='transitions')
    op.drop_table('transitions')
    op.drop_table('jobs')
    op.drop_table('datasets')
    op.drop_table('applied_events')
