"""``RegistryStore``: applies events to the job registry's tables (``registry_model``), idempotently.

``apply(event)`` runs in one transaction: an event id already in
``applied_events`` is a no-op; every other write is an insert that ignores
its natural key's conflict, or, for a run's status and times, one update
decided from the run's row as it is (read locked), so even an event replayed
without its id record (or out of order) lands where it belongs: a run's
status is the one of its newest event by event time, then sequence (a late
START never reopens a run that ended).

A run begins with its earliest status event when its JobCreatedEvent never
comes: OpenLineage producers may send RUNNING or COMPLETE for a run whose
START never does.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import pathlib
import sqlite3
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from lineagewire.db import insert_ignore, upgrade, upsert
from lineagewire.exceptions import ConfigError, MissingExtraError

try:
    import sqlalchemy as sa
    from sqlalchemy.engine import Connection, Engine
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("sqlalchemy", "audit", "The job registry") from exc

from lineagewire.schemas import TERMINAL_STATUSES, to_jsonable

from . import registry_model as m
from .registry_query import compute_run_diff

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_DB_URL", "RegistryStore", "engine_for", "open_read_only"]

#: the local SQLite file used when no --db-url is given
DEFAULT_DB_URL = "sqlite:///lineagewire-registry.db"


def _bad_url(db_url: str, exc: Exception) -> ConfigError:
    return ConfigError(f"--db-url {db_url!r}: {exc}; expected an SQLAlchemy URL such as sqlite:///registry.db or "
                       "postgresql+psycopg://user@host/db")


def engine_for(db_url: str) -> Engine:
    """An engine for ``db_url`` with the registry's tables created; ConfigError names a bad URL."""
    try:
        url = sa.engine.make_url(db_url)
        kwargs: dict[str, Any] = {}
        if url.get_backend_name() == "sqlite":
            kwargs["connect_args"] = {"timeout": 30}
        engine = sa.create_engine(url, **kwargs)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
        raise _bad_url(db_url, exc) from exc
    if engine.dialect.name == "sqlite":
        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            # WAL: the REST server and the CLI read while the consumer writes.
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
    upgrade(engine, m.STORE)
    return engine


def open_read_only(db_url: str, *, what: str = "registry", table: str = "jobs",
                   writer: str = "lineagewire consume registry") -> Engine:
    """An engine that only reads the existing database at ``db_url``: for read commands, which must neither create
    a database nor its tables (an unset or mistyped --db-url would otherwise answer "unknown" from a new, empty
    one). ConfigError says that the database (or its ``table``) does not exist, naming ``writer``, the command
    that makes it.

    SQLite: the file is opened with ``mode=ro`` and ``PRAGMA query_only``; PostgreSQL: every transaction is
    ``READ ONLY`` (``default_transaction_read_only``). Nothing here is specific to the registry (``what``,
    ``table`` and ``writer`` name the store), so other stores' read commands can use it too.
    """
    try:
        url = sa.engine.make_url(db_url)
        backend = url.get_backend_name()
    except sa.exc.ArgumentError as exc:
        raise _bad_url(db_url, exc) from exc
    shown = url.render_as_string(hide_password=True)
    missing = (f"the {what} database {shown} does not exist; expected one that {writer} has written "
               "(check --db-url)")
    try:
        engine = _read_only_engine(url, backend, missing)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
        raise _bad_url(db_url, exc) from exc
    try:
        present = sa.inspect(engine).has_table(table)
    except sa.exc.DBAPIError as exc:  # cannot connect, no such database, not a database file
        engine.dispose()
        first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc.orig).__name__
        text = missing if "does not exist" in first else f"cannot open the {what} database {shown}: {first}"
        raise ConfigError(text) from exc
    if not present:
        engine.dispose()
        raise ConfigError(f"the {what} database {shown} has no {table} table; expected one that {writer} has "
                          "written (check --db-url)")
    return engine


def _run_dataset(conn: Connection, run_id: str, ds_id: int, direction: str, d: dict[str, Any],
                 when: dt.datetime) -> None:
    """That the run read (``in``) or wrote (``out``) the dataset, and its schema and version as the run saw them."""
    insert_ignore(conn, m.run_datasets, [{"run_id": run_id, "dataset_id": ds_id, "direction": direction,
                                          "operation": d.get("operation"), "seen_at": when}])
    fields, version = d.get("fields"), (d.get("properties") or {}).get("version")
    if fields or version:
        insert_ignore(conn, m.dataset_states, [{
            "run_id": run_id, "dataset_id": ds_id, "direction": direction, "seen_at": when,
            "fields_json": json.dumps(to_jsonable(fields), sort_keys=True) if fields else None,
            "version": version}])


def _read_only_engine(url: sa.URL, backend: str, missing: str) -> Engine:
    """An engine that cannot write: SQLite's file opened ``mode=ro`` and ``query_only`` (ConfigError ``missing``
    when there is no such file), PostgreSQL's transactions ``READ ONLY``."""
    if backend == "sqlite":
        if not url.database or url.database == ":memory:" or not pathlib.Path(url.database).is_file():
            raise ConfigError(missing)
        ro = f"file:{quote(str(pathlib.Path(url.database).resolve()))}?mode=ro"

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(ro, uri=True, timeout=30, check_same_thread=False)
            conn.execute("PRAGMA query_only = 1")
            return conn

        return sa.create_engine(url, creator=connect)
    if backend == "postgresql":
        return sa.create_engine(url, pool_pre_ping=True,
                                connect_args={"options": "-c default_transaction_read_only=on"})
    return sa.create_engine(url)


#: the kinds of event that can change a run's diff (its status, lineage or spec)
_DIFFED = frozenset({"JobStatusChangedEvent", "ActionLineageEvent", "JobCreatedEvent"})
#: the kinds of event that say a run began, so that the earliest of them begins it when no JobCreatedEvent came
#: (an OpenLineage RUNNING or COMPLETE); lineage alone does not: a RefreshCommand's run id is a scheduler's record,
#: and the lineage of an OpenLineage JobEvent or DatasetEvent stands for a job's static lineage, not a run
_OF_A_RUN = frozenset({"JobStatusChangedEvent", "JobCreatedEvent"})


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    """A stored time as an aware UTC datetime (SQLite hands them back without their zone; they were stored in UTC)."""
    return value.replace(tzinfo=dt.UTC) if value is not None and value.tzinfo is None else value


def _current(conn: Connection, run_id: str) -> Any:
    """The run's row as the status and creation events change it (locked on PostgreSQL until the commit)."""
    r = m.runs.c
    return conn.execute(sa.select(r.created_at, r.started_at, r.ended_at, r.duration_ms, r.restarts, r.last_sequence,
                                  r.last_event_time).where(r.run_id == run_id).with_for_update()).one()


def _newest(cur: Any, h: dict[str, Any], **status: Any) -> dict[str, Any]:
    """``status`` (the run's status columns) with the event's order, when the event of header ``h`` is newer than
    the one the run's status is from (``cur``: ``_current``): by event time, then by sequence; a run from before
    event times were kept (``last_event_time`` None) by sequence alone. Else nothing to change."""
    last, when, seq = _aware(cur.last_event_time), h["event_time"], h["sequence"]
    newer = cur.last_sequence < seq if last is None else (last < when or (last == when and cur.last_sequence < seq))
    return {**status, "last_sequence": seq, "last_event_time": when} if newer else {}


def _began(cur: Any, ev: dict[str, Any]) -> dict[str, Any]:
    """The run's creation and start moved back to a status event ``ev`` earlier than every one before it: a run whose
    START never came begins with its first status event (a JobCreatedEvent sets its creation outright)."""
    out: dict[str, Any] = {}
    when, created, started = ev["transition_time"], _aware(cur.created_at), _aware(cur.started_at)
    if created is None or created > ev["header"]["event_time"]:
        out["created_at"] = ev["header"]["event_time"]
    if ev["new_status"] == "RUNNING" and (started is None or started > when):
        out["started_at"] = when
    return out


def _ended(ev: dict[str, Any]) -> dict[str, Any]:
    """The end and the error of a run from its newest status event ``ev``."""
    out: dict[str, Any] = {}
    err = ev.get("error")
    if err:
        out.update(error_class=err["error_class"], error_message=err["message"])
    if ev["new_status"] in TERMINAL_STATUSES:
        out.update(ended_at=ev["transition_time"], duration_ms=ev.get("duration_ms"))
    return out


def _duration(conn: Connection, run_id: str, cur: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The duration of an ended run whose end gave none (an OpenLineage run's COMPLETE), from its start (or
    creation) to its end, again whenever an earlier start becomes known (events out of order); a run whose only
    known time is its end keeps None. A duration the ending event gave is kept. ``values``: what the event changes
    in the run's row ``cur``."""
    ended = _aware(values.get("ended_at", cur.ended_at))
    if ended is None:
        return {}
    if "ended_at" in values:
        if values["duration_ms"] is not None:
            return {}
    elif not {"created_at", "started_at"} & values.keys() or _given_duration(conn, run_id, cur):
        return {}
    began = _aware(values.get("started_at", cur.started_at)) or _aware(values.get("created_at", cur.created_at))
    return {"duration_ms": int((ended - began).total_seconds() * 1000) if began and began < ended else None}


def _given_duration(conn: Connection, run_id: str, cur: Any) -> bool:
    """Whether the event that ended the run (``cur``) gave its duration."""
    if cur.duration_ms is None:
        return False
    t = m.transitions.c
    return conn.execute(sa.select(t.duration_ms).where(t.run_id == run_id, t.transition_time == cur.ended_at,
                                                       t.new_status.in_(TERMINAL_STATUSES))
                        .order_by(t.sequence.desc()).limit(1)).scalar() is not None


def _run_origin(h: dict[str, Any]) -> dict[str, Any]:
    """What a run's first event says of where it came from: its producer, parent and root parent runs (the root:
    contract v2, None in v1 events) and its schedule."""
    row: dict[str, Any] = {}
    for prefix, ref in (("parent", h.get("parent_run")), ("root_parent", h.get("root_parent_run"))):
        row.update({f"{prefix}_run_id": ref["run_id"] if ref else None,
                    f"{prefix}_job_namespace": ref["job_namespace"] if ref else None,
                    f"{prefix}_job_name": ref["job_name"] if ref else None})
    schedule, producer = h.get("schedule") or {}, h.get("producer") or {}
    return {**row, "workflow_id": schedule.get("workflow_id"), "nominal_time": schedule.get("nominal_time"),
            "producer": producer.get("name"), "producer_version": producer.get("version")}


def _spec_json(spec: dict[str, Any]) -> str:
    return json.dumps(to_jsonable(spec), sort_keys=True, indent=1)


class RegistryStore:
    """The registry in the database at ``db_url`` (created if missing)."""

    def __init__(self, db_url: str = DEFAULT_DB_URL, engine: Engine | None = None) -> None:
        self.db_url = db_url
        self.engine = engine or engine_for(db_url)
        self._job_ids: dict[tuple[str, str], int] = {}
        self._dataset_ids: dict[tuple[str, str], int] = {}
        self._appliers: dict[str, Callable[[Connection, dict[str, Any], int], None]] = {
            "JobCreatedEvent": self._created,
            "JobStatusChangedEvent": self._status,
            "ActionLineageEvent": self._action,
            "RefreshCommand": self._refresh,
            "CancelRefresh": lambda conn, event, job_id: None,
            "RefreshHeld": lambda conn, event, job_id: None,
        }

    def close(self) -> None:
        self.engine.dispose()

    def apply(self, event: dict[str, Any]) -> bool:
        """Apply one decoded event; False if it was applied before (nothing changes)."""
        h = event["header"]
        kind = h["schema_name"].rsplit(".", 1)[1]
        with self.engine.begin() as conn:
            seen = conn.execute(sa.select(m.applied_events.c.event_id)
                                .where(m.applied_events.c.event_id == h["event_id"])).first()
            if seen is not None:
                return False
            job_id = self._job(conn, h["job_namespace"], h["job_name"], h["event_time"])
            self._run(conn, h, job_id, kind)
            applier = self._appliers.get(kind)
            if applier is not None:
                applier(conn, event, job_id)
            insert_ignore(conn, m.run_events, [{"event_id": h["event_id"], "run_id": h["run_id"], "kind": kind,
                                                "sequence": h["sequence"], "event_time": h["event_time"],
                                                "body": json.dumps(to_jsonable(event), sort_keys=True)}])
            if kind in _DIFFED:
                self._diff(conn, h["run_id"], kind, event)
            conn.execute(m.applied_events.insert().values(event_id=h["event_id"], applied_at=dt.datetime.now(dt.UTC)))
        return True

    # -- identities -------------------------------------------------------------------------------

    def _job(self, conn: Connection, namespace: str, name: str, when: dt.datetime) -> int:
        key = (namespace, name)
        insert_ignore(conn, m.jobs, [{"namespace": namespace, "name": name, "first_seen": when, "last_seen": when}])
        conn.execute(m.jobs.update().where(m.jobs.c.namespace == namespace, m.jobs.c.name == name,
                                           m.jobs.c.last_seen < when).values(last_seen=when))
        if key not in self._job_ids:
            self._job_ids[key] = conn.execute(sa.select(m.jobs.c.id).where(
                m.jobs.c.namespace == namespace, m.jobs.c.name == name)).scalar_one()
        return self._job_ids[key]

    def _dataset(self, conn: Connection, ds: dict[str, Any], when: dt.datetime) -> int:
        key = (ds["namespace"], ds["name"])
        insert_ignore(conn, m.datasets, [{"namespace": key[0], "name": key[1], "format": ds.get("format"),
                                          "first_seen": when, "last_seen": when}])
        conn.execute(m.datasets.update().where(m.datasets.c.namespace == key[0], m.datasets.c.name == key[1],
                                               m.datasets.c.last_seen < when).values(last_seen=when))
        if key not in self._dataset_ids:
            self._dataset_ids[key] = conn.execute(sa.select(m.datasets.c.id).where(
                m.datasets.c.namespace == key[0], m.datasets.c.name == key[1])).scalar_one()
        ds_id = self._dataset_ids[key]
        for link in ds.get("symlinks") or []:
            insert_ignore(conn, m.dataset_aliases, [{"dataset_id": ds_id, "namespace": link["namespace"],
                                                     "name": link["name"], "type": link.get("type")}])
        return ds_id

    def _run(self, conn: Connection, h: dict[str, Any], job_id: int, kind: str) -> None:
        insert_ignore(conn, m.runs, [{"run_id": h["run_id"], "job_id": job_id, "last_sequence": -1, "restarts": 0,
                                      "created_at": h["event_time"] if kind in _OF_A_RUN else None,
                                      **_run_origin(h)}])

    # -- events -----------------------------------------------------------------------------------

    def _diff(self, conn: Connection, run_id: str, kind: str, event: dict[str, Any]) -> None:
        """Store the run's diff (``run_diff``) once it has ended: when its terminal status comes, and again when an
        event of its lineage or spec comes after that (events of a run may arrive out of order)."""
        if kind == "JobStatusChangedEvent" and event["new_status"] not in TERMINAL_STATUSES:
            return
        status = conn.execute(sa.select(m.runs.c.status).where(m.runs.c.run_id == run_id)).scalar()
        if status not in TERMINAL_STATUSES:
            return
        diff = compute_run_diff(conn, run_id)
        upsert(conn, m.run_diffs, [{"run_id": run_id, "against_run_id": diff["against"], "changed": diff["changed"],
                                    "diff_json": json.dumps(diff, sort_keys=True),
                                    "computed_at": dt.datetime.now(dt.UTC)}], keys=["run_id"])

    def _io(self, conn: Connection, run_id: str, job_id: int, when: dt.datetime, inputs: list[dict[str, Any]],
            outputs: list[dict[str, Any]], column_lineage: list[dict[str, Any]]) -> None:
        ins = [self._dataset(conn, d, when) for d in inputs]
        outs = [self._dataset(conn, d, when) for d in outputs]
        for direction, ids, items in (("in", ins, inputs), ("out", outs, outputs)):
            for ds_id, d in zip(ids, items, strict=True):
                _run_dataset(conn, run_id, ds_id, direction, d, when)
        for src in ins:
            for dst in outs:
                insert_ignore(conn, m.dataset_edges, [{"source_id": src, "sink_id": dst, "job_id": job_id,
                                                       "last_run_id": run_id, "first_seen": when, "last_seen": when}])
                e = m.dataset_edges.c
                conn.execute(m.dataset_edges.update().where(e.source_id == src, e.sink_id == dst, e.job_id == job_id,
                                                            e.last_seen < when)
                             .values(last_seen=when, last_run_id=run_id))
        self._column_edges(conn, run_id, job_id, when, column_lineage)

    def _column_edges(self, conn: Connection, run_id: str, job_id: int, when: dt.datetime,
                      column_lineage: list[dict[str, Any]]) -> None:
        """An edge per output column and column it comes from, with the kinds of its transformations."""
        for col in column_lineage:
            sink = self._dataset(conn, {"namespace": col["namespace"], "name": col["name"]}, when)
            for inp in col["inputs"]:
                source = self._dataset(conn, {"namespace": inp["namespace"], "name": inp["name"]}, when)
                kinds = sorted({f"{t['type']}/{t['subtype']}" for t in inp.get("transformations") or []})
                insert_ignore(conn, m.column_edges, [{"source_id": source, "source_field": inp["field"],
                                                      "sink_id": sink, "sink_field": col["field"], "job_id": job_id,
                                                      "transformation": ",".join(kinds) or None, "last_run_id": run_id,
                                                      "first_seen": when, "last_seen": when}])

    def _created(self, conn: Connection, ev: dict[str, Any], job_id: int) -> None:
        h = ev["header"]
        text = _spec_json(ev["spec"])
        digest = hashlib.sha256(text.encode()).hexdigest()
        insert_ignore(conn, m.specs, [{"job_id": job_id, "sha256": digest, "spec_json": text,
                                       "first_run_id": h["run_id"], "first_seen": h["event_time"]}])
        spec_id = conn.execute(sa.select(m.specs.c.id).where(m.specs.c.job_id == job_id,
                                                             m.specs.c.sha256 == digest)).scalar_one()
        cur = _current(conn, h["run_id"])
        values = {"spec_id": spec_id, "created_at": h["event_time"], **_newest(cur, h, status=ev["status"])}
        values.update(_duration(conn, h["run_id"], cur, values))  # a START after the end: the run's whole length
        conn.execute(m.runs.update().where(m.runs.c.run_id == h["run_id"]).values(**values))
        lin = ev["lineage"]
        self._io(conn, h["run_id"], job_id, h["event_time"], lin["sources"], lin["sinks"], lin["column_lineage"])
        self._changes(conn, h, "", lin["sinks"])

    def _status(self, conn: Connection, ev: dict[str, Any], job_id: int) -> None:
        h = ev["header"]
        err = ev.get("error")
        when = ev["transition_time"]
        insert_ignore(conn, m.transitions, [{
            "event_id": h["event_id"], "run_id": h["run_id"], "sequence": h["sequence"],
            "old_status": ev["old_status"], "new_status": ev["new_status"], "lifecycle_state": ev["lifecycle_state"],
            "transition_time": when, "restarts": ev["restarts"], "duration_ms": ev.get("duration_ms"),
            "error_class": err["error_class"] if err else None, "error_message": err["message"] if err else None,
            "error_stack": err["stack_trace"] if err else None}])
        cur = _current(conn, h["run_id"])
        values = _newest(cur, h, status=ev["new_status"], lifecycle_state=ev["lifecycle_state"])
        if values:  # the end and the error are the newest event's: a late RUNNING or FAILED leaves an ended run
            values.update(_ended(ev))
        values.update(_began(cur, ev))
        if ev["restarts"] > cur.restarts:
            values["restarts"] = ev["restarts"]
        values.update(_duration(conn, h["run_id"], cur, values))
        if values:
            conn.execute(m.runs.update().where(m.runs.c.run_id == h["run_id"]).values(**values))

    def _action(self, conn: Connection, ev: dict[str, Any], job_id: int) -> None:
        h = ev["header"]
        self._io(conn, h["run_id"], job_id, h["event_time"], ev["inputs"], ev["outputs"], ev["column_lineage"])
        self._changes(conn, h, ev["action_id"], ev["outputs"])

    def _changes(self, conn: Connection, h: dict[str, Any], action_id: str, outputs: list[dict[str, Any]]) -> None:
        """What the action did to each output itself (``lifecycle_change``, contract v2), and for a RENAME the
        dataset under its old name; nothing for outputs that only had rows written."""
        rows = []
        for d in outputs:
            change = d.get("lifecycle_change")
            if not change:
                continue
            before = d.get("previous_identifier")
            rows.append({"dataset_id": self._dataset(conn, d, h["event_time"]), "run_id": h["run_id"],
                         "action_id": action_id, "change": change, "sequence": h["sequence"],
                         "changed_at": h["event_time"],
                         "previous_id": self._dataset(conn, {"namespace": before["namespace"], "name": before["name"]},
                                                      h["event_time"]) if before else None})
        if rows:
            insert_ignore(conn, m.dataset_changes, rows)

    def _refresh(self, conn: Connection, ev: dict[str, Any], job_id: int) -> None:
        h = ev["header"]
        conn.execute(m.runs.update().where(m.runs.c.run_id == h["run_id"]).values(
            workflow_id=ev["workflow_id"], nominal_time=ev["nominal_time"]))
