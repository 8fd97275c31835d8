"""Outbox rows are claimed before they are sent, so instances sharing the database never post one twice.

Several instances of the service deliver from one outbox. A row is sent by the instance that claimed it
(``claimed_by``, until ``claimed_until``; ``claims`` counts the claims, more than one meaning a claim of a
dead instance was taken over), and a row waits while an earlier row of its group and channel is pending
(``group_key``), so a group's resolve never overtakes its firing. Rows from before have no group key and
no claim: the first instance that looks claims them; their group key is read from their payload here.

``takeovers`` counts the claims taken over from an instance whose lease ran out (it died mid-send). The facts
get the partition their events come from (``partition``), so an instance loads, checks and saves only the runs,
jobs and refreshes of the partitions it owns; rows from before have none and are everyone's, as they were.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import json
from typing import Any

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
        batch.add_column(sa.Column("takeovers", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("alerting_facts") as batch:
        batch.add_column(sa.Column("partition", sa.String(length=300), nullable=True))
    op.create_index("ix_alerting_alerts_group_key", "alerting_alerts", ["group_key"], unique=False)
    op.create_index("ix_alerting_facts_partition", "alerting_facts", ["partition"], unique=False)
    op.create_index("ix_alerting_outbox_claim", "alerting_outbox", ["state", "channel", "group_key", "id"],
                    unique=False)
    _fill_group_keys()


#: outbox rows read and updated this many at a time
BATCH = 1000


def _fill_group_keys() -> None:
    """The group key of each row from before, from its payload (a group's rows go out in order)."""
    bind = op.get_bind()
    outbox = sa.table("alerting_outbox", sa.column("id", sa.Integer), sa.column("payload", sa.JSON),
                      sa.column("group_key", sa.String))
    last = -1
    while True:
        rows = bind.execute(sa.select(outbox.c.id, outbox.c.payload).where(outbox.c.group_key.is_(None),
                                                                           outbox.c.id > last)
                            .order_by(outbox.c.id).limit(BATCH)).all()
        if not rows:
            return
        last = rows[-1].id
        keyed = [{"b_id": r.id, "b_key": key} for r in rows if (key := _group_key(r.payload)) is not None]
        if keyed:
            bind.execute(outbox.update().where(outbox.c.id == sa.bindparam("b_id"))
                         .values(group_key=sa.bindparam("b_key")), keyed)


def _group_key(payload: Any) -> str | None:
    if isinstance(payload, str):  # a JSON column some drivers hand back as text
        try:
            payload = json.loads(payload)
        except ValueError:
            return None
    key = payload.get("group_key") if isinstance(payload, dict) else None
    return str(key)[:32] if key else None


def downgrade() -> None:
    op.drop_index("ix_alerting_outbox_claim", table_name="alerting_outbox")
    op.drop_index("ix_alerting_facts_partition", table_name="alerting_facts")
    op.drop_index("ix_alerting_alerts_group_key", table_name="alerting_alerts")
    with op.batch_alter_table("alerting_facts") as batch:
        batch.drop_column("partition")
    with op.batch_alter_table("alerting_outbox") as batch:
        batch.drop_column("takeovers")
        batch.drop_column("claims")
        batch.drop_column("claimed_until")
        batch.drop_column("claimed_by")
        batch.drop_column("group_key")
