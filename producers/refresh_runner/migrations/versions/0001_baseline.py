"""The completed command ids: the table as the refresh runner made it before its store had migrations
(``CREATE TABLE IF NOT EXISTS completed (command_id TEXT PRIMARY KEY, attempt INTEGER, finished_at TEXT,
status TEXT)``).

A file made then has exactly this table; ``lineagewire.db.upgrade`` stamps it at this revision instead of
running it. Frozen: later changes are new revisions, never edits here.

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
    op.create_table('completed',
    sa.Column('command_id', sa.Text(), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=True),
    sa.Column('finished_at', sa.Text(), nullable=True),
    sa.Column('status', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('command_id')
    )


def downgrade() -> None:
    op.drop_table('completed')
