"""Alerts, groups, silences, notification outbox and run facts: the schema as lineagewire made it before its
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
    op.create_table('alerting_alerts',
    sa.Column('fingerprint', sa.String(length=32), nullable=False),
    sa.Column('rule', sa.String(length=200), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('annotations', sa.JSON(), nullable=False),
    sa.Column('channels', sa.JSON(), nullable=False),
    sa.Column('group_key', sa.String(length=32), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('notified', sa.Boolean(), nullable=False),
    sa.Column('last_notified_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('resolve_pending', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('fingerprint')
    )
    op.create_table('alerting_facts',
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('key', sa.String(length=500), nullable=False),
    sa.Column('value', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('kind', 'key')
    )
    op.create_table('alerting_groups',
    sa.Column('key', sa.String(length=32), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('channels', sa.JSON(), nullable=False),
    sa.Column('first_pending_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_table('alerting_outbox',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('channel', sa.String(length=200), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_alerting_outbox_channel'), 'alerting_outbox', ['channel'], unique=False)
    op.create_index(op.f('ix_alerting_outbox_state'), 'alerting_outbox', ['state'], unique=False)
    op.create_table('alerting_silences',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('matchers', sa.JSON(), nullable=False),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )


def downgrade() -> None:
    op.drop_table('alerting_silences')
    op.drop_index(op.f('ix_alerting_outbox_state'), table_name='alerting_outbox')
    op.drop_index(op.f('ix_alerting_outbox_channel'), table_name='alerting_outbox')
    op.drop_table('alerting_outbox')
    op.drop_table('alerting_groups')
    op.drop_table('alerting_facts')
    op.drop_table('alerting_alerts')
