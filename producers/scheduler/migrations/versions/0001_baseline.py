"""Scheduler workflows and refreshes: the schema as lineagewire made it before its
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
    op.create_table('lw_refreshes',
    sa.Column('command_id', sa.String(length=36), nullable=False),
    sa.Column('workflow_id', sa.String(length=36), nullable=False),
    sa.Column('table_name', sa.String(length=400), nullable=False),
    sa.Column('nominal_time', sa.BigInteger(), nullable=False),
    sa.Column('trigger', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(length=36), nullable=False),
    sa.Column('claimed_by', sa.String(length=200), nullable=True),
    sa.Column('claimed_at', sa.BigInteger(), nullable=False),
    sa.Column('published_at', sa.BigInteger(), nullable=True),
    sa.Column('started_at', sa.BigInteger(), nullable=True),
    sa.Column('ended_at', sa.BigInteger(), nullable=True),
    sa.Column('duration_ms', sa.BigInteger(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('next_retry_at', sa.BigInteger(), nullable=True),
    sa.Column('static_partitions', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('command_id'),
    sa.UniqueConstraint('workflow_id', 'nominal_time', name='uq_lw_refreshes_fire')
    )
    op.create_index('ix_lw_refreshes_run', 'lw_refreshes', ['run_id'], unique=False)
    op.create_index('ix_lw_refreshes_status', 'lw_refreshes', ['status'], unique=False)
    op.create_index('ix_lw_refreshes_table', 'lw_refreshes', ['table_name', 'nominal_time'], unique=False)
    op.create_table('lw_workflows',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('table_name', sa.String(length=400), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('cron', sa.String(length=200), nullable=True),
    sa.Column('time_zone', sa.String(length=64), nullable=False),
    sa.Column('misfire_policy', sa.String(length=16), nullable=False),
    sa.Column('catchup_cap', sa.Integer(), nullable=False),
    sa.Column('next_fire', sa.BigInteger(), nullable=True),
    sa.Column('last_fire', sa.BigInteger(), nullable=True),
    sa.Column('paused_at', sa.BigInteger(), nullable=True),
    sa.Column('created', sa.BigInteger(), nullable=False),
    sa.Column('updated', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_lw_workflows_due', 'lw_workflows', ['status', 'next_fire'], unique=False)
    op.create_index('ix_lw_workflows_table', 'lw_workflows', ['table_name'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_lw_workflows_table', table_name='lw_workflows')
    op.drop_index('ix_lw_workflows_due', table_name='lw_workflows')
    op.drop_table('lw_workflows')
    op.drop_index('ix_lw_refreshes_table', table_name='lw_refreshes')
    op.drop_index('ix_lw_refreshes_status', table_name='lw_refreshes')
    op.drop_index('ix_lw_refreshes_run', table_name='lw_refreshes')
    op.drop_table('lw_refreshes')
