"""The embedded, persistent WorkflowScheduler: a loop over croniter with claims in the database.

Why not APScheduler's SQLAlchemyJobStore: it does not support two scheduler
instances on one job store (each would run every job), its misfire handling
is "coalesce or not" within a grace time (no catch-up cap, no backfill), and
its job state is a pickled blob other tools cannot read. The guarantees we
need are few and easy to state over two tables (see ``store``):

* a fire is *claimed* by inserting (workflow_id, nominal_time) in
  ``lw_refreshes`` before anything is published; the unique constraint makes
  the claim exclusive across instances and restarts;
* a claimed fire is published until the sink confirms delivery (PENDING rows
  older than ``republish_after`` are sent again; the command id is the same,
  so the runner skips a duplicate);
* the loop sleeps until the earliest ``next_fire`` (or ``poll_interval``,
  to see changes made by other instances) and is woken by API changes.

Misfires: a nominal time more than ``misfire_grace`` seconds in the past when
the loop gets to it (the scheduler was down, or a paused workflow resumed
with ``catch_up``) follows the workflow's policy: ``skip`` fires none of
them, ``fire_once`` fires only the latest, ``catch_up`` fires the latest
``catchup_cap`` of them, oldest first. Nominal times within the grace fire
normally.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, OperationalError

from lineagewire.schemas import kind_of

from .api import TERMINAL_REFRESH, RefreshInfo, TableStatus, WorkflowInfo, WorkflowScheduler
from .commands import CommandSink, ListSink, build_cancel, build_command, command_id_for, run_id_for
from .cron import CronSchedule
from .exceptions import (
    BadRequestError,
    CronError,
    SchedulerError,
    UnknownTableError,
    UnknownWorkflowError,
    WorkflowStateError,
)
from .store import make_engine, metadata, refreshes, workflows
from .tables import MISFIRE_POLICIES, MaterializedTable, TableCatalog

log = logging.getLogger(__name__)

__all__ = ["EmbeddedWorkflowScheduler", "SchedulerOptions"]

UTC = dt.UTC
_US = dt.timedelta(microseconds=1)
_RUNNING_STATUSES = {"INITIALIZING", "CREATED", "RUNNING", "RESTARTING", "RECONCILING", "FAILING", "CANCELLING"}


def _now() -> dt.datetime:
    return dt.datetime.now(UTC)


class SchedulerOptions:
    """Tunables of the embedded scheduler (seconds unless said otherwise).

    ``lead``: claim fires up to this long before their nominal time and hold the commands in memory,
    so at the nominal time only sending is left (the service uses 2 s; 0 claims at the nominal time).
    """

    def __init__(self, *, misfire_grace: float = 60.0, max_attempts: int = 3, retry_backoff: float = 30.0,
                 retry_backoff_max: float = 900.0, abandon_after: float = 600.0, run_timeout: float | None = 6 * 3600,
                 batch_size: int = 1000, republish_after: float = 15.0, max_backfill: int = 1000,
                 poll_interval: float = 1.0, lead: float = 0.0, instance: str | None = None) -> None:
        if max_attempts < 1:
            raise BadRequestError(f"max_attempts={max_attempts}; expected >= 1")
        if republish_after <= lead:
            # a claim held for up to `lead` seconds must not look abandoned to other instances
            raise BadRequestError(f"republish_after={republish_after}; expected more than lead={lead}")
        self.misfire_grace = misfire_grace
        self.max_attempts = max_attempts
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.abandon_after = abandon_after
        self.run_timeout = run_timeout
        self.batch_size = batch_size
        self.republish_after = republish_after
        self.max_backfill = max_backfill
        self.poll_interval = poll_interval
        self.lead = lead
        self.instance = instance or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    def backoff(self, attempt: int) -> float:
        """Delay before attempt ``attempt + 1``: exponential, capped."""
        return min(self.retry_backoff * 2 ** (attempt - 1), self.retry_backoff_max)


class EmbeddedWorkflowScheduler(WorkflowScheduler):
    """Persistent workflows in any SQLAlchemy database (SQLite by default).

    ``catalog``: the declared tables. ``sink``: where commands go (``KafkaCommandSink`` in the service).
    ``clock``: returns the current aware UTC time (tests pass their own). Call ``start()`` to run the
    loop in a thread, or ``tick(now)`` to do one round by hand.
    """

    def __init__(self, catalog: TableCatalog, *, url: str = "sqlite:///lineagewire-scheduler.db",
                 sink: CommandSink | None = None, options: SchedulerOptions | None = None,
                 clock: Callable[[], dt.datetime] = _now) -> None:
        self.catalog = catalog
        self.url = url
        self.sink = sink if sink is not None else ListSink()
        self.options = options or SchedulerOptions()
        self.clock = clock
        self.engine: sa.Engine | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._publish_lock = threading.Lock()
        # claimed ahead of their nominal time (``lead``): (nominal time, claim row, context, prepared at)
        self._held: list[tuple[dt.datetime, dict[str, Any], tuple[Any, MaterializedTable], dict[str, Any]]] = []
        self.fired = 0  # fires this instance claimed and published

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def open(self) -> None:
        if self.engine is not None:
            return
        self.engine = make_engine(self.url)
        try:
            metadata.create_all(self.engine)
        except OperationalError:
            # Another instance created the tables at the same moment.
            metadata.create_all(self.engine)

    def close(self) -> None:
        self.stop()
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None

    def __enter__(self) -> EmbeddedWorkflowScheduler:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Run the scheduling loop in a background thread."""
        self.open()
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="lineagewire-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop (the current round finishes first)."""
        if self._thread is None:
            return
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the loop must survive a bad round (db busy, broker down)
                log.exception("scheduler round failed; retrying in %.1fs", self.options.poll_interval)
            wait = self.options.poll_interval
            now = self.clock()
            nxt = self._earliest_next_fire()
            if nxt is not None:
                wait = min(wait, (nxt - now).total_seconds() - self.options.lead)
            if self._held:
                wait = min(wait, (self._held[0][0] - now).total_seconds())
            wait = max(0.0, wait)
            self._wake.wait(wait)
            self._wake.clear()

    def _earliest_next_fire(self) -> dt.datetime | None:
        with self._db.connect() as c:
            return c.execute(sa.select(sa.func.min(workflows.c.next_fire))
                             .where(workflows.c.status == "ACTIVE")).scalar()

    @property
    def _db(self) -> sa.Engine:
        if self.engine is None:
            raise SchedulerError("scheduler is not open; call open() first")
        return self.engine

    # -- one round -------------------------------------------------------------------------------------------------

    def tick(self, now: dt.datetime | None = None) -> int:
        """Fire what is due at ``now``, retry failed refreshes, republish unconfirmed ones, mark abandoned ones.

        Returns how many commands this round published.
        """
        now = now or self.clock()
        n = self._send_held(now)
        n += self._fire_due(now)
        n += self._retry_failed(now)
        n += self._republish_stale(now)
        self._abandon(now)
        return n

    def _plan(self, w: Any, now: dt.datetime, horizon: dt.datetime | None = None
              ) -> tuple[list[tuple[dt.datetime, str]], dt.datetime | None, str]:
        """(nominal times up to ``horizon`` with their trigger, new next_fire, new status) for a due workflow."""
        horizon = horizon or now
        nf: dt.datetime = w.next_fire
        if w.kind == "ONE_TIME":
            return [(nf, "MANUAL")], None, "COMPLETED"
        cs = CronSchedule.of(w.cron, w.time_zone)
        cutoff = now - dt.timedelta(seconds=self.options.misfire_grace)
        limit = max(self.options.batch_size, 1)
        if nf >= cutoff:
            times = [(t, "SCHEDULED") for t in cs.between(nf, horizon, limit=limit)]
        else:
            on_time = [(t, "SCHEDULED") for t in cs.between(cutoff + _US, horizon, limit=limit)]
            if w.misfire_policy == "skip":
                missed: list[dt.datetime] = []
            elif w.misfire_policy == "fire_once":
                last = cs.prev_at_or_before(cutoff)
                missed = [last] if last is not None and last >= nf else []
            else:
                missed = cs.last_n(cutoff, w.catchup_cap, not_before=nf)
            if missed or w.misfire_policy == "skip":
                log.info("workflow %s: nominal times from %s to %s missed the %.0fs grace; policy %s fires %d",
                         w.id, nf.isoformat(), cutoff.isoformat(), self.options.misfire_grace, w.misfire_policy,
                         len(missed))
            times = [(t, "MISFIRE") for t in missed] + on_time
        last_time = times[-1][0] if times else horizon
        return times, cs.next_after(max(horizon, last_time)), "ACTIVE"

    def _fire_due(self, now: dt.datetime) -> int:
        published = 0
        horizon = now + dt.timedelta(seconds=self.options.lead)
        for _ in range(10_000):  # bounded: each pass advances next_fire of what it read
            with self._db.connect() as c:
                rows = c.execute(
                    sa.select(workflows).where(workflows.c.status == "ACTIVE", workflows.c.next_fire <= horizon)
                    .order_by(workflows.c.next_fire).limit(self.options.batch_size)
                ).all()
            if not rows:
                break
            claims: list[dict[str, Any]] = []
            updates: list[dict[str, Any]] = []
            context: dict[str, tuple[Any, MaterializedTable]] = {}
            for w in rows:
                try:
                    table = self.catalog.get(w.table_name)
                    times, new_next, new_status = self._plan(w, now, horizon)
                except (UnknownTableError, CronError) as exc:
                    log.error("workflow %s (%s) cannot fire and is paused: %s", w.id, w.name, exc)
                    updates.append({"b_id": w.id, "b_old": w.next_fire, "b_next": w.next_fire,
                                    "b_last": w.last_fire, "b_status": "PAUSED", "b_now": now})
                    continue
                for t, trigger in times:
                    cid = command_id_for(w.id, t)
                    claims.append(self._claim_row(cid, w, table, t, trigger, now))
                    context[cid] = (w, table)
                last = max([t for t, _ in times], default=None)
                if w.last_fire is not None and (last is None or w.last_fire > last):
                    last = w.last_fire
                updates.append({"b_id": w.id, "b_old": w.next_fire, "b_next": new_next, "b_last": last,
                                "b_status": new_status, "b_now": now})
            with self._db.begin() as c:
                claimed = self._insert_claims(c, claims)
                c.execute(
                    workflows.update()
                    .where(workflows.c.id == sa.bindparam("b_id"), workflows.c.next_fire == sa.bindparam("b_old"),
                           workflows.c.status == "ACTIVE")
                    .values(next_fire=sa.bindparam("b_next"), last_fire=sa.bindparam("b_last"),
                            status=sa.bindparam("b_status"), updated=sa.bindparam("b_now")),
                    updates,
                )
            mine = [r for r in claims if r["command_id"] in claimed]
            if len(mine) < len(claims):
                log.debug("%d fire(s) were already claimed by another instance", len(claims) - len(mine))
            due = [r for r in mine if r["nominal_time"] <= now]
            for r in mine:
                if r["nominal_time"] > now:
                    # built now (header event time = claim time) so that sending is all that is left
                    self._held.append((r["nominal_time"], r, context[r["command_id"]],
                                       self._build(r, context[r["command_id"]])))
            self._held.sort(key=lambda h: h[0])
            published += self._publish(due, {r["command_id"]: context[r["command_id"]] for r in due}, now)
            if len(rows) < self.options.batch_size:
                break
        return published

    def _send_held(self, now: dt.datetime) -> int:
        """Publish held claims whose nominal time has come, unless their workflow changed since the claim."""
        if not self._held or self._held[0][0] > now:
            return 0
        due = [h for h in self._held if h[0] <= now]
        self._held = [h for h in self._held if h[0] > now]
        ids = sorted({h[2][0].id for h in due})
        state: dict[str, Any] = {}
        with self._db.connect() as c:
            for i in range(0, len(ids), 500):
                for found in c.execute(sa.select(workflows.c.id, workflows.c.status, workflows.c.cron,
                                                 workflows.c.time_zone)
                                       .where(workflows.c.id.in_(ids[i:i + 500]))):
                    state[found.id] = found
        keep: list[tuple[dict[str, Any], dict[str, Any]]] = []
        drop: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for _t, row, ctx, event in due:
            w, before = state.get(ctx[0].id), ctx[0]
            # suspended, deleted or given another cron since the claim: the held fire no longer stands
            stands = (w is not None and w.status in ("ACTIVE", "COMPLETED") and w.cron == before.cron
                      and w.time_zone == before.time_zone)
            (keep if stands else drop).append((row, event))
        if drop:
            log.info("%d held fire(s) dropped: their workflow changed after they were claimed", len(drop))
            with self._db.begin() as c:
                c.execute(refreshes.delete().where(refreshes.c.command_id == sa.bindparam("b_cid"),
                                                   refreshes.c.status == "PENDING"),
                          [{"b_cid": r["command_id"]} for r, _ in drop])
        delivered: list[dict[str, Any]] = []
        for i in range(0, len(keep), self.options.batch_size):  # a confirmation per chunk: early ones go out early
            chunk = keep[i:i + self.options.batch_size]
            if self._deliver([e for _, e in chunk]):
                delivered.extend(r for r, _ in chunk)
        return self._mark_queued(delivered)

    def _claim_row(self, cid: str, w: Any, table: MaterializedTable, t: dt.datetime, trigger: str,
                   now: dt.datetime) -> dict[str, Any]:
        return {"command_id": cid, "workflow_id": w.id, "table_name": w.table_name, "nominal_time": t,
                "trigger": trigger, "status": "PENDING", "attempt": 1, "run_id": run_id_for(cid, 1),
                "claimed_by": self.options.instance, "claimed_at": now,
                "static_partitions": table.static_partitions(t, w.time_zone)}

    def _insert_claims(self, c: sa.Connection, rows: list[dict[str, Any]]) -> set[str]:
        """Insert claim rows; return the command ids this call inserted (the others were claimed before)."""
        if not rows:
            return set()
        dialect = c.dialect.name
        if dialect in ("sqlite", "postgresql"):
            mod: Any = sqlite if dialect == "sqlite" else postgresql
            stmt = mod.insert(refreshes).on_conflict_do_nothing().returning(refreshes.c.command_id)
            got: set[str] = set()
            for i in range(0, len(rows), 500):
                got.update(c.execute(stmt, rows[i:i + 500]).scalars().all())
            return got
        got = set()
        for row in rows:
            try:
                with c.begin_nested():
                    c.execute(refreshes.insert(), row)
                got.add(row["command_id"])
            except IntegrityError:
                pass
        return got

    @staticmethod
    def _build(row: dict[str, Any], context: tuple[Any, MaterializedTable]) -> dict[str, Any]:
        w, table = context
        return build_command(table, workflow_id=w.id, workflow_name=w.name, nominal_time=row["nominal_time"],
                             attempt=row["attempt"], time_zone=w.time_zone)

    def _deliver(self, events: list[dict[str, Any]]) -> bool:
        """Send and wait for the sink's confirmation; False (logged) if it failed."""
        with self._publish_lock:
            try:
                self.sink.send(events)
                self.sink.flush()
            except Exception as exc:  # noqa: BLE001 - stays PENDING and is republished
                log.error("publishing %d refresh command(s) failed; they stay PENDING and are sent again in %.0fs: "
                          "%s", len(events), self.options.republish_after, exc)
                return False
        return True

    def _publish(self, rows: list[dict[str, Any]], context: dict[str, tuple[Any, MaterializedTable]],
                 now: dt.datetime) -> int:
        """Send commands for claimed rows; mark them QUEUED once the sink confirmed delivery."""
        if not rows or not self._deliver([self._build(r, context[r["command_id"]]) for r in rows]):
            return 0
        return self._mark_queued(rows)

    def _mark_queued(self, rows: list[dict[str, Any]]) -> int:
        if not rows:
            return 0
        done = self.clock()
        with self._db.begin() as c:
            c.execute(
                refreshes.update()
                .where(refreshes.c.command_id == sa.bindparam("b_cid"), refreshes.c.attempt == sa.bindparam("b_att"),
                       refreshes.c.status == "PENDING")
                .values(status="QUEUED", published_at=done),
                [{"b_cid": r["command_id"], "b_att": r["attempt"]} for r in rows],
            )
        self.fired += len(rows)
        return len(rows)

    def _rows_with_workflows(self, where: Any, limit: int) -> list[Any]:
        j = refreshes.join(workflows, workflows.c.id == refreshes.c.workflow_id)
        with self._db.connect() as c:
            return list(c.execute(sa.select(refreshes, workflows.c.name.label("wf_name"),
                                       workflows.c.time_zone.label("wf_tz"))
                             .select_from(j).where(where).limit(limit)).all())

    def _republish(self, rows: Iterable[Any], now: dt.datetime) -> int:
        batch: list[dict[str, Any]] = []
        context: dict[str, tuple[Any, MaterializedTable]] = {}
        for r in rows:
            try:
                table = self.catalog.get(r.table_name)
            except UnknownTableError as exc:
                self._finish(r.command_id, r.attempt, "FAILED", now, error=str(exc))
                continue
            w = _Wf(r.workflow_id, r.wf_name, r.wf_tz)
            batch.append({"command_id": r.command_id, "nominal_time": r.nominal_time, "attempt": r.attempt})
            context[r.command_id] = (w, table)
        return self._publish(batch, context, now)

    def _retry_failed(self, now: dt.datetime) -> int:
        rows = self._rows_with_workflows(sa.and_(refreshes.c.status == "FAILED", refreshes.c.next_retry_at <= now),
                                         self.options.batch_size)
        todo = []
        for r in rows:
            attempt = r.attempt + 1
            with self._db.begin() as c:
                n = c.execute(refreshes.update().where(refreshes.c.command_id == r.command_id,
                                                       refreshes.c.attempt == r.attempt,
                                                       refreshes.c.status == "FAILED")
                              .values(attempt=attempt, run_id=run_id_for(r.command_id, attempt), status="PENDING",
                                      claimed_at=now, claimed_by=self.options.instance, next_retry_at=None,
                                      published_at=None, started_at=None, ended_at=None, duration_ms=None)).rowcount
            if n == 1:
                log.info("refresh %s of %s: attempt %d after %s", r.command_id, r.table_name, attempt, r.error)
                todo.append(_Row(r, attempt=attempt))
        return self._republish(todo, now)

    def _republish_stale(self, now: dt.datetime) -> int:
        before = now - dt.timedelta(seconds=self.options.republish_after)
        rows = self._rows_with_workflows(sa.and_(refreshes.c.status == "PENDING", refreshes.c.claimed_at <= before),
                                         self.options.batch_size)
        todo = []
        for r in rows:
            with self._db.begin() as c:  # take the row over so another instance does not send it too
                n = c.execute(refreshes.update().where(refreshes.c.command_id == r.command_id,
                                                       refreshes.c.claimed_at == r.claimed_at,
                                                       refreshes.c.status == "PENDING")
                              .values(claimed_at=now, claimed_by=self.options.instance)).rowcount
            if n == 1:
                todo.append(r)
        if todo:
            log.warning("republishing %d refresh command(s) never confirmed as delivered", len(todo))
        return self._republish(todo, now)

    def _abandon(self, now: dt.datetime) -> None:
        quiet = now - dt.timedelta(seconds=self.options.abandon_after)
        with self._db.begin() as c:
            c.execute(refreshes.update().where(refreshes.c.status == "QUEUED", refreshes.c.published_at <= quiet)
                      .values(status="ABANDONED", ended_at=now,
                              error=f"no status from a runner within {self.options.abandon_after:.0f}s of publishing"))
            if self.options.run_timeout is not None:
                long_ago = now - dt.timedelta(seconds=self.options.run_timeout)
                c.execute(refreshes.update().where(refreshes.c.status == "RUNNING",
                                                   refreshes.c.started_at <= long_ago)
                          .values(status="ABANDONED", ended_at=now,
                                  error=f"still RUNNING after {self.options.run_timeout:.0f}s with no final status"))

    def _finish(self, command_id: str, attempt: int, status: str, now: dt.datetime, *,
                error: str | None = None) -> None:
        with self._db.begin() as c:
            c.execute(refreshes.update().where(refreshes.c.command_id == command_id, refreshes.c.attempt == attempt)
                      .values(status=status, ended_at=now, error=error, next_retry_at=None))

    # -- status from job events ------------------------------------------------------------------------------------

    def apply_status(self, event: dict[str, Any], now: dt.datetime | None = None) -> str | None:
        """Update a refresh from a job event of its run; returns the new refresh status or None if not ours.

        Matches on ``header.schedule.command_id`` and the attempt, so a late event of an older attempt
        changes nothing. A final status is not overwritten by a late RUNNING.
        """
        sched = event.get("header", {}).get("schedule")
        if not sched:
            return None
        kind = kind_of(event)
        if kind not in ("JobStatusChangedEvent", "JobCreatedEvent"):
            return None
        now = now or self.clock()
        with self._db.begin() as c:
            row = c.execute(sa.select(refreshes).where(refreshes.c.command_id == sched["command_id"])).first()
            if row is None or row.attempt != sched.get("attempt", 1):
                return None
            status = event.get("new_status") if kind == "JobStatusChangedEvent" else "CREATED"
            when = event.get("transition_time") or event["header"]["event_time"]
            values: dict[str, Any]
            if status in _RUNNING_STATUSES:
                if row.status not in ("PENDING", "QUEUED", "ABANDONED", "RUNNING"):
                    return row.status
                values = {"status": "RUNNING", "started_at": row.started_at or when, "error": None}
            elif status == "FINISHED":
                started = row.started_at or when
                duration = event.get("duration_ms")
                if duration is None:
                    duration = int((when - started).total_seconds() * 1000)
                values = {"status": "COMPLETED", "started_at": started, "ended_at": when, "duration_ms": duration,
                          "error": None, "next_retry_at": None}
            elif status == "FAILED":
                if row.status == "CANCELED":
                    return row.status
                err = event.get("error")
                text = f"{err['error_class']}: {err['message']}" if err else "FAILED without error details"
                retry = None
                if row.attempt < self.options.max_attempts:
                    retry = now + dt.timedelta(seconds=self.options.backoff(row.attempt))
                started = row.started_at or when
                values = {"status": "FAILED", "error": text, "ended_at": when, "started_at": started,
                          "duration_ms": event.get("duration_ms") or int((when - started).total_seconds() * 1000),
                          "next_retry_at": retry}
            elif status in ("CANCELED", "SUSPENDED"):
                values = {"status": "CANCELED", "ended_at": when, "next_retry_at": None}
            else:
                return row.status
            c.execute(refreshes.update().where(refreshes.c.command_id == row.command_id,
                                               refreshes.c.attempt == row.attempt).values(**values))
        self._wake.set()
        return values["status"]

    # -- the WorkflowScheduler API ---------------------------------------------------------------------------------

    def _info(self, row: Any) -> WorkflowInfo:
        return WorkflowInfo(id=row.id, name=row.name, table=row.table_name, kind=row.kind, status=row.status,
                            cron=row.cron, time_zone=row.time_zone, misfire_policy=row.misfire_policy,
                            catchup_cap=row.catchup_cap, next_fire=row.next_fire, last_fire=row.last_fire,
                            created=row.created, updated=row.updated, paused_at=row.paused_at)

    def _row(self, c: sa.Connection, workflow_id: str) -> Any:
        row = c.execute(sa.select(workflows).where(workflows.c.id == workflow_id)).first()
        if row is None:
            raise UnknownWorkflowError(f"workflow id {workflow_id!r} does not exist; list them with "
                                       "`lineagewire workflows list`")
        return row

    def _insert_workflow(self, values: dict[str, Any]) -> WorkflowInfo:
        with self._db.begin() as c:
            c.execute(workflows.insert().values(**values))
            info = self._info(self._row(c, values["id"]))
        self._wake.set()
        return info

    def create_periodic(self, table: str, cron: str | None = None, *, name: str | None = None,
                        time_zone: str | None = None, misfire_policy: str | None = None,
                        catchup_cap: int | None = None, start: dt.datetime | None = None) -> WorkflowInfo:
        t = self.catalog.get(table)
        expr = cron or t.cron
        if not expr:
            raise CronError(f"no cron given for table {table!r} and its declaration has neither cron nor freshness; "
                            "expected e.g. --cron '0 0 * * * *'")
        tz = time_zone or t.time_zone
        cs = CronSchedule(expr, tz)
        policy = (misfire_policy or t.misfire_policy).lower()
        if policy not in MISFIRE_POLICIES:
            raise BadRequestError(f"misfire_policy={policy!r}; expected one of {', '.join(MISFIRE_POLICIES)}")
        cap = catchup_cap if catchup_cap is not None else t.catchup_cap
        if cap < 1:
            raise BadRequestError(f"catchup_cap={cap}; expected an integer >= 1")
        now = self.clock()
        first = cs.next_after((start - _US) if start is not None else now)
        return self._insert_workflow({
            "id": str(uuid.uuid4()), "name": name or t.identifier, "table_name": t.identifier, "kind": "PERIODIC",
            "status": "ACTIVE", "cron": cs.expr, "time_zone": tz, "misfire_policy": policy, "catchup_cap": cap,
            "next_fire": first, "last_fire": None, "paused_at": None, "created": now, "updated": now})

    def create_one_time(self, table: str, *, nominal_time: dt.datetime | None = None,
                        name: str | None = None) -> WorkflowInfo:
        t = self.catalog.get(table)
        now = self.clock()
        nominal = (nominal_time or now.replace(microsecond=0))
        if nominal.tzinfo is None:
            raise BadRequestError(f"nominal_time={nominal.isoformat()} has no time zone; expected e.g. "
                                  "2026-01-31T12:00:00Z")
        nominal = nominal.astimezone(UTC)
        return self._insert_workflow({
            "id": str(uuid.uuid4()), "name": name or f"{t.identifier} once", "table_name": t.identifier,
            "kind": "ONE_TIME", "status": "ACTIVE", "cron": None, "time_zone": t.time_zone,
            "misfire_policy": "fire_once", "catchup_cap": 1, "next_fire": nominal, "last_fire": None,
            "paused_at": None, "created": now, "updated": now})

    def _change(self, workflow_id: str, check: Callable[[Any], dict[str, Any] | None]) -> WorkflowInfo:
        with self._db.begin() as c:
            row = self._row(c, workflow_id)
            values = check(row)
            if values:
                c.execute(workflows.update().where(workflows.c.id == workflow_id)
                          .values(updated=self.clock(), **values))
            info = self._info(self._row(c, workflow_id))
        self._wake.set()
        return info

    def suspend(self, workflow_id: str) -> WorkflowInfo:
        def check(row: Any) -> dict[str, Any] | None:
            if row.status == "COMPLETED":
                raise WorkflowStateError(f"workflow {workflow_id} is COMPLETED; only ACTIVE workflows can be suspended")
            return None if row.status == "PAUSED" else {"status": "PAUSED", "paused_at": self.clock()}

        return self._change(workflow_id, check)

    def resume(self, workflow_id: str, *, catch_up: bool = False) -> WorkflowInfo:
        """Resume a PAUSED workflow. Nothing fires for the paused past unless ``catch_up``, which hands the
        missed nominal times to the workflow's misfire policy."""
        def check(row: Any) -> dict[str, Any] | None:
            if row.status == "COMPLETED":
                raise WorkflowStateError(f"workflow {workflow_id} is COMPLETED; expected PAUSED")
            if row.status == "ACTIVE":
                return None
            values: dict[str, Any] = {"status": "ACTIVE", "paused_at": None}
            if row.kind == "PERIODIC" and not catch_up:
                values["next_fire"] = CronSchedule(row.cron, row.time_zone).next_after(self.clock())
            return values

        return self._change(workflow_id, check)

    def set_cron(self, workflow_id: str, cron: str, *, time_zone: str | None = None) -> WorkflowInfo:
        def check(row: Any) -> dict[str, Any] | None:
            if row.kind != "PERIODIC":
                raise WorkflowStateError(f"workflow {workflow_id} is a one-time refresh; it has no cron to change")
            if row.status == "COMPLETED":
                raise WorkflowStateError(f"workflow {workflow_id} is COMPLETED")
            tz = time_zone or row.time_zone
            cs = CronSchedule(cron, tz)
            return {"cron": cs.expr, "time_zone": tz, "next_fire": cs.next_after(self.clock())}

        return self._change(workflow_id, check)

    def delete(self, workflow_id: str) -> None:
        with self._db.begin() as c:
            self._row(c, workflow_id)
            c.execute(refreshes.delete().where(refreshes.c.workflow_id == workflow_id))
            c.execute(workflows.delete().where(workflows.c.id == workflow_id))

    def get(self, workflow_id: str) -> WorkflowInfo:
        with self._db.connect() as c:
            return self._info(self._row(c, workflow_id))

    def list_workflows(self, *, table: str | None = None) -> list[WorkflowInfo]:
        q = sa.select(workflows).order_by(workflows.c.created)
        if table is not None:
            q = q.where(workflows.c.table_name == table)
        with self._db.connect() as c:
            return [self._info(r) for r in c.execute(q)]

    def backfill(self, workflow_id: str, start: dt.datetime, end: dt.datetime) -> list[RefreshInfo]:
        """Fire every nominal time in [start, end] that was never fired; returns the new refreshes."""
        if start.tzinfo is None or end.tzinfo is None:
            raise BadRequestError("backfill start and end need a time zone; expected e.g. 2026-01-31T00:00:00Z")
        if end < start:
            raise BadRequestError(f"backfill end {end.isoformat()} is before start {start.isoformat()}")
        w = self.get(workflow_id)
        if w.kind != "PERIODIC":
            raise WorkflowStateError(f"workflow {workflow_id} is a one-time refresh; backfill needs a cron")
        table = self.catalog.get(w.table)
        times = CronSchedule(w.cron or "", w.time_zone).between(start, end, limit=self.options.max_backfill + 1)
        if len(times) > self.options.max_backfill:
            raise BadRequestError(f"backfill {start.isoformat()}..{end.isoformat()} has more than "
                                  f"{self.options.max_backfill} nominal times; expected a shorter range")
        now = self.clock()
        wrow = _Wf(w.id, w.name, w.time_zone, w.table)
        claims = [self._claim_row(command_id_for(w.id, t), wrow, table, t, "BACKFILL", now) for t in times]
        with self._db.begin() as c:
            claimed = self._insert_claims(c, claims)
        mine = [r for r in claims if r["command_id"] in claimed]
        self._publish(mine, {r["command_id"]: (wrow, table) for r in mine}, now)
        return [self.refresh(r["command_id"]) for r in mine]

    def refresh(self, command_id: str) -> RefreshInfo:
        """One refresh by command id."""
        with self._db.connect() as c:
            row = c.execute(sa.select(refreshes).where(refreshes.c.command_id == command_id)).first()
        if row is None:
            raise UnknownWorkflowError(f"refresh command id {command_id!r} does not exist")
        return _refresh_info(row)

    def cancel(self, command_id: str, reason: str = "") -> RefreshInfo:
        """Mark a refresh CANCELED and publish CancelRefresh so a runner stops it."""
        info = self.refresh(command_id)
        if info.status in TERMINAL_REFRESH and not (info.status == "FAILED" and info.next_retry_at):
            raise WorkflowStateError(f"refresh {command_id} is already {info.status}; expected PENDING, QUEUED, "
                                     "RUNNING or FAILED with a retry pending")
        with self._db.connect() as c:
            wrow = c.execute(sa.select(workflows).where(workflows.c.id == info.workflow_id)).first()
        table = self.catalog.get(info.table)
        event = build_cancel(namespace=table.namespace, table=info.table, workflow_id=info.workflow_id,
                             workflow_name=wrow.name if wrow else info.workflow_id, command_id=command_id,
                             nominal_time=info.nominal_time, attempt=info.attempt,
                             reason=reason or "canceled by user")
        with self._publish_lock:
            self.sink.send([event])
            self.sink.flush()
        self._finish(command_id, info.attempt, "CANCELED", self.clock(), error=reason or "canceled by user")
        return self.refresh(command_id)

    def refreshes(self, *, workflow_id: str | None = None, table: str | None = None,
                  limit: int = 50) -> list[RefreshInfo]:
        q = sa.select(refreshes).order_by(refreshes.c.nominal_time.desc(), refreshes.c.claimed_at.desc()).limit(limit)
        if workflow_id is not None:
            q = q.where(refreshes.c.workflow_id == workflow_id)
        if table is not None:
            q = q.where(refreshes.c.table_name == table)
        with self._db.connect() as c:
            return [_refresh_info(r) for r in c.execute(q)]

    def table_status(self, table: str) -> TableStatus:
        self.catalog.get(table)
        recent = self.refreshes(table=table, limit=200)
        with self._db.connect() as c:
            mine = refreshes.c.table_name == table
            counts: dict[str, int] = dict(c.execute(sa.select(refreshes.c.status, sa.func.count()).where(mine)
                                    .group_by(refreshes.c.status)).all())
            last_success = c.execute(sa.select(sa.func.max(refreshes.c.nominal_time))
                                     .where(mine, refreshes.c.status == "COMPLETED")).scalar()
        healthy, reason = True, "no finished refresh yet"
        for r in recent:
            if r.status == "COMPLETED":
                healthy, reason = True, f"last refresh for {r.nominal_time.isoformat()} completed"
                break
            if r.status == "ABANDONED" or (r.status == "FAILED" and r.next_retry_at is None):
                healthy, reason = False, f"refresh for {r.nominal_time.isoformat()} {r.status}: {r.error}"
                break
        return TableStatus(table=table, healthy=healthy, reason=reason, last_success=last_success,
                           latest=recent[0] if recent else None, counts={k: int(v) for k, v in counts.items()})


class _Wf:
    """The few workflow fields needed to build a command."""

    __slots__ = ("id", "name", "table_name", "time_zone")

    def __init__(self, id: str, name: str, time_zone: str, table_name: str = "") -> None:  # noqa: A002
        self.id, self.name, self.time_zone, self.table_name = id, name, time_zone, table_name


class _Row:
    """A refresh row with a changed attempt (after a retry was claimed)."""

    def __init__(self, row: Any, *, attempt: int) -> None:
        self._row = row
        self.attempt = attempt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)


def _refresh_info(row: Any) -> RefreshInfo:
    return RefreshInfo(command_id=row.command_id, workflow_id=row.workflow_id, table=row.table_name,
                       nominal_time=row.nominal_time, trigger=row.trigger, status=row.status, attempt=row.attempt,
                       run_id=row.run_id, claimed_at=row.claimed_at, published_at=row.published_at,
                       started_at=row.started_at, ended_at=row.ended_at, duration_ms=row.duration_ms,
                       error=row.error, next_retry_at=row.next_retry_at,
                       static_partitions=dict(row.static_partitions or {}))
