"""Runs ordered by event time, and their producer (issue 42: OpenLineage in): ``runs.last_event_time``,
``runs.producer``, ``runs.producer_version``.

Events ingested from OpenLineage producers may come without START and out of order, so a run's status is the one of
its newest event by event time (then sequence), not of its highest sequence: ``last_event_time`` is that event's
time. It is filled here from the stored events (``run_events``) of the event each run's status came from; a run
without them keeps None and is ordered by its sequence alone, as before.

``producer`` is ``header.producer.name`` of the run's first event (``lineagewire``, or an OpenLineage producer URI
such as ``https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/spark``). Runs applied before this
revision have none: their producer is only in their stored events.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("last_event_time", sa.DateTime(timezone=True), nullable=True))
    op.add_column("runs", sa.Column("producer", sa.String(length=1024), nullable=True))
    op.add_column("runs", sa.Column("producer_version", sa.String(length=128), nullable=True))
    op.execute("UPDATE runs SET last_event_time = (SELECT max(e.event_time) FROM run_events e "
               "WHERE e.run_id = runs.run_id AND e.sequence = runs.last_sequence) WHERE last_sequence >= 0")


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("producer_version")
        batch.drop_column("producer")
        batch.drop_column("last_event_time")
