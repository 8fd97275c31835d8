"""Outbox rows are claimed before they are sent, so instances sharing the database never post one twice.

Several instances of the service deliver from one outbox. A row is sent by the instance that claimed it
(``claimed_by``, until ``claimed_until``; ``claims`` counts the claims, more than one meaning a claim of a
dead instance was taken over), and a row waits while an earlier row of its group and channel is pending
(``group_key``), so a group's resolve never overtakes its firing. Rows from before have no group key and
no claim: the first instance that looks claims them.

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
    with op.batch_alter_table("alerting_outbox") as batch:
        batch.add_column(sa.Column("group_key", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("claimed_by", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("claims", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_alerting_alerts_group_key", "alerting_alerts", ["group_key"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_alerting_alerts_group_key", table_name="alerting_alerts")
    with op.batch_alter_table("alerting_outbox") as batch:
        batch.drop_column("claims")
        batch.drop_column("claimed_until")
        batch.drop_column("claimed_by")
        batch.drop_column("group_key")
