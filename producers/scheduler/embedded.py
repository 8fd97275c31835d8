"""The embedded, persistent WorkflowScheduler: workflows in any SQLAlchemy database, fired by a loop.

The parts, each testable on its own:

* ``planner``: which nominal times fire (misfire policies, catch-up), pure;
* ``claims``: the SQL that claims fires and moves refresh rows;
* ``states``: the refresh-status state machine, pure transitions;
* ``loop`` (``FiringLoop``): the rounds on the clock; this module: the workflow API.

Why not APScheduler's SQLAlchemyJobStore: it does not support two scheduler
instances on one job store (each would run every job), its misfire handling
is "coalesce or not" within a grace time (no catch-up cap, no backfill), and
its job state is a pickled blob other tools cannot read. The guarantees we
need are few and easy to state over two tables (see ``store`` and ``claims``).

Every value from outside is checked against ``limits`` (lengths, time range)
and refused with a ``BadRequestError``/``CronError`` naming it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from lineagewire.db import upgrade

from . import planner
from .api import TERMINAL_REFRESH, RefreshInfo, TableStatus, WorkflowInfo, WorkflowScheduler
from .claims import Claims, claim_row
from .commands import CommandSink, ListSink, build_cancel, command_id_for
from .cron import CronSchedule
from .exceptions import BadRequestError, CronError, SchedulerError, UnknownWorkflowError, WorkflowStateError
from .limits import MAX_CATCHUP_CAP, MAX_CRON, MAX_LIMIT, MAX_NAME, MAX_REASON, check_text, check_time
from .loop import FiringLoop, WorkflowRef
from .options import SchedulerOptions
from .store import STORE, make_engine, refreshes, workflows
from .tables import MISFIRE_POLICIES, TableCatalog
from .upstream import DbInputs, Inputs

log = logging.getLogger(__name__)

__all__ = ["EmbeddedWorkflowScheduler", "SchedulerOptions"]

UTC = dt.UTC


def _now() -> dt.datetime:
    return dt.datetime.now(UTC)


def _cron(expr: str | None, tz: str) -> CronSchedule:
    if expr is not None and len(expr) > MAX_CRON:
        raise CronError(f"cron has {len(expr)} characters; expected at most {MAX_CRON}")
    return CronSchedule(expr or "", tz)


class EmbeddedWorkflowScheduler(FiringLoop, WorkflowScheduler):
    """Persistent workflows in any SQLAlchemy database (SQLite by default).

    ``catalog``: the declared tables. ``sink``: where commands go (``KafkaCommandSink`` in the service).
    ``clock``: returns the current aware UTC time (tests pass their own). ``inputs``: what the tables' inputs
    say (``upstream.Inputs``): ``True`` (default) reads what the inputs tracker stores in this database,
    ``None`` never holds and fires no upstream refresh. Call ``start()`` to run the loop in a thread, or
    ``tick(now)`` to do one round by hand.
    """

    def __init__(self, catalog: TableCatalog, *, url: str = "sqlite:///lineagewire-scheduler.db",
                 sink: CommandSink | None = None, options: SchedulerOptions | None = None,
                 clock: Callable[[], dt.datetime] = _now, inputs: Inputs | bool | None = True) -> None:
        self.catalog = catalog
        self.inputs = DbInputs(lambda: self._db) if inputs is True else (inputs or None)
        self._upstream_due = None
        self._round_reasons = None
        self.url = url
        self.sink = sink if sink is not None else ListSink()
        self.options = options or SchedulerOptions()
        self.clock = clock
        self.engine: sa.Engine | None = None
        self.claims = Claims(lambda: self._db)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._publish_lock = threading.Lock()
        self._held = []  # claimed ahead of their nominal time (``lead``)
        self.fired = 0  # fires this instance claimed and published

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def open(self) -> None:
        if self.engine is not None:
            return
        self.engine = make_engine(self.url)
        upgrade(self.engine, STORE)  # two instances starting at once: serialised there

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

    # -- the WorkflowScheduler API ---------------------------------------------------------------------------------

    def _info(self, row: Any) -> WorkflowInfo:
        return WorkflowInfo(id=row.id, name=row.name, table=row.table_name, kind=row.kind, status=row.status,
                            cron=row.cron, time_zone=row.time_zone, misfire_policy=row.misfire_policy,
                            catchup_cap=row.catchup_cap, next_fire=row.next_fire, last_fire=row.last_fire,
                            created=row.created, updated=row.updated, paused_at=row.paused_at,
                            refresh_trigger=row.refresh_trigger, force=bool(row.force))

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
        check_text("name", name, MAX_NAME)
        if cron is not None and not cron.strip():
            raise CronError("cron='' is empty; expected 5 fields, or 6 with seconds first, or leave it out to use "
                            "the table's cron")
        if cron is None and t.upstream:
            return self.create_upstream(table, name=name)
        expr = cron or t.cron
        if not expr:
            raise CronError(f"no cron given for table {table!r} and its declaration has neither cron nor freshness; "
                            "expected e.g. --cron '0 0 * * * *'")
        tz = time_zone or t.time_zone
        cs = _cron(expr, tz)
        policy = str(misfire_policy or t.misfire_policy).lower()
        if policy not in MISFIRE_POLICIES:
            raise BadRequestError(f"misfire_policy={policy[:40]!r}; expected one of {', '.join(MISFIRE_POLICIES)}")
        cap = catchup_cap if catchup_cap is not None else t.catchup_cap
        if not 1 <= cap <= MAX_CATCHUP_CAP:
            raise BadRequestError(f"catchup_cap={cap}; expected an integer from 1 to {MAX_CATCHUP_CAP}")
        if start is not None:
            start = check_time("start", start, naive_ok=True)
        now = self.clock()
        first = check_time("first nominal time", planner.first_fire(cs, now, start))
        return self._insert_workflow({
            "id": str(uuid.uuid4()), "name": name or t.identifier, "table_name": t.identifier, "kind": "PERIODIC",
            "status": "ACTIVE", "cron": cs.expr, "time_zone": tz, "misfire_policy": policy, "catchup_cap": cap,
            "next_fire": first, "last_fire": None, "paused_at": None, "created": now, "updated": now,
            "refresh_trigger": _periodic_trigger(cron, t.freshness)})

    def create_upstream(self, table: str, *, name: str | None = None) -> WorkflowInfo:
        """A workflow that refreshes a ``trigger: upstream`` table when its inputs get new successful writes
        (written after now: the past fires nothing)."""
        t = self.catalog.get(table)
        check_text("name", name, MAX_NAME)
        if not t.upstream:
            raise BadRequestError(f"table {table!r} does not declare trigger: upstream; expected a cron for it, "
                                  "or trigger: upstream in its declaration")
        if self.inputs is None:
            raise WorkflowStateError("this scheduler runs without its inputs tracker; an upstream workflow would "
                                     "never fire")
        now = self.clock()
        return self._insert_workflow({
            "id": str(uuid.uuid4()), "name": name or t.identifier, "table_name": t.identifier, "kind": "UPSTREAM",
            "status": "ACTIVE", "cron": None, "time_zone": t.time_zone, "misfire_policy": "fire_once",
            "catchup_cap": 1, "next_fire": None, "last_fire": None, "paused_at": None, "created": now,
            "updated": now, "refresh_trigger": "UPSTREAM", "upstream_seen": now})

    def create_one_time(self, table: str, *, nominal_time: dt.datetime | None = None, name: str | None = None,
                        trigger: str = "ONE_TIME", force: bool = False) -> WorkflowInfo:
        """A one-time refresh; ``trigger`` MANUAL for a person's (``workflows refresh``), ``force``: published
        whatever holds the table's inputs."""
        t = self.catalog.get(table)
        check_text("name", name, MAX_NAME)
        now = self.clock()
        nominal = check_time("nominal_time", nominal_time or now.replace(microsecond=0))
        return self._insert_workflow({
            "id": str(uuid.uuid4()), "name": name or f"{t.identifier} once", "table_name": t.identifier,
            "kind": "ONE_TIME", "status": "ACTIVE", "cron": None, "time_zone": t.time_zone,
            "misfire_policy": "fire_once", "catchup_cap": 1, "next_fire": nominal, "last_fire": None,
            "paused_at": None, "created": now, "updated": now, "refresh_trigger": trigger, "force": force})

    def force_refresh(self, table: str, *, nominal_time: dt.datetime | None = None,
                      name: str | None = None) -> tuple[list[RefreshInfo], WorkflowInfo | None]:
        """``workflows refresh TABLE --force``: publish the table's HELD refreshes now, whatever holds them
        (trigger MANUAL, their own command ids); when none is held, a one-time MANUAL refresh that is never held.
        Returns the released refreshes and the new workflow (None when some were released)."""
        self.catalog.get(table)
        held = [r.command_id for r in self.refreshes(table=table, limit=MAX_LIMIT) if r.status == "HELD"]
        if held:
            self._release_held(self.clock(), table=table, force=True)
            return [self.refresh(cid) for cid in held], None
        w = self.create_one_time(table, nominal_time=nominal_time, name=name, trigger="MANUAL", force=True)
        return [], w

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
            if row.kind == "UPSTREAM" and not catch_up:
                values["upstream_seen"] = self.clock()  # writes while paused fire nothing
            if row.kind == "PERIODIC":
                values["next_fire"] = planner.resume_next_fire(CronSchedule(row.cron, row.time_zone), self.clock(),
                                                               row.next_fire, catch_up)
            return values

        return self._change(workflow_id, check)

    def set_cron(self, workflow_id: str, cron: str, *, time_zone: str | None = None) -> WorkflowInfo:
        if not cron or not cron.strip():
            raise CronError("cron='' is empty; expected 5 fields, or 6 with seconds first")
        cs = _cron(cron, time_zone or "UTC")  # the syntax first, before the workflow is read

        def check(row: Any) -> dict[str, Any] | None:
            if row.kind != "PERIODIC":
                raise WorkflowStateError(f"workflow {workflow_id} is {_kind_text(row.kind)}; it has no cron to "
                                         "change")
            if row.status == "COMPLETED":
                raise WorkflowStateError(f"workflow {workflow_id} is COMPLETED")
            tz = time_zone or row.time_zone
            in_zone = cs if tz == cs.tz_name else _cron(cron, tz)
            return {"cron": in_zone.expr, "time_zone": tz, "next_fire": in_zone.next_after(self.clock())}

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
        start, end = check_time("backfill start", start), check_time("backfill end", end)
        w = self.get(workflow_id)
        if w.kind != "PERIODIC":
            raise WorkflowStateError(f"workflow {workflow_id} is {_kind_text(w.kind)}; backfill needs a cron")
        table = self.catalog.get(w.table)
        times = planner.backfill_times(CronSchedule(w.cron or "", w.time_zone), start, end,
                                       max_backfill=self.options.max_backfill)
        now = self.clock()
        wref = WorkflowRef(w.id, w.name, w.time_zone, w.table)
        claims = [claim_row(command_id_for(w.id, t), workflow_id=w.id, table=table, time_zone=w.time_zone,
                            nominal_time=t, trigger="BACKFILL", now=now, instance=self.options.instance,
                            refresh_trigger=w.refresh_trigger or "CRON", force=w.force)
                  for t in times]
        with self._db.begin() as c:
            claimed = self.claims.insert(c, claims)
        mine = [r for r in claims if r["command_id"] in claimed]
        self._publish(mine, {r["command_id"]: (wref, table) for r in mine}, now)
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
        check_text("reason", reason, MAX_REASON, empty_ok=True)
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
            failed = self.sink.deliver([event])
        if failed:
            raise SchedulerError(f"refresh {command_id}: CancelRefresh could not be published: {failed[0].reason}")
        self.claims.finish(command_id, info.attempt, "CANCELED", self.clock(), error=reason or "canceled by user")
        return self.refresh(command_id)

    def refreshes(self, *, workflow_id: str | None = None, table: str | None = None,
                  limit: int = 50) -> list[RefreshInfo]:
        if not 1 <= limit <= MAX_LIMIT:
            raise BadRequestError(f"limit={limit}; expected an integer from 1 to {MAX_LIMIT}")
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
        healthy, reason = _health(recent)
        return TableStatus(table=table, healthy=healthy, reason=reason, last_success=last_success,
                           latest=recent[0] if recent else None, counts={k: int(v) for k, v in counts.items()},
                           hold_reasons=next((r.hold_reasons for r in recent if r.status == "HELD"), []))

    def table_inputs(self, table: str) -> dict[str, Any]:
        """A table's inputs with their last write and health, what would hold a refresh now, and its HELD
        refreshes (``GET /tables/{t}/inputs``; docs/scheduler.md has the JSON)."""
        t = self.catalog.get(table)
        now = self.clock()
        states = self.inputs.states(t, now) if self.inputs is not None else []
        reasons = self.inputs.hold_reasons(t, now) if self.inputs is not None else []
        held = [r.as_dict() for r in self.refreshes(table=table, limit=MAX_LIMIT) if r.status == "HELD"]
        return {"table": t.identifier, "trigger": t.trigger, "hold_on": list(t.hold_on), "inputs": states,
                "hold_reasons": reasons, "held": held}

    def in_flight(self, table: str) -> bool:
        """Whether ``table`` has a refresh in flight (what an upstream fire waits for)."""
        return bool(self.claims.in_flight([table]))


def _health(recent: list[RefreshInfo]) -> tuple[bool, str]:
    """A table's health from its refreshes, newest first: not while one is HELD, nor when the newest finished
    one failed with no retry left or was abandoned."""
    held = next((r for r in recent if r.status == "HELD"), None)
    if held is not None:
        why = "; ".join(f"{x['condition']} {x['input']['name']}: {x.get('detail', '')}" for x in held.hold_reasons)
        return False, f"refresh for {held.nominal_time.isoformat()} HELD: {why}"
    for r in recent:
        if r.status == "COMPLETED":
            return True, f"last refresh for {r.nominal_time.isoformat()} completed"
        if r.status == "ABANDONED" or (r.status == "FAILED" and r.next_retry_at is None):
            return False, f"refresh for {r.nominal_time.isoformat()} {r.status}: {r.error}"
    return True, "no finished refresh yet"


def _periodic_trigger(cron: str | None, freshness: str | None) -> str:
    """What a periodic workflow's commands say fired them: its table's freshness, unless a cron was given."""
    return "FRESHNESS" if cron is None and freshness else "CRON"


def _kind_text(kind: str) -> str:
    return {"ONE_TIME": "a one-time refresh", "UPSTREAM": "an upstream-triggered workflow"}.get(kind, kind)


def _refresh_info(row: Any) -> RefreshInfo:
    return RefreshInfo(command_id=row.command_id, workflow_id=row.workflow_id, table=row.table_name,
                       nominal_time=row.nominal_time, trigger=row.trigger, status=row.status, attempt=row.attempt,
                       run_id=row.run_id, claimed_at=row.claimed_at, published_at=row.published_at,
                       started_at=row.started_at, ended_at=row.ended_at, duration_ms=row.duration_ms,
                       error=row.error, next_retry_at=row.next_retry_at, claimed_by=row.claimed_by,
                       static_partitions=dict(row.static_partitions or {}), refresh_trigger=row.refresh_trigger,
                       trigger_run=row.trigger_run,
                       hold_reasons=list(row.hold_reasons or []) if row.status == "HELD" else [],
                       held_since=row.held_since)
