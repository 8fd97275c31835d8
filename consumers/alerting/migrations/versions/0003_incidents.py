"""Incidents (one page per root cause): the job-level lineage edges the alerting service groups alerts by, the
incidents and the alerts attached to them.

Every instance writes the edges of the events it reads (a job and the datasets it read or wrote, last seen
when), since an incident's root and its downstream alerts are usually on partitions of different instances.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alerting_lineage_edges",
        sa.Column("job_namespace", sa.String(length=200), nullable=False),
        sa.Column("job", sa.String(length=500), nullable=False),
        sa.Column("dataset", sa.String(length=1000), nullable=False),
        sa.Column("writes", sa.Boolean(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_namespace", "job", "dataset", "writes"),
    )
    op.create_index("ix_alerting_lineage_edges_dataset", "alerting_lineage_edges", ["dataset", "writes"])
    op.create_table(
        "alerting_incidents",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("root_fingerprint", sa.String(length=32), nullable=False),
        sa.Column("root", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("affects", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alerting_incidents_root_fingerprint", "alerting_incidents", ["root_fingerprint"])
    op.create_index("ix_alerting_incidents_state", "alerting_incidents", ["state"])
    op.create_table(
        "alerting_incident_alerts",
        sa.Column("incident_id", sa.String(length=32), nullable=False),
        sa.Column("fingerprint", sa.String(length=32), nullable=False),
        sa.Column("member", sa.JSON(), nullable=False),
        sa.Column("attached_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("incident_id", "fingerprint"),
    )
    op.create_index("ix_alerting_incident_alerts_fingerprint", "alerting_incident_alerts", ["fingerprint"])


def downgrade() -> None:
    op.drop_index("ix_alerting_incident_alerts_fingerprint", table_name="alerting_incident_alerts")
    op.drop_table("alerting_incident_alerts")
    op.drop_index("ix_alerting_incidents_state", table_name="alerting_incidents")
    op.drop_index("ix_alerting_incidents_root_fingerprint", table_name="alerting_incidents")
    op.drop_table("alerting_incidents")
    op.drop_index("ix_alerting_lineage_edges_dataset", table_name="alerting_lineage_edges")
    op.drop_table("alerting_lineage_edges")
