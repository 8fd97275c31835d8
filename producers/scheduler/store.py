"""The scheduler's tables (SQLAlchemy Core), usable on SQLite or any SQLAlchemy database.

Times are stored as integer microseconds since the epoch, UTC: sortable,
exact, and free of the time-zone quirks of each database's DATETIME type.

``refreshes`` has a unique (workflow_id, nominal_time): inserting that row
*claims* the fire, so two scheduler instances on one database fire a nominal
time once: the second insert conflicts and that instance publishes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from lineagewire.db import Store

__all__ = ["STORE", "Micros", "make_engine", "metadata", "refreshes", "workflows"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class Micros(sa.types.TypeDecorator):
    """An aware datetime stored as BIGINT microseconds since the epoch (UTC)."""

    impl = sa.BigInteger
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> int | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}; expected an aware (UTC) datetime")
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds

    def process_result_value(self, value: Any, dialect: Any) -> dt.datetime | None:
        return None if value is None else _EPOCH + dt.timedelta(microseconds=int(value))


metadata = sa.MetaData()

workflows = sa.Table(
    "lw_workflows", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("table_name", sa.String(400), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("cron", sa.String(200)),
    sa.Column("time_zone", sa.String(64), nullable=False),
    sa.Column("misfire_policy", sa.String(16), nullable=False),
    sa.Column("catchup_cap", sa.Integer, nullable=False),
    sa.Column("next_fire", Micros),
    sa.Column("last_fire", Micros),
    sa.Column("paused_at", Micros),
    sa.Column("created", Micros, nullable=False),
    sa.Column("updated", Micros, nullable=False),
    # 0003: what its commands say fired them (CRON, FRESHNESS, ONE_TIME, MANUAL, UPSTREAM), whether its refresh
    # overrides holds (`workflows refresh --force`), and for UPSTREAM the input writes already fired
    # (recorded_at of the newest one a refresh covered): the claim moves it, so one change fires once
    sa.Column("refresh_trigger", sa.String(16)),
    sa.Column("force", sa.Boolean),
    sa.Column("upstream_seen", Micros),
    sa.Index("ix_lw_workflows_due", "status", "next_fire"),
    sa.Index("ix_lw_workflows_table", "table_name"),
)

refreshes = sa.Table(
    "lw_refreshes", metadata,
    sa.Column("command_id", sa.String(36), primary_key=True),
    sa.Column("workflow_id", sa.String(36), nullable=False),
    sa.Column("table_name", sa.String(400), nullable=False),
    sa.Column("nominal_time", Micros, nullable=False),
    sa.Column("trigger", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("run_id", sa.String(36), nullable=False),
    sa.Column("claimed_by", sa.String(200)),
    sa.Column("claimed_at", Micros, nullable=False),
    sa.Column("published_at", Micros),
    sa.Column("started_at", Micros),
    sa.Column("ended_at", Micros),
    sa.Column("duration_ms", sa.BigInteger),
    sa.Column("error", sa.Text),
    sa.Column("next_retry_at", Micros),
    sa.Column("static_partitions", sa.JSON),
    # 0003: the command's header.schedule.trigger and trigger_run; a HELD refresh's reasons (HoldReason dicts),
    # since when it is held and when its RefreshHeld went out (once per hold); force: published whatever holds
    sa.Column("refresh_trigger", sa.String(16)),
    sa.Column("trigger_run", sa.JSON),
    sa.Column("hold_reasons", sa.JSON),
    sa.Column("held_since", Micros),
    sa.Column("held_announced", Micros),
    sa.Column("force", sa.Boolean),
    sa.UniqueConstraint("workflow_id", "nominal_time", name="uq_lw_refreshes_fire"),
    sa.Index("ix_lw_refreshes_status", "status"),
    sa.Index("ix_lw_refreshes_table", "table_name", "nominal_time"),
    sa.Index("ix_lw_refreshes_run", "run_id"),
)


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets a busy timeout and WAL so two processes can share the file."""
    if url.startswith("sqlite"):
        # 60 s unless the URL says otherwise (``?timeout=0.5``): a busy database is waited for, then reported.
        parsed = sa.make_url(url)
        engine = sa.create_engine(url, connect_args={} if "timeout" in parsed.query else {"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            if ":memory:" not in url and url not in ("sqlite://", "sqlite:///"):
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)

#: the tables above and their migration history (``migrations/`` beside this package's code)
STORE = Store("scheduler", metadata, "lineagewire.producers.scheduler", baseline="0001")

# The inputs tracker's tables (``inputs.py``, revision 0002_inputs) are this store's too: importing that module
# puts them on ``metadata``, so STORE describes every table its migrations make whoever loads it first.
from . import inputs as _inputs  # noqa: E402,F401  (after the names inputs.py imports from here)
