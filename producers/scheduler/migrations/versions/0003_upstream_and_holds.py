"""Lineage-aware refresh (issue 41): what fired each refresh, held refreshes, and the upstream write cursor.

* ``lw_workflows``: ``refresh_trigger`` (what its commands say fired them), ``force`` (its refresh overrides
  holds), ``upstream_seen`` (for ``UPSTREAM`` workflows: ``recorded_at`` of the newest input write a refresh
  covered; the claim moves it in the transaction that inserts the refresh);
* ``lw_refreshes``: ``refresh_trigger`` and ``trigger_run`` (the command's ``header.schedule``),
  ``hold_reasons``, ``held_since`` and ``held_announced`` (a HELD refresh: why, since when, when its
  RefreshHeld was published) and ``force``.

Every column is nullable: rows from before read as "no trigger recorded, never held".

Revision ID: 0003_upstream
Revises: 0002_inputs
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003_upstream"
down_revision = "0002_inputs"
branch_labels = None
depends_on = None

_WORKFLOW: list[tuple[str, Any]] = [("refresh_trigger", sa.String(length=16)), ("force", sa.Boolean()),
                                     ("upstream_seen", sa.BigInteger())]
_REFRESH: list[tuple[str, Any]] = [("refresh_trigger", sa.String(length=16)), ("trigger_run", sa.JSON()),
                                   ("hold_reasons", sa.JSON()), ("held_since", sa.BigInteger()),
                                   ("held_announced", sa.BigInteger()), ("force", sa.Boolean())]


def upgrade() -> None:
    with op.batch_alter_table("lw_workflows") as batch:
        for name, type_ in _WORKFLOW:
            batch.add_column(sa.Column(name, type_, nullable=True))
    with op.batch_alter_table("lw_refreshes") as batch:
        for name, type_ in _REFRESH:
            batch.add_column(sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lw_refreshes") as batch:
        for name, _ in reversed(_REFRESH):
            batch.drop_column(name)
    with op.batch_alter_table("lw_workflows") as batch:
        for name, _ in reversed(_WORKFLOW):
            batch.drop_column(name)
