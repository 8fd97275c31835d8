"""The scheduling loop: one round claims what is due, publishes it, retries and republishes.

``FiringLoop`` is the half of ``EmbeddedWorkflowScheduler`` that runs on the
clock; the other half (``embedded.py``) is the workflow API. What fires is
decided by the pure ``planner``, claims are written by ``claims``, refresh
statuses move by the pure ``states`` machine.

* a fire is claimed (``lw_refreshes`` row inserted) before anything is
  published; an instance whose insert conflicts publishes nothing;
* a claimed fire is published until the sink confirms delivery (PENDING rows
  older than ``republish_after`` are sent again with the same command id);
  one that can never be published (too large) is marked FAILED, and never
  holds back the other commands of its batch;
* the loop sleeps until the earliest ``next_fire`` (or ``poll_interval``,
  to see changes made by other instances) and is woken by API changes;
* UPSTREAM workflows fire on new successful writes to their table's inputs
  (``planner.upstream_plan``: debounce, floor, ceiling, one in flight per
  table); the claim moves the workflow's write cursor in the transaction that
  inserts the refresh (``Claims.claim_upstream``), so a change fires once;
* before any command goes out its table's inputs are checked (``inputs``):
  a refresh an input holds becomes HELD, announced once by a RefreshHeld,
  and is published with its own command id once no reason is left.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from lineagewire.schemas import kind_of

from . import planner
from .claims import Claims, claim_row
from .commands import CommandSink, build_command, build_held, command_id_for
from .exceptions import CronError, SchedulerError, UnknownTableError
from .options import SchedulerOptions
from .states import Current, hold, release, status_event, transition
from .store import refreshes, workflows
from .tables import MaterializedTable, TableCatalog
from .upstream import Inputs

log = logging.getLogger(__name__)

__all__ = ["FiringLoop", "WorkflowRef"]

#: (nominal time, claim row, (workflow, table), built command) of a fire claimed ahead of its time
_Held = tuple[dt.datetime, dict[str, Any], tuple[Any, MaterializedTable], dict[str, Any]]


class WorkflowRef:
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


class FiringLoop:
    """The loop half of the embedded scheduler; see the module docstring."""

    catalog: TableCatalog
    sink: CommandSink
    options: SchedulerOptions
    clock: Callable[[], dt.datetime]
    engine: sa.Engine | None
    claims: Claims
    inputs: Inputs | None
    fired: int
    _held: list[_Held]
    _upstream_due: dt.datetime | None
    _round_reasons: dict[str, list[dict[str, Any]]] | None
    _wake: threading.Event
    _stop: threading.Event
    _thread: threading.Thread | None
    _publish_lock: threading.Lock

    @property
    def _db(self) -> sa.Engine:
        if self.engine is None:
            raise SchedulerError("scheduler is not open; call open() first")
        return self.engine

    def open(self) -> None:  # the API half opens the database
        raise NotImplementedError

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
            wait = self.options.poll_interval
            try:
                self.tick()
                now = self.clock()
                nxt = self._earliest_next_fire()
                if nxt is not None:
                    wait = min(wait, (nxt - now).total_seconds() - self.options.lead)
                if self._held:
                    wait = min(wait, (self._held[0][0] - now).total_seconds())
                if self._upstream_due is not None:
                    wait = min(wait, (self._upstream_due - now).total_seconds())
            except Exception:  # noqa: BLE001 - the loop must survive a bad round (db busy, broker down)
                log.exception("scheduler round failed; retrying in %.1fs", self.options.poll_interval)
            self._wake.wait(max(0.0, wait))
            self._wake.clear()

    def _earliest_next_fire(self) -> dt.datetime | None:
        with self._db.connect() as c:
            return c.execute(sa.select(sa.func.min(workflows.c.next_fire))
                             .where(workflows.c.status == "ACTIVE", workflows.c.kind != "UPSTREAM")).scalar()

    # -- one round -------------------------------------------------------------------------------------------------

    def tick(self, now: dt.datetime | None = None) -> int:
        """Fire what is due at ``now``, retry failed refreshes, republish unconfirmed ones, mark abandoned ones.

        Returns how many commands this round published.
        """
        now = now or self.clock()
        self._round_reasons = {}  # what holds each table, asked once per round
        try:
            n = self._send_held(now)
            n += self._fire_due(now)
            n += self._fire_upstream(now)
            n += self._release_held(now)
            n += self._retry_failed(now)
            n += self._republish_stale(now)
        finally:
            self._round_reasons = None
        self.claims.abandon(now, self.options.abandon_after, self.options.run_timeout)
        return n

    def _fire_due(self, now: dt.datetime) -> int:
        published = 0
        horizon = now + dt.timedelta(seconds=self.options.lead)
        for _ in range(10_000):  # bounded: each pass advances next_fire of what it read
            with self._db.connect() as c:
                rows = c.execute(
                    sa.select(workflows).where(workflows.c.status == "ACTIVE", workflows.c.kind != "UPSTREAM",
                                               workflows.c.next_fire <= horizon)
                    .order_by(workflows.c.next_fire).limit(self.options.batch_size)
                ).all()
            if not rows:
                break
            claims, updates, context = self._plan(rows, now, horizon)
            mine = self._claim(claims, updates)
            due = [r for r in mine if r["nominal_time"] <= now]
            # fires claimed ahead are checked against their inputs now, up to `lead` early, so that at the
            # nominal time only sending is left
            self._hold(self._screen([r for r in mine if r["nominal_time"] > now], context, now), context)
            published += self._publish(due, {r["command_id"]: context[r["command_id"]] for r in due}, now)
            if len(rows) < self.options.batch_size:
                break
        return published

    def _plan(self, rows: Sequence[Any], now: dt.datetime, horizon: dt.datetime
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, tuple[Any, MaterializedTable]]]:
        """What the due workflows ``rows`` fire up to ``horizon``: the claim rows, each workflow's update (its next
        fire, or PAUSED when its table or cron is wrong), and each claim's (workflow, table)."""
        claims: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        context: dict[str, tuple[Any, MaterializedTable]] = {}
        for w in rows:
            try:
                table = self.catalog.get(w.table_name)
                p = planner.plan(planner.Schedule(w.kind, w.cron, w.time_zone, w.misfire_policy, w.catchup_cap,
                                                  w.next_fire), now, misfire_grace=self.options.misfire_grace,
                                 horizon=horizon, limit=self.options.batch_size)
            except (UnknownTableError, CronError) as exc:
                log.error("workflow %s (%s) cannot fire and is paused: %s", w.id, w.name, exc)
                updates.append({"b_id": w.id, "b_old": w.next_fire, "b_next": w.next_fire,
                                "b_last": w.last_fire, "b_status": "PAUSED", "b_now": now})
                continue
            if p.missed_from is not None:
                log.info("workflow %s: nominal times from %s to %s missed the %.0fs grace; policy %s fires %d",
                         w.id, p.missed_from.isoformat(), p.cutoff.isoformat() if p.cutoff else "?",
                         self.options.misfire_grace, w.misfire_policy,
                         sum(trigger == "MISFIRE" for _, trigger in p.fires))
            for t, trigger in p.fires:
                cid = command_id_for(w.id, t)
                claims.append(claim_row(cid, workflow_id=w.id, table=table, time_zone=w.time_zone,
                                        nominal_time=t, trigger=trigger, now=now, instance=self.options.instance,
                                        refresh_trigger=refresh_trigger_of(w), force=bool(w.force)))
                context[cid] = (w, table)
            updates.append({"b_id": w.id, "b_old": w.next_fire, "b_next": p.next_fire,
                            "b_last": planner.last_fire(w.last_fire, p.fires), "b_status": p.status, "b_now": now})
        return claims, updates, context

    def _claim(self, claims: list[dict[str, Any]], updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Inserts the claims and the workflows' updates in one transaction; returns the claims this instance won
        (another may have claimed the same fires first)."""
        with self._db.begin() as c:
            claimed = self.claims.insert(c, claims)
            self.claims.advance(c, updates)
        mine = [r for r in claims if r["command_id"] in claimed]
        if len(mine) < len(claims):
            log.debug("%d fire(s) were already claimed by another instance", len(claims) - len(mine))
        return mine

    def _hold(self, later: list[dict[str, Any]], context: dict[str, tuple[Any, MaterializedTable]]) -> None:
        """Keeps the claims of fires still to come, in nominal-time order, for ``_send_held``: their commands are
        built now (header event time = claim time) so that sending is all that is left."""
        for r in later:
            ctx = context[r["command_id"]]
            self._held.append((r["nominal_time"], r, ctx, self._build(r, ctx)))
        self._held.sort(key=lambda h: h[0])

    def _send_held(self, now: dt.datetime) -> int:
        """Publish held claims whose nominal time has come, unless their workflow changed since the claim."""
        if not self._held or self._held[0][0] > now:
            return 0
        due = [h for h in self._held if h[0] <= now]
        self._held = [h for h in self._held if h[0] > now]
        keep = self._still_standing(due)
        delivered: list[dict[str, Any]] = []
        for i in range(0, len(keep), self.options.batch_size):  # a confirmation per chunk: early ones go out early
            chunk = keep[i:i + self.options.batch_size]
            delivered.extend(self._deliver([r for r, _ in chunk], [e for _, e in chunk], now))
        return self._mark_queued(delivered)

    def _still_standing(self, due: list[_Held]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(claim row, command) of each held fire of ``due`` that still stands (``_stands``); the claims of the
        others are dropped."""
        state = self._schedules(sorted({h[2][0].id for h in due}))
        keep: list[tuple[dict[str, Any], dict[str, Any]]] = []
        drop: list[str] = []
        for _t, row, ctx, event in due:
            if _stands(state.get(ctx[0].id), ctx[0]):
                keep.append((row, event))
            else:
                drop.append(row["command_id"])
        if drop:
            log.info("%d held fire(s) dropped: their workflow changed after they were claimed", len(drop))
            self.claims.drop_pending(drop)
        return keep

    def _schedules(self, ids: list[str]) -> dict[str, Any]:
        """The status, cron and time zone of the workflows ``ids`` as they are now, by id (a deleted one is
        missing)."""
        state: dict[str, Any] = {}
        with self._db.connect() as c:
            for i in range(0, len(ids), 500):
                for found in c.execute(sa.select(workflows.c.id, workflows.c.status, workflows.c.cron,
                                                 workflows.c.time_zone)
                                       .where(workflows.c.id.in_(ids[i:i + 500]))):
                    state[found.id] = found
        return state

    @staticmethod
    def _build(row: dict[str, Any], context: tuple[Any, MaterializedTable]) -> dict[str, Any]:
        w, table = context
        return build_command(table, workflow_id=w.id, workflow_name=w.name, nominal_time=row["nominal_time"],
                             attempt=row["attempt"], time_zone=w.time_zone,
                             trigger=row.get("refresh_trigger"), trigger_run=row.get("trigger_run"))

    def _deliver(self, rows: list[dict[str, Any]], events: list[dict[str, Any]],
                 now: dt.datetime) -> list[dict[str, Any]]:
        """Send the commands of ``rows``; return the rows the sink confirmed. A command that can never be
        published fails its refresh; the others that failed stay PENDING and are sent again."""
        if not rows:
            return []
        with self._publish_lock:
            failed = self.sink.deliver(events)
        if failed:
            transient = [u for u in failed.values() if not u.permanent]
            if transient:
                log.error("publishing %d of %d refresh command(s) failed; they stay PENDING and are sent again in "
                          "%.0fs: %s", len(transient), len(events), self.options.republish_after, transient[0].reason)
            for i, u in failed.items():
                if u.permanent:
                    r = rows[i]
                    log.error("refresh %s can never be published and FAILED: %s", r["command_id"], u.reason)
                    self.claims.finish(r["command_id"], r["attempt"], "FAILED", now,
                                       error=f"command cannot be published: {u.reason}"[:4000])
        return [r for i, r in enumerate(rows) if i not in failed]

    def _publish(self, rows: list[dict[str, Any]], context: dict[str, tuple[Any, MaterializedTable]],
                 now: dt.datetime) -> int:
        """Send commands for claimed rows; mark them QUEUED once the sink confirmed delivery."""
        rows = self._screen(rows, context, now)
        if not rows:
            return 0
        events = [self._build(r, context[r["command_id"]]) for r in rows]
        return self._mark_queued(self._deliver(rows, events, now))

    def _mark_queued(self, rows: list[dict[str, Any]]) -> int:
        if not rows:
            return 0
        self.claims.mark_queued(rows, self.clock())
        self.fired += len(rows)
        return len(rows)

    def _republish(self, rows: Iterable[Any], now: dt.datetime) -> int:
        batch: list[dict[str, Any]] = []
        context: dict[str, tuple[Any, MaterializedTable]] = {}
        for r in rows:
            try:
                table = self.catalog.get(r.table_name)
            except UnknownTableError as exc:
                self.claims.finish(r.command_id, r.attempt, "FAILED", now, error=str(exc))
                continue
            batch.append({"command_id": r.command_id, "nominal_time": r.nominal_time, "attempt": r.attempt,
                          "refresh_trigger": r.refresh_trigger, "trigger_run": r.trigger_run, "force": bool(r.force)})
            context[r.command_id] = (WorkflowRef(r.workflow_id, r.wf_name, r.wf_tz), table)
        return self._publish(batch, context, now)

    def _retry_failed(self, now: dt.datetime) -> int:
        rows = self.claims.with_workflows(sa.and_(refreshes.c.status == "FAILED", refreshes.c.next_retry_at <= now),
                                          self.options.batch_size)
        todo = []
        for r in rows:
            if self.claims.take_retry(r, now, self.options.instance):
                log.info("refresh %s of %s: attempt %d after %s", r.command_id, r.table_name, r.attempt + 1, r.error)
                todo.append(_Row(r, attempt=r.attempt + 1))
        return self._republish(todo, now)

    def _republish_stale(self, now: dt.datetime) -> int:
        before = now - dt.timedelta(seconds=self.options.republish_after)
        rows = self.claims.with_workflows(sa.and_(refreshes.c.status == "PENDING", refreshes.c.claimed_at <= before),
                                          self.options.batch_size)
        todo = [r for r in rows if self.claims.take_over(r, now, self.options.instance)]
        if todo:
            log.warning("republishing %d refresh command(s) never confirmed as delivered", len(todo))
        return self._republish(todo, now)

    # -- trigger: upstream ------------------------------------------------------------------------------------------

    def _fire_upstream(self, now: dt.datetime) -> int:
        """Claim and publish the refreshes UPSTREAM workflows owe at ``now`` (``planner.upstream_plan``); remember
        the earliest one still to come, for the loop's sleep."""
        self._upstream_due = None
        if self.inputs is None:
            return 0
        with self._db.connect() as c:
            rows = c.execute(sa.select(workflows).where(workflows.c.status == "ACTIVE",
                                                        workflows.c.kind == "UPSTREAM")).all()
        if not rows:
            return 0
        tables = {w.id: self._table_or_pause(w, now) for w in rows}
        busy = self.claims.in_flight(sorted({t.identifier for t in tables.values() if t is not None}))
        mine: list[dict[str, Any]] = []
        context: dict[str, tuple[Any, MaterializedTable]] = {}
        for w in rows:
            table = tables[w.id]
            if table is None:
                continue
            row = self._upstream_fire(w, table, now, in_flight=table.identifier in busy)
            if row is not None:
                busy.add(table.identifier)  # two workflows of one table: one refresh in flight
                mine.append(row)
                context[row["command_id"]] = (w, table)
        return self._publish(mine, context, now)

    def _upstream_fire(self, w: Any, table: MaterializedTable, now: dt.datetime, *,
                       in_flight: bool) -> dict[str, Any] | None:
        """The claim row of the refresh ``w`` fires now, if it owes one and this instance won it."""
        assert self.inputs is not None
        seen = w.upstream_seen or w.created
        writes = [(x.recorded_at, x.run) for x in self.inputs.writes_after(table, seen)]
        state = planner.UpstreamState(seen, w.last_fire, table.debounce, table.min_interval, table.max_staleness)
        fire, due = planner.upstream_plan(state, writes, now, in_flight=in_flight)
        if not in_flight:
            self._wake_at(due)
        if fire is None:
            return None
        row = claim_row(command_id_for(w.id, fire.nominal_time), workflow_id=w.id, table=table,
                        time_zone=w.time_zone, nominal_time=fire.nominal_time, trigger=fire.trigger, now=now,
                        instance=self.options.instance, refresh_trigger=fire.refresh_trigger,
                        trigger_run=fire.trigger_run, force=bool(w.force))
        if not self.claims.claim_upstream(w, row, fire.seen, now):
            log.debug("upstream fire of %s at %s was claimed by another instance", w.id, fire.nominal_time)
            return None
        log.info("%s: %s refresh for writes up to %s (upstream run %s)", table.identifier, fire.trigger,
                 fire.seen.isoformat(), (fire.trigger_run or {}).get("run_id", "-"))
        return row

    def _wake_at(self, due: dt.datetime | None) -> None:
        """The loop's next round comes no later than ``due`` (an upstream fire's)."""
        if due is not None and (self._upstream_due is None or due < self._upstream_due):
            self._upstream_due = due

    def _table_or_pause(self, w: Any, now: dt.datetime) -> MaterializedTable | None:
        """The declared table of ``w``; an undeclared one pauses the workflow, as a cron workflow's does."""
        try:
            return self.catalog.get(w.table_name)
        except UnknownTableError as exc:
            log.error("workflow %s (%s) cannot fire and is paused: %s", w.id, w.name, exc)
            with self._db.begin() as c:
                c.execute(workflows.update().where(workflows.c.id == w.id, workflows.c.status == "ACTIVE")
                          .values(status="PAUSED", paused_at=now, updated=now))
            return None

    # -- holds -----------------------------------------------------------------------------------------------------

    def _screen(self, rows: list[dict[str, Any]], context: dict[str, tuple[Any, MaterializedTable]],
                now: dt.datetime) -> list[dict[str, Any]]:
        """The claim rows of ``rows`` free to be published; those an input holds become HELD (announced by a
        RefreshHeld each). A forced refresh is never held."""
        if self.inputs is None or not rows:
            return rows
        free: list[dict[str, Any]] = []
        for r in rows:
            table = context[r["command_id"]][1]
            if r.get("force"):
                free.append(r)
                continue
            why = self._reasons(table, now)
            if not why:
                free.append(r)
            elif self.claims.set_held(r, hold(why, now), self.options.instance):
                log.warning("refresh %s of %s is HELD: %s", r["command_id"], table.identifier,
                            "; ".join(f"{x['condition']} {x['input']['name']}" for x in why))
                self._announce(r, context[r["command_id"]], why, now, now)
        return free

    def _announce(self, row: dict[str, Any], context: tuple[Any, MaterializedTable], reasons: list[dict[str, Any]],
                  held_since: dt.datetime, now: dt.datetime) -> None:
        """Publish the RefreshHeld of a hold (once: a failed one is sent again by the next round); ``row`` has the
        refresh's command_id, nominal_time, attempt, refresh_trigger and trigger_run."""
        w, table = context
        event = build_held(table, workflow_id=w.id, workflow_name=w.name, command_id=row["command_id"],
                           nominal_time=row["nominal_time"], attempt=row["attempt"],
                           reasons=reasons,  # type: ignore[arg-type]  # HoldReason dicts, as stored
                           held_since=held_since, trigger=row.get("refresh_trigger"),
                           trigger_run=row.get("trigger_run"))
        with self._publish_lock:
            failed = self.sink.deliver([event])
        if failed:
            log.error("RefreshHeld of %s not published (sent again next round): %s", row["command_id"],
                      failed[0].reason)
            return
        self.claims.announced(row["command_id"], row["attempt"], now)

    def _release_held(self, now: dt.datetime, *, table: str | None = None, force: bool = False) -> int:
        """Check HELD refreshes (of ``table``, or all): announce a hold not announced yet, publish one no reason
        holds any more (or every one, with ``force``) with its own command id; returns how many were published."""
        where = refreshes.c.status == "HELD"
        if table is not None:
            where = sa.and_(where, refreshes.c.table_name == table)
        batch: list[dict[str, Any]] = []
        context: dict[str, tuple[Any, MaterializedTable]] = {}
        rows = list(self.claims.with_workflows(where, self.options.batch_size))
        newest: dict[str, Any] = {}
        for r in rows:
            newest[r.table_name] = max(newest.get(r.table_name, r.nominal_time), r.nominal_time)
        for r in rows:
            released = self._release_one(r, newest[r.table_name], now, force=force or bool(r.force))
            if released is not None:
                batch.append(released[0])
                context[r.command_id] = released[1]
        return self._publish(batch, context, now)

    def _release_one(self, r: Any, newest: Any, now: dt.datetime, *,
                     force: bool) -> tuple[dict[str, Any], tuple[Any, MaterializedTable]] | None:
        """One HELD refresh: still held (announced, reasons kept), superseded by a newer one of its table, or
        released by this instance (its claim row to publish, and its context)."""
        try:
            ctx = (WorkflowRef(r.workflow_id, r.wf_name, r.wf_tz), self.catalog.get(r.table_name))
        except UnknownTableError as exc:
            self.claims.finish(r.command_id, r.attempt, "FAILED", now, error=str(exc))
            return None
        why = [] if force else self._reasons(ctx[1], now)
        if why:
            self._still_held(r, ctx, why, now)
            return None
        if not force and self._superseded(r, ctx[1], newest, now):
            return None
        row = self._released(r, now, force=force)
        return None if row is None else (row, ctx)

    def _superseded(self, r: Any, table: MaterializedTable, newest: Any, now: dt.datetime) -> bool:
        """An older HELD refresh of a table without partitions, released with a newer one: the newer one rewrites
        the whole table, so the older one is CANCELED instead of run too (a table held through five hourly fires
        refreshes once on recovery). A partitioned table's held fires each write their own partitions: all run."""
        if table.partition_fields or r.nominal_time >= newest:
            return False
        if self.claims.supersede(r.command_id, r.attempt, now,
                                 f"superseded: released with the newer held refresh of {newest.isoformat()}"):
            log.info("held refresh %s of %s superseded by the newer one", r.command_id, r.table_name)
        return True

    def _reasons(self, table: MaterializedTable, now: dt.datetime) -> list[dict[str, Any]]:
        """What holds ``table``'s refreshes now: asked once per round and table (10,000 fires of 100 tables ask
        100 times), outside a round (an API call) every time."""
        if self.inputs is None:
            return []
        cache = self._round_reasons if self._round_reasons is not None else {}
        if table.identifier not in cache:
            cache[table.identifier] = self.inputs.hold_reasons(table, now)
        return cache[table.identifier]

    def _still_held(self, r: Any, ctx: tuple[Any, MaterializedTable], why: list[dict[str, Any]],
                    now: dt.datetime) -> None:
        """A HELD refresh some input still holds: its RefreshHeld if it did not go out yet, its current reasons."""
        if r.held_announced is None:
            held = {"command_id": r.command_id, "nominal_time": r.nominal_time, "attempt": r.attempt,
                    "refresh_trigger": r.refresh_trigger, "trigger_run": r.trigger_run}
            self._announce(held, ctx, why, r.held_since or now, now)
        if why != r.hold_reasons:
            self.claims.update_reasons(r.command_id, r.attempt, why)

    def _released(self, r: Any, now: dt.datetime, *, force: bool) -> dict[str, Any] | None:
        """The claim row to publish of a HELD refresh this instance released (None: another one did)."""
        values = release(force=force)
        if not self.claims.release(r, values, now, self.options.instance, covers=now - planner.SETTLE):
            return None
        log.info("refresh %s of %s released%s", r.command_id, r.table_name, " by --force" if force else "")
        # force: True here only spares it a second check in _screen; its inputs were just checked
        return {"command_id": r.command_id, "nominal_time": r.nominal_time, "attempt": r.attempt,
                "refresh_trigger": values.get("refresh_trigger", r.refresh_trigger), "trigger_run": r.trigger_run,
                "force": True}

    # -- status from job events ------------------------------------------------------------------------------------

    def apply_status(self, event: dict[str, Any], now: dt.datetime | None = None) -> str | None:
        """Update a refresh from a job event of its run; returns the refresh status after it, or None if not ours.

        Matches on ``header.schedule.command_id`` and the attempt, so a late event of an older attempt
        changes nothing; the transition itself is ``states.transition``.
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
            values = transition(Current(row.status, row.attempt, row.started_at), status_event(kind, event),
                                now=now, max_attempts=self.options.max_attempts, backoff=self.options.backoff)
            if values is None:
                return str(row.status)
            c.execute(refreshes.update().where(refreshes.c.command_id == row.command_id,
                                               refreshes.c.attempt == row.attempt).values(**values))
        self._wake.set()
        return str(values["status"])


def refresh_trigger_of(w: Any) -> str:
    """What the commands of workflow ``w`` say fired them; a workflow from before the column existed by its kind."""
    if getattr(w, "refresh_trigger", None):
        return str(w.refresh_trigger)
    return {"ONE_TIME": "ONE_TIME", "UPSTREAM": "UPSTREAM"}.get(w.kind, "CRON")


def _stands(now: Any, claimed: Any) -> bool:
    """Whether a held fire still stands: its workflow (``now``, None once deleted) was neither suspended nor
    given another cron or time zone since it was claimed (``claimed``)."""
    return (now is not None and now.status in ("ACTIVE", "COMPLETED") and now.cron == claimed.cron
            and now.time_zone == claimed.time_zone)
