"""The SQL side of firing: claims, their hand-over between instances, and refresh-row updates.

A fire is *claimed* by inserting (workflow_id, nominal_time) into
``lw_refreshes`` (``store.py``) before anything is published; the unique
constraint makes the claim exclusive across instances and restarts. Every
update here is conditional on the row still being what the caller read
(status, attempt, claimed_at), so two instances never both take a row over.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from lineagewire.db import insert_ignore

from .commands import run_id_for
from .states import IN_FLIGHT
from .store import refreshes, workflows
from .tables import MaterializedTable

__all__ = ["Claims", "claim_row"]


def claim_row(cid: str, *, workflow_id: str, table: MaterializedTable, time_zone: str, nominal_time: dt.datetime,
              trigger: str, now: dt.datetime, instance: str, refresh_trigger: str | None = None,
              trigger_run: dict[str, Any] | None = None, force: bool = False) -> dict[str, Any]:
    """The ``lw_refreshes`` row that claims attempt 1 of a fire for ``instance``; ``refresh_trigger`` and
    ``trigger_run`` are what its command's ``header.schedule`` will say fired it; ``force``: never held."""
    return {"command_id": cid, "workflow_id": workflow_id, "table_name": table.identifier,
            "nominal_time": nominal_time, "trigger": trigger, "status": "PENDING", "attempt": 1,
            "run_id": run_id_for(cid, 1), "claimed_by": instance, "claimed_at": now,
            "static_partitions": table.static_partitions(nominal_time, time_zone),
            "refresh_trigger": refresh_trigger, "trigger_run": trigger_run, "force": force}


class _Taken(Exception):
    """Rolls a claim's transaction back: another instance claimed the fire first."""


class Claims:
    """Claim and refresh-row statements over an engine (``engine()`` returns it, or raises if closed)."""

    def __init__(self, engine: Callable[[], sa.Engine]) -> None:
        self._engine = engine

    @staticmethod
    def insert(c: sa.Connection, rows: list[dict[str, Any]]) -> set[str]:
        """Insert claim rows; return the command ids this call inserted (the others were claimed before)."""
        return insert_ignore(c, refreshes, rows, returning=refreshes.c.command_id)

    @staticmethod
    def advance(c: sa.Connection, updates: list[dict[str, Any]]) -> None:
        """Move due workflows on (``b_id``, ``b_old`` next_fire, ``b_next``, ``b_last``, ``b_status``, ``b_now``),
        only where nobody moved them since they were read."""
        if not updates:
            return
        c.execute(
            workflows.update()
            .where(workflows.c.id == sa.bindparam("b_id"), workflows.c.next_fire == sa.bindparam("b_old"),
                   workflows.c.status == "ACTIVE")
            .values(next_fire=sa.bindparam("b_next"), last_fire=sa.bindparam("b_last"),
                    status=sa.bindparam("b_status"), updated=sa.bindparam("b_now")),
            updates,
        )

    def mark_queued(self, rows: list[dict[str, Any]], when: dt.datetime) -> None:
        """The sink confirmed delivery of these (command_id, attempt) rows."""
        with self._engine().begin() as c:
            c.execute(
                refreshes.update()
                .where(refreshes.c.command_id == sa.bindparam("b_cid"), refreshes.c.attempt == sa.bindparam("b_att"),
                       refreshes.c.status == "PENDING")
                .values(status="QUEUED", published_at=when),
                [{"b_cid": r["command_id"], "b_att": r["attempt"]} for r in rows],
            )

    def drop_pending(self, command_ids: list[str]) -> None:
        """Forget claims that were held and never sent (their workflow changed)."""
        with self._engine().begin() as c:
            c.execute(refreshes.delete().where(refreshes.c.command_id == sa.bindparam("b_cid"),
                                               refreshes.c.status == "PENDING"),
                      [{"b_cid": cid} for cid in command_ids])

    def with_workflows(self, where: Any, limit: int) -> list[Any]:
        """Refresh rows matching ``where``, each with its workflow's name (``wf_name``) and zone (``wf_tz``)."""
        j = refreshes.join(workflows, workflows.c.id == refreshes.c.workflow_id)
        with self._engine().connect() as c:
            return list(c.execute(sa.select(refreshes, workflows.c.name.label("wf_name"),
                                            workflows.c.time_zone.label("wf_tz"))
                                  .select_from(j).where(where).limit(limit)).all())

    def take_retry(self, r: Any, now: dt.datetime, instance: str) -> bool:
        """Turn a FAILED row due for retry into a PENDING claim of its next attempt; False if another took it."""
        attempt = r.attempt + 1
        with self._engine().begin() as c:
            return c.execute(refreshes.update().where(refreshes.c.command_id == r.command_id,
                                                      refreshes.c.attempt == r.attempt,
                                                      refreshes.c.status == "FAILED")
                             .values(attempt=attempt, run_id=run_id_for(r.command_id, attempt), status="PENDING",
                                     claimed_at=now, claimed_by=instance, next_retry_at=None, published_at=None,
                                     started_at=None, ended_at=None, duration_ms=None)).rowcount == 1

    def take_over(self, r: Any, now: dt.datetime, instance: str) -> bool:
        """Take a stale PENDING claim over so that no other instance sends it too; False if another did."""
        with self._engine().begin() as c:
            return c.execute(refreshes.update().where(refreshes.c.command_id == r.command_id,
                                                      refreshes.c.claimed_at == r.claimed_at,
                                                      refreshes.c.status == "PENDING")
                             .values(claimed_at=now, claimed_by=instance)).rowcount == 1

    def abandon(self, now: dt.datetime, abandon_after: float, run_timeout: float | None) -> None:
        """QUEUED without status for ``abandon_after`` s, or RUNNING for ``run_timeout`` s: ABANDONED."""
        quiet = now - dt.timedelta(seconds=abandon_after)
        with self._engine().begin() as c:
            c.execute(refreshes.update().where(refreshes.c.status == "QUEUED", refreshes.c.published_at <= quiet)
                      .values(status="ABANDONED", ended_at=now,
                              error=f"no status from a runner within {abandon_after:.0f}s of publishing"))
            if run_timeout is not None:
                long_ago = now - dt.timedelta(seconds=run_timeout)
                c.execute(refreshes.update().where(refreshes.c.status == "RUNNING",
                                                   refreshes.c.started_at <= long_ago)
                          .values(status="ABANDONED", ended_at=now,
                                  error=f"still RUNNING after {run_timeout:.0f}s with no final status"))

    def claim_upstream(self, workflow: Any, row: dict[str, Any], seen: dt.datetime, now: dt.datetime) -> bool:
        """Claim an UPSTREAM fire: move the workflow's write cursor to ``seen`` and its last fire to the fire's
        nominal time, only where nobody moved them since ``workflow`` was read, and insert the refresh ``row``,
        in one transaction. False (nothing written) when another instance claimed this change first."""
        try:
            with self._engine().begin() as c:
                moved = c.execute(
                    workflows.update().where(workflows.c.id == workflow.id, workflows.c.status == "ACTIVE",
                                             workflows.c.upstream_seen.is_not_distinct_from(workflow.upstream_seen),
                                             workflows.c.last_fire.is_not_distinct_from(workflow.last_fire))
                    .values(upstream_seen=seen, last_fire=row["nominal_time"], updated=now)).rowcount
                if moved != 1 or not self.insert(c, [row]):
                    # another instance was first; or the fire exists already: the cursor stays where it was
                    raise _Taken
        except _Taken:
            return False
        return True

    def in_flight(self, tables: list[str]) -> set[str]:
        """Those of ``tables`` with a refresh in flight: PENDING, HELD, QUEUED, RUNNING, or FAILED with a retry
        pending."""
        if not tables:
            return set()
        busy = sa.or_(refreshes.c.status.in_(sorted(IN_FLIGHT)),
                      sa.and_(refreshes.c.status == "FAILED", refreshes.c.next_retry_at.is_not(None)))
        with self._engine().connect() as c:
            return set(c.execute(sa.select(refreshes.c.table_name).distinct()
                                 .where(refreshes.c.table_name.in_(tables), busy)).scalars())

    def set_held(self, row: dict[str, Any], values: dict[str, Any], instance: str) -> bool:
        """PENDING -> HELD (``states.hold`` values) for the attempt of ``row``; False if it moved meanwhile."""
        with self._engine().begin() as c:
            return c.execute(refreshes.update().where(refreshes.c.command_id == row["command_id"],
                                                      refreshes.c.attempt == row["attempt"],
                                                      refreshes.c.status == "PENDING")
                             .values(claimed_by=instance, **values)).rowcount == 1

    def announced(self, command_id: str, attempt: int, when: dt.datetime) -> None:
        """The RefreshHeld of this hold was published."""
        with self._engine().begin() as c:
            c.execute(refreshes.update().where(refreshes.c.command_id == command_id, refreshes.c.attempt == attempt,
                                               refreshes.c.status == "HELD").values(held_announced=when))

    def update_reasons(self, command_id: str, attempt: int, reasons: list[dict[str, Any]]) -> None:
        """A refresh still held, for other reasons now (no new RefreshHeld: one per hold)."""
        with self._engine().begin() as c:
            c.execute(refreshes.update().where(refreshes.c.command_id == command_id, refreshes.c.attempt == attempt,
                                               refreshes.c.status == "HELD").values(hold_reasons=reasons))

    def release(self, r: Any, values: dict[str, Any], now: dt.datetime, instance: str, *,
                covers: dt.datetime) -> bool:
        """HELD -> PENDING (``states.release`` values), claimed by ``instance`` to publish now; False if another
        instance released it (or it was cancelled) meanwhile. The released refresh reads the input writes stored
        up to ``covers``: its UPSTREAM workflow's cursor moves there, so the write that ended the hold does not
        fire a second refresh after it."""
        with self._engine().begin() as c:
            if c.execute(refreshes.update().where(refreshes.c.command_id == r.command_id,
                                                  refreshes.c.attempt == r.attempt, refreshes.c.status == "HELD")
                         .values(claimed_at=now, claimed_by=instance, **values)).rowcount != 1:
                return False
            c.execute(workflows.update().where(workflows.c.id == r.workflow_id, workflows.c.kind == "UPSTREAM",
                                               workflows.c.upstream_seen < covers)
                      .values(upstream_seen=covers))
        return True

    def supersede(self, command_id: str, attempt: int, now: dt.datetime, why: str) -> bool:
        """CANCELED, with ``why``, for one HELD attempt that a newer refresh of its table makes pointless; False when
        it is not HELD any more (another instance released or superseded it first)."""
        with self._engine().begin() as c:
            done = c.execute(refreshes.update().where(refreshes.c.command_id == command_id,
                                                      refreshes.c.attempt == attempt, refreshes.c.status == "HELD")
                             .values(status="CANCELED", ended_at=now, error=why, next_retry_at=None))
        return bool(done.rowcount)

    def finish(self, command_id: str, attempt: int, status: str, now: dt.datetime, *,
               error: str | None = None) -> None:
        """Set a final status on one attempt (no retry)."""
        with self._engine().begin() as c:
            c.execute(refreshes.update().where(refreshes.c.command_id == command_id, refreshes.c.attempt == attempt)
                      .values(status=status, ended_at=now, error=error, next_retry_at=None))
