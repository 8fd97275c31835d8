"""What the scheduler knows of its tables' inputs: each input's last write, its writer's health, breaking changes.

``InputsHandler`` is a ``Handler`` of the shared consumer runtime (``lineagewire.consumers.runtime``) that
follows ``lineage.jobs`` and keeps, in the scheduler's database (tables below, migration ``0002_inputs``):

* per dataset (namespace, name, and the ``db.table`` names of its ``TABLE`` symlinks): the last successful
  write (time, writer job and run), the last write attempt (its run, SUCCEEDED or FAILED), the schema of the
  last write and the **breaking change** it still carries: columns removed or retyped against the schema
  before (nested fields as ``s.x``; nullability is not a type), or the dataset dropped, truncated or renamed
  away. A later write clears each column that has its old type again, and a dropped or truncated dataset
  written again is whole again (what "breaking" means in ``consumers/alerting/breaking.py``);
* per job: its last run's status (Flink's names), error, time and job type;
* every successful write (dataset, run, action), with the time the scheduler learnt of it (``recorded_at``),
  for the ``trigger: upstream`` loop (``writes_after``); kept ``retention`` (7 days);
* what each refresh run read (runs with ``header.schedule``): datasets and, from the column lineage, columns.

Delivery: a database error is an ``OutputError`` (the runtime retries the same event with backoff, pausing
the partitions; the event is never dead-lettered); handling an event twice changes nothing (writes are keyed
by dataset, run and action; a dataset's last write, schema and a job's status move only forward in event
time). Undecodable events go to the runtime's dead-letter topic with the reason.

Reading: ``resolve_inputs`` (a table's query, its tables matched to datasets by symlink or name, plus what its
own refresh runs read), ``inputs_of`` (``InputState`` per input, with health) and ``writes_after``.
``InputTracker`` runs the handler in a background thread (consumer group ``lineagewire-scheduler-inputs``;
its lag is the runtime's ``lineagewire_consumer_lag`` metric, service ``scheduler-inputs``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from lineagewire.consumers.runtime import Handler, OutputError, Record, RetryPolicy
from lineagewire.db import insert_ignore
from lineagewire.schemas import kind_of, utcnow

from .holds import HEALTH_OF, conditions, when
from .sqlreads import QueryInputsError, normalize_table, query_reads, query_tables
from .store import Micros, metadata
from .tables import MaterializedTable
from .tracking import Tracker

if TYPE_CHECKING:
    from lineagewire.config import Settings
    from lineagewire.freshness import Promise, Promises

log = logging.getLogger(__name__)

__all__ = [
    "HEALTHS", "InputRef", "InputState", "InputTracker", "InputsHandler", "QueryInputsError", "Write",
    "dataset_key", "input_datasets", "input_jobs", "input_reads", "input_symlinks", "input_writes", "inputs_of",
    "next_breaking", "query_tables", "resolve_inputs", "writes_after",
]

#: an input's health, worst first (``InputState.health`` is the first that applies)
HEALTHS = ("failed", "running", "breaking", "stale", "never_written", "ok")
#: lifecycle changes that take the whole dataset from its readers until it is written again
_WHOLE_GONE = ("DROP", "TRUNCATE")
#: lifecycle changes that are no write of data (the dataset's schema may still change: ALTER)
_NOT_DATA = ("DROP", "TRUNCATE", "ALTER")
#: Flink statuses of a run that ended without success
_FAILED = frozenset({"FAILED", "CANCELED", "SUSPENDED"})
_TERMINAL = _FAILED | {"FINISHED"}
#: the breaking columns of a dropped, truncated or renamed-away dataset: all of them
WHOLE = "*"

input_datasets = sa.Table(
    "lw_input_datasets", metadata,
    sa.Column("key", sa.String(400), primary_key=True),
    sa.Column("namespace", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("last_write_at", Micros),
    sa.Column("writer_namespace", sa.String(200)),
    sa.Column("writer_job", sa.String(400)),
    sa.Column("writer_run", sa.String(200)),
    sa.Column("attempt_at", Micros),
    sa.Column("attempt_namespace", sa.String(200)),
    sa.Column("attempt_job", sa.String(400)),
    sa.Column("attempt_run", sa.String(200)),
    sa.Column("attempt_status", sa.String(16)),
    sa.Column("fields", sa.JSON),
    sa.Column("breaking", sa.JSON),
    sa.Column("schema_at", Micros),
    sa.Column("updated", Micros, nullable=False),
)

input_symlinks = sa.Table(
    "lw_input_symlinks", metadata,
    sa.Column("table_name", sa.String(400), primary_key=True),
    sa.Column("dataset_key", sa.String(400), primary_key=True),
    sa.Index("ix_lw_input_symlinks_dataset", "dataset_key"),
)

input_jobs = sa.Table(
    "lw_input_jobs", metadata,
    sa.Column("job_namespace", sa.String(200), primary_key=True),
    sa.Column("job_name", sa.String(400), primary_key=True),
    sa.Column("run_id", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("status_at", Micros, nullable=False),
    sa.Column("job_type", sa.String(16)),
)

input_writes = sa.Table(
    "lw_input_writes", metadata,
    sa.Column("dataset_key", sa.String(400), primary_key=True),
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("action_id", sa.String(200), primary_key=True),
    sa.Column("job_namespace", sa.String(200), nullable=False),
    sa.Column("job_name", sa.String(400), nullable=False),
    sa.Column("written_at", Micros, nullable=False),
    sa.Column("recorded_at", Micros, nullable=False),
    sa.Index("ix_lw_input_writes_recorded", "recorded_at"),
    sa.Index("ix_lw_input_writes_dataset", "dataset_key", "written_at"),
)

input_reads = sa.Table(
    "lw_input_reads", metadata,
    sa.Column("job_namespace", sa.String(200), primary_key=True),
    sa.Column("job_name", sa.String(400), primary_key=True),
    sa.Column("dataset_key", sa.String(400), primary_key=True),
    sa.Column("run_id", sa.String(200), nullable=False),
    sa.Column("columns", sa.JSON),
    sa.Column("complete", sa.Boolean, nullable=False),
    sa.Column("seen", Micros, nullable=False),
)

Run = tuple[str, str, str]  # (job_namespace, job_name, run_id)


def _fit(value: str, limit: int) -> str:
    """``value``, or when longer than its column its head and a hash: the same value always fits the same way."""
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()
    return value[:limit - 72] + "...sha256:" + digest


def dataset_key(namespace: str, name: str) -> str:
    """The database key of dataset ``(namespace, name)``."""
    return _fit(f"{namespace}\x1f{name}", 400)


def _flat(fields: Sequence[Mapping[str, Any]], prefix: str = "") -> dict[str, str]:
    """Column path -> type; a struct's own type is ``struct``, its fields are compared one by one."""
    out: dict[str, str] = {}
    for f in fields:
        path = prefix + f["name"].lower()
        out[path] = "struct" if f.get("fields") else str(f["type"]).lower()
        out.update(_flat(f.get("fields") or [], path + "."))
    return out


# -- breaking changes (pure) -------------------------------------------------------------------


def next_breaking(current: dict[str, Any] | None, old: dict[str, str] | None, new: dict[str, str] | None,
                  lifecycle: str | None, run: Run, at: dt.datetime) -> dict[str, Any] | None:
    """The breaking change a dataset carries after a write (pure).

    ``current``: the change it carried before (None: none); ``old``/``new``: its flattened schema before and
    after (None: not known); ``lifecycle``: the write's lifecycle change. The change remembers each removed
    or retyped column's old type (``old_types``) and is over for a column once it has that type again; a
    dropped or truncated dataset breaks every reader until it is written again (a renamed-away one too).
    """
    made = {"job_namespace": run[0], "job_name": run[1], "run_id": run[2], "at": at.isoformat()}
    if lifecycle in _WHOLE_GONE:
        return {"lifecycle": lifecycle, "old_types": {}, **made}
    if current is not None and current.get("lifecycle"):
        current = None  # written again: whole again
    expected, fresh = _expected_types(current, old, new)
    if not expected:
        return None
    if fresh or current is None:
        return {"lifecycle": None, "old_types": expected, **made}
    return {**current, "old_types": expected}


def _gone(old: dict[str, str] | None, new: dict[str, str] | None) -> dict[str, str]:
    """The columns of ``old`` that ``new`` lacks or types otherwise, with their old types."""
    if old is None or new is None:
        return {}
    return {c: t for c, t in old.items() if new.get(c) != t}


def _expected_types(current: dict[str, Any] | None, old: dict[str, str] | None,
                    new: dict[str, str] | None) -> tuple[dict[str, str], bool]:
    """The old types of the columns still removed or retyped after a write, and whether the write took away
    a column the change did not hold yet (it is then the write that broke them)."""
    expected: dict[str, str] = dict(current["old_types"]) if current else {}
    gone = _gone(old, new)
    fresh = any(c not in expected for c in gone)
    for col, typ in gone.items():
        expected.setdefault(col, typ)
    if new is not None:
        expected = {c: t for c, t in expected.items() if new.get(c) != t}
    return expected, fresh


def renamed_away(run: Run, at: dt.datetime, renamed_to: str) -> dict[str, Any]:
    """The breaking change of a dataset renamed to ``renamed_to``."""
    return {"lifecycle": "RENAME", "renamed_to": renamed_to, "old_types": {}, "job_namespace": run[0],
            "job_name": run[1], "run_id": run[2], "at": at.isoformat()}


def breaking_columns(breaking: Mapping[str, Any] | None, reads: frozenset[str] | None) -> tuple[str, ...]:
    """The columns of ``breaking`` a reader of ``reads`` reads (None: unknown, so every column); ``("*",)``
    for a dataset dropped, truncated or renamed away."""
    if not breaking:
        return ()
    if breaking.get("lifecycle"):
        return (WHOLE,)
    changed = sorted(breaking["old_types"])
    if reads is None:
        return tuple(changed)
    # reading a struct reads its fields, and reading a field reads into its struct
    return tuple(c for c in changed if any(r == c or c.startswith(r + ".") or r.startswith(c + ".") for r in reads))


def describe_breaking(breaking: Mapping[str, Any], fields: Mapping[str, str] | None) -> str:
    """``removed amount; retyped qty: int -> string`` or ``dropped``."""
    lifecycle = breaking.get("lifecycle")
    if lifecycle:
        if lifecycle == "RENAME":
            return f"renamed to {breaking.get('renamed_to')}"
        return {"DROP": "dropped", "TRUNCATE": "truncated"}.get(lifecycle, lifecycle.lower())
    now = fields or {}
    removed = [c for c in sorted(breaking["old_types"]) if c not in now]
    retyped = [f"{c}: {t} -> {now[c]}" for c, t in sorted(breaking["old_types"].items()) if c in now]
    parts = (["removed " + ", ".join(removed)] if removed else []) + (["retyped " + ", ".join(retyped)]
                                                                      if retyped else [])
    return "; ".join(parts)


# -- the handler ---------------------------------------------------------------------------


class InputsHandler(Handler):
    """Keeps the inputs' writes, writers' runs and breaking changes from ``lineage.jobs``."""

    name = "scheduler-inputs"
    decode_fields: ClassVar[Mapping[str, Sequence[str]] | None] = {
        "JobCreatedEvent": ["header", "status", "spec.job_type"],
        "JobStatusChangedEvent": ["header", "new_status", "error", "transition_time"],
        "ActionLineageEvent": ["header", "action_id", "action_status", "inputs.namespace", "inputs.name",
                               "inputs.symlinks", "outputs", "column_lineage", "lineage_complete"],
    }
    tick_interval: ClassVar[float | None] = 3600.0

    def __init__(self, engine: sa.Engine, *, clock: Callable[[], dt.datetime] = utcnow,
                 retention: dt.timedelta = dt.timedelta(days=7)) -> None:
        self.engine = engine
        self.clock = clock
        self.retention = retention
        self.applied = 0
        #: datasets whose row and symlinks are known to exist (inputs are seen far more often than written)
        self._known: set[str] = set()

    def handle(self, record: Record) -> int:
        event = record.event
        if event is None:
            return 0
        kind = kind_of(event)
        seen: set[str] = set()
        try:
            with self.engine.begin() as conn:
                if kind == "JobCreatedEvent":
                    done = _apply_created(conn, event)
                elif kind == "JobStatusChangedEvent":
                    done = _apply_status(conn, event)
                elif kind == "ActionLineageEvent":
                    now = self.clock()
                    done = _apply_action(conn, event, now, self._known, seen)
                    if done:
                        _restamp(conn, event, now, self.clock())
                else:
                    return 0
        except SQLAlchemyError as exc:
            # The database is down or locked, not the event: retried with backoff, never dead-lettered.
            raise OutputError(f"{record.where}: database error storing input state: "
                              f"{type(exc).__name__}: {exc}") from exc
        self._known |= seen
        self.applied += done
        return done

    def tick(self, now: float) -> int:
        cutoff = dt.datetime.fromtimestamp(now, dt.UTC) - self.retention
        try:
            with self.engine.begin() as conn:
                conn.execute(input_writes.delete().where(input_writes.c.written_at < cutoff))
        except SQLAlchemyError as exc:
            raise OutputError(f"database error pruning input writes older than {cutoff.isoformat()}: "
                              f"{type(exc).__name__}: {exc}") from exc
        return 0


def _run_of(event: Mapping[str, Any]) -> Run:
    h = event["header"]
    return (_fit(h["job_namespace"], 200), _fit(h["job_name"], 400), _fit(h["run_id"], 200))


def _apply_created(conn: sa.Connection, event: Mapping[str, Any]) -> int:
    spec = event.get("spec") or {}
    return _apply_job(conn, _run_of(event), event.get("status") or "CREATED", None, event["header"]["event_time"],
                      spec.get("job_type"))


def _apply_status(conn: sa.Connection, event: Mapping[str, Any]) -> int:
    err = event.get("error")
    error = f"{err['error_class']}: {err['message']}" if err else None
    return _apply_job(conn, _run_of(event), event["new_status"], error, event["transition_time"], None)


def _apply_job(conn: sa.Connection, run: Run, status: str, error: str | None, at: dt.datetime,
               job_type: str | None) -> int:
    """The job's last run is this one from ``at`` on; an older event (redelivered, replayed) changes nothing.
    One UPDATE when the job is known (the
    ordering is its WHERE), an INSERT when it is not."""
    j = input_jobs.c
    ended = j.status.in_(sorted(_TERMINAL))
    if status in _TERMINAL:
        newer = j.status_at <= at
    else:
        # at the same time, an end wins over a start
        newer = (j.status_at < at) | ((j.status_at == at) & ~ended)
    values: dict[str, Any] = {"run_id": run[2], "status": status[:16], "error": error, "status_at": at}
    if job_type is not None:
        values["job_type"] = job_type
    done = conn.execute(input_jobs.update().where((j.job_namespace == run[0]) & (j.job_name == run[1]) & newer)
                        .values(**values)).rowcount
    if done:
        return 1
    row = {"job_namespace": run[0], "job_name": run[1], "job_type": job_type, **values}
    return 1 if insert_ignore(conn, input_jobs, [row], returning=j.run_id) else 0


def _apply_action(conn: sa.Connection, event: Mapping[str, Any], now: dt.datetime, known: set[str],
                  seen: set[str]) -> int:
    run = _run_of(event)
    at: dt.datetime = event["header"]["event_time"]
    for ds in event.get("inputs") or []:
        _ensure_dataset(conn, ds, now, known, seen)
    done = 0
    for ds in event.get("outputs") or []:
        _ensure_dataset(conn, ds, now, known, seen)
        done += _apply_output(conn, ds, run, _fit(event["action_id"], 200), event["action_status"], at, now)
    if event["header"].get("schedule") is not None:
        _record_reads(conn, event, run, at)
    return done


def _restamp(conn: sa.Connection, event: Mapping[str, Any], provisional: dt.datetime, now: dt.datetime) -> None:
    """Stamp the writes this transaction stored with the time right before it commits: an upstream fire covers the
    writes ``recorded_at`` up to ``planner.SETTLE`` ago and moves its cursor past them, so a write must not be
    stamped earlier than it becomes visible (a stamp taken before a wait for the database's lock would be)."""
    w = input_writes.c
    conn.execute(input_writes.update()
                 .where(w.run_id == _fit(event["header"]["run_id"], 200), w.action_id == _fit(event["action_id"], 200),
                        w.recorded_at == provisional)
                 .values(recorded_at=now))


def _ensure_dataset(conn: sa.Connection, ds: Mapping[str, Any], now: dt.datetime, known: set[str],
                    seen: set[str]) -> str:
    """The dataset's key, its row and its symlinks' table names inserted when they are new."""
    key = dataset_key(ds["namespace"], ds["name"])
    if key in known:
        return key
    insert_ignore(conn, input_datasets, [{"key": key, "namespace": ds["namespace"], "name": ds["name"],
                                          "updated": now}])
    names = {normalize_table(s["name"]) for s in ds.get("symlinks") or [] if s.get("type", "TABLE") == "TABLE"}
    if "/" not in ds["name"] and ds["name"].count(".") == 1:
        names.add(ds["name"].lower())  # a JDBC or catalog dataset named db.table
    insert_ignore(conn, input_symlinks, [{"table_name": _fit(n, 400), "dataset_key": key} for n in sorted(names)])
    seen.add(key)
    return key


def _apply_output(conn: sa.Connection, ds: Mapping[str, Any], run: Run, action_id: str, status: str,
                  at: dt.datetime, now: dt.datetime) -> int:
    key = dataset_key(ds["namespace"], ds["name"])
    cur = conn.execute(sa.select(input_datasets).where(input_datasets.c.key == key).with_for_update()).one()
    values: dict[str, Any] = {}
    if cur.attempt_at is None or at >= cur.attempt_at:
        values.update(attempt_at=at, attempt_namespace=run[0], attempt_job=run[1], attempt_run=run[2],
                      attempt_status=status[:16])
    if status == "SUCCEEDED":
        values.update(_succeeded(conn, cur, ds, run, action_id, at, now))
    if not values:
        return 0
    conn.execute(input_datasets.update().where(input_datasets.c.key == key).values(updated=now, **values))
    return 1


def _succeeded(conn: sa.Connection, cur: Any, ds: Mapping[str, Any], run: Run, action_id: str, at: dt.datetime,
               now: dt.datetime) -> dict[str, Any]:
    """What a succeeded write changes of its dataset's row ``cur``: its last write, its schema."""
    values: dict[str, Any] = {}
    lifecycle = ds.get("lifecycle_change")
    if lifecycle not in _NOT_DATA:
        insert_ignore(conn, input_writes, [{"dataset_key": cur.key, "run_id": run[2], "action_id": action_id,
                                            "job_namespace": run[0], "job_name": run[1], "written_at": at,
                                            "recorded_at": now}])
        if cur.last_write_at is None or at >= cur.last_write_at:
            values.update(last_write_at=at, writer_namespace=run[0], writer_job=run[1], writer_run=run[2])
    if cur.schema_at is None or at > cur.schema_at:
        values.update(_schema(cur, ds, lifecycle, run, at))
    previous = ds.get("previous_identifier")
    if lifecycle == "RENAME" and previous:
        _rename_away(conn, previous, _display_name(ds), run, at, now)
    return values


def _display_name(ds: Mapping[str, Any]) -> str:
    """A dataset as a person names it: its catalog table, else its name."""
    tables = [s["name"] for s in ds.get("symlinks") or []]
    return tables[0] if tables else str(ds["name"])


def _schema(cur: Any, ds: Mapping[str, Any], lifecycle: str | None, run: Run, at: dt.datetime) -> dict[str, Any]:
    """The dataset's schema and breaking change after a write newer than the schema it has."""
    new = _flat(ds["fields"]) if ds.get("fields") else None
    kept = None if lifecycle in _WHOLE_GONE else (new if new is not None else cur.fields)
    return {"breaking": next_breaking(cur.breaking, cur.fields, new, lifecycle, run, at), "fields": kept,
            "schema_at": at}


def _rename_away(conn: sa.Connection, previous: Mapping[str, str], renamed_to: str, run: Run, at: dt.datetime,
                 now: dt.datetime) -> None:
    key = dataset_key(previous["namespace"], previous["name"])
    insert_ignore(conn, input_datasets, [{"key": key, "namespace": previous["namespace"],
                                          "name": previous["name"], "updated": now}])
    cur = conn.execute(sa.select(input_datasets.c.schema_at).where(input_datasets.c.key == key)).one()
    if cur.schema_at is None or at > cur.schema_at:
        conn.execute(input_datasets.update().where(input_datasets.c.key == key).values(
            breaking=renamed_away(run, at, renamed_to), schema_at=at, updated=now))


def _columns_read(event: Mapping[str, Any]) -> dict[str, set[str]]:
    """Input dataset key -> the fields the action's column lineage names of it."""
    cols: dict[str, set[str]] = {}
    for cl in event.get("column_lineage") or []:
        for f in cl.get("inputs") or []:
            cols.setdefault(dataset_key(f["namespace"], f["name"]), set()).add(f["field"].lower())
    return cols


def _record_reads(conn: sa.Connection, event: Mapping[str, Any], run: Run, at: dt.datetime) -> None:
    """What a refresh run read, merged over its actions; a newer run's reads replace an older run's."""
    cols = _columns_read(event)
    keys = {dataset_key(d["namespace"], d["name"]) for d in event.get("inputs") or []} | set(cols)
    complete = bool(event.get("lineage_complete", True))
    for key in sorted(keys):
        got = cols.get(key)
        _store_read(conn, {"job_namespace": run[0], "job_name": run[1], "dataset_key": key, "run_id": run[2],
                           "columns": sorted(got) if got is not None else None, "complete": complete, "seen": at})


def _store_read(conn: sa.Connection, row: dict[str, Any]) -> None:
    if insert_ignore(conn, input_reads, [row], returning=input_reads.c.dataset_key):
        return
    r = input_reads.c
    where = (r.job_namespace == row["job_namespace"]) & (r.job_name == row["job_name"]) & (
        r.dataset_key == row["dataset_key"])
    cur = conn.execute(sa.select(input_reads).where(where).with_for_update()).one()
    if cur.run_id == row["run_id"]:  # another action of the same run: what both read
        merged = None if cur.columns is None or row["columns"] is None else sorted({*cur.columns, *row["columns"]})
        conn.execute(input_reads.update().where(where).values(
            columns=merged, complete=cur.complete and row["complete"], seen=max(cur.seen, row["seen"])))
    elif row["seen"] > cur.seen:
        conn.execute(input_reads.update().where(where).values(
            run_id=row["run_id"], columns=row["columns"], complete=row["complete"], seen=row["seen"]))


# -- reading: a table's inputs -----------------------------------------------------------------


@dataclass(frozen=True)
class InputRef:
    """One input of a table: a dataset, or (``namespace`` "") a table name no dataset is known by yet."""

    namespace: str
    name: str
    #: the query's table name (``db.table``) that resolved to it; None when only the lineage names it
    table: str | None
    #: columns the table reads of it; None: unknown, which counts as every column
    columns: frozenset[str] | None
    from_query: bool = True
    from_lineage: bool = False

    @property
    def key(self) -> str:
        return dataset_key(self.namespace, self.name)

    @property
    def known(self) -> bool:
        return bool(self.namespace)


def resolve_inputs(table: MaterializedTable, conn: sa.Connection) -> list[InputRef]:
    """The inputs of ``table``: the tables its query reads (matched to datasets whose symlinks or name give
    that ``db.table``; a table no dataset names yet stays, with namespace ""), and the datasets its own
    refresh runs read (the newest run's reads, with their column lineage). A query sqlglot cannot read
    leaves the lineage's inputs (``query_tables`` is the validation that says why)."""
    try:
        reads = query_reads(table.query)
    except QueryInputsError as exc:
        log.debug("table %s: %s", table.identifier, exc)
        reads = {}
    own = normalize_table(table.identifier)
    refs: dict[str, InputRef] = {}
    for tname, cols in sorted(reads.items()):
        if tname == own:
            continue
        rows = conn.execute(sa.select(input_datasets.c.namespace, input_datasets.c.name).join(
            input_symlinks, input_symlinks.c.dataset_key == input_datasets.c.key).where(
            input_symlinks.c.table_name == tname)).all()
        if not rows:
            refs[dataset_key("", tname)] = InputRef("", tname, tname, cols)
        for r in rows:
            refs[dataset_key(r.namespace, r.name)] = InputRef(r.namespace, r.name, tname, cols)
    for ns, name, cols, complete in _lineage_reads(conn, table):
        key = dataset_key(ns, name)
        seen = refs.get(key)
        if seen is None:
            refs[key] = InputRef(ns, name, None, cols if complete else None, from_query=False, from_lineage=True)
        else:
            refs[key] = InputRef(ns, name, seen.table, _merge_columns(seen.columns, cols, complete),
                                 from_query=True, from_lineage=True)
    return sorted(refs.values(), key=lambda r: (r.table or r.name, r.namespace))


def _merge_columns(query: frozenset[str] | None, lineage: Iterable[str] | None,
                   complete: bool) -> frozenset[str] | None:
    """What the query says it reads, and what the refresh's column lineage says it read: unknown only when
    neither knows (incomplete lineage alone is not knowledge, but what it names is read)."""
    if query is None and (lineage is None or not complete):
        return None
    return frozenset(query or ()) | frozenset(lineage or ())


def _lineage_reads(conn: sa.Connection, table: MaterializedTable
                   ) -> list[tuple[str, str, frozenset[str] | None, bool]]:
    """(namespace, name, columns, complete) of what the table's newest refresh run read."""
    who = (input_reads.c.job_namespace == _fit(table.namespace, 200)) & (
        input_reads.c.job_name == _fit(table.job_name, 400))
    newest = conn.execute(sa.select(input_reads.c.run_id).where(who).order_by(input_reads.c.seen.desc())
                          .limit(1)).scalar()
    if newest is None:
        return []
    rows = conn.execute(sa.select(input_datasets.c.namespace, input_datasets.c.name, input_reads.c.columns,
                                  input_reads.c.complete).join(
        input_datasets, input_datasets.c.key == input_reads.c.dataset_key).where(
        who & (input_reads.c.run_id == newest))).all()
    return [(r.namespace, r.name, frozenset(r.columns) if r.columns is not None else None, bool(r.complete))
            for r in rows]


# -- reading: each input's state ---------------------------------------------------------------


@dataclass(frozen=True)
class InputState:
    """One input of a table as the scheduler knows it at ``now``, and its health.

    ``health``: ``failed`` (its writer's last run failed), ``running`` (it is running; never for a streaming
    writer, which runs by nature), ``breaking`` (its last writes removed or retyped a column the table reads),
    ``stale`` (older than its freshness promise), ``never_written`` (no successful write seen) or ``ok``.
    """

    dataset: tuple[str, str]
    table: str | None
    last_write_at: dt.datetime | None
    #: the run of the last successful write
    last_write_run: Run | None
    #: the writer job's last run (the failed or running one when it is), else the last write's run
    writer: Run | None
    writer_status: str | None  # FINISHED, FAILED, RUNNING or None (not known)
    writer_error: str | None
    writer_at: dt.datetime | None
    streaming_writer: bool
    breaking_columns: tuple[str, ...]
    #: the run that made the breaking change, and what it did ("removed amount")
    breaking_run: Run | None
    breaking_change: str
    promise: Promise | None
    health: str
    detail: str
    columns: frozenset[str] | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        """How a person names the input: its table name, else its dataset name."""
        return self.table or self.dataset[1]

    def as_json(self) -> dict[str, Any]:
        """The input as ``GET /tables/{id}/inputs`` answers it."""
        return {
            "dataset": {"namespace": self.dataset[0], "name": self.dataset[1]},
            "table": self.table,
            "last_write_at": _iso(self.last_write_at),
            "writer": _run_json(self.writer),
            "writer_status": self.writer_status,
            "writer_error": self.writer_error,
            "last_write_run": _run_json(self.last_write_run),
            "breaking_columns": list(self.breaking_columns),
            "breaking_run": _run_json(self.breaking_run),
            "freshness_seconds": self.promise.freshness if self.promise is not None else None,
            "columns_read": sorted(self.columns) if self.columns is not None else None,
            "health": self.health,
            "detail": self.detail,
        }


def _iso(t: dt.datetime | None) -> str | None:
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z") if t is not None else None


def _run_json(run: Run | None) -> dict[str, str] | None:
    return {"job_namespace": run[0], "job_name": run[1], "run_id": run[2]} if run else None


def writer_status(flink_status: str | None) -> str | None:
    """FINISHED, FAILED (failed, canceled, suspended) or RUNNING (anything not final) of a Flink status."""
    if flink_status is None or flink_status == "UNKNOWN":
        return None
    if flink_status == "FINISHED":
        return "FINISHED"
    return "FAILED" if flink_status in _FAILED else "RUNNING"


def inputs_of(conn: sa.Connection, table: MaterializedTable, now: dt.datetime, *,
                 promises: Promises | None = None, inputs: list[InputRef] | None = None) -> list[InputState]:
    """Each input of ``table`` (``resolve_inputs`` unless given) with its last write, writer and health at
    ``now``; ``promises``: the ``datasets:`` freshness promises (``lineagewire.freshness``)."""
    refs = resolve_inputs(table, conn) if inputs is None else inputs
    keys = [r.key for r in refs if r.known]
    rows = {r.key: r for r in conn.execute(sa.select(input_datasets).where(input_datasets.c.key.in_(keys)))}
    names: dict[str, list[str]] = {}
    for s in conn.execute(sa.select(input_symlinks).where(input_symlinks.c.dataset_key.in_(keys))):
        names.setdefault(s.dataset_key, []).append(s.table_name)
    jobs = _jobs_of(conn, rows.values())
    out = []
    for ref in refs:
        row = rows.get(ref.key)
        promise = None
        if promises is not None:
            promise = promises.promise_for(ref.namespace, ref.name, [*names.get(ref.key, ()), *(
                [ref.table] if ref.table else [])])
        out.append(_state(ref, row, jobs, promise, now))
    return out


def _jobs_of(conn: sa.Connection, rows: Iterable[Any]) -> dict[tuple[str, str], Any]:
    who = {w for w in (_writer_job(r) for r in rows) if w is not None}
    if not who:
        return {}
    cond = sa.or_(*((input_jobs.c.job_namespace == ns) & (input_jobs.c.job_name == job) for ns, job in who))
    return {(j.job_namespace, j.job_name): j for j in conn.execute(sa.select(input_jobs).where(cond))}


def _writer_job(row: Any) -> tuple[str, str] | None:
    """The job that writes the dataset: the one of its last write attempt, else of its last write."""
    if row.attempt_job is not None:
        return (row.attempt_namespace, row.attempt_job)
    if row.writer_job is not None:
        return (row.writer_namespace, row.writer_job)
    return None


def _state(ref: InputRef, row: Any, jobs: Mapping[tuple[str, str], Any], promise: Promise | None,
           now: dt.datetime) -> InputState:
    last_run: Run | None = None
    if row is not None and row.writer_run is not None:
        last_run = (row.writer_namespace, row.writer_job, row.writer_run)
    writer, status, error, status_at, streaming = _writer(row, jobs)
    broken: tuple[str, ...] = ()
    breaking_run: Run | None = None
    change = ""
    if row is not None and row.breaking:
        b = row.breaking
        broken = breaking_columns(b, ref.columns)
        breaking_run = (b["job_namespace"], b["job_name"], b["run_id"])
        change = describe_breaking(b, row.fields)
    state = InputState(dataset=(ref.namespace, ref.name), table=ref.table,
                       last_write_at=row.last_write_at if row is not None else None, last_write_run=last_run,
                       writer=writer, writer_status=status, writer_error=error, writer_at=status_at,
                       streaming_writer=streaming, breaking_columns=broken, breaking_run=breaking_run,
                       breaking_change=change, promise=promise, health="ok", detail="", columns=ref.columns)
    health, detail = _health(state, now)
    return InputState(**{**state.__dict__, "health": health, "detail": detail})


def _writer(row: Any, jobs: Mapping[tuple[str, str], Any]
            ) -> tuple[Run | None, str | None, str | None, dt.datetime | None, bool]:
    """(run, status, error, time of the status, streaming) of the dataset's writer: its job's last run when
    the scheduler saw that job's status, else its last write attempt."""
    who = _writer_job(row) if row is not None else None
    if who is None:
        return None, None, None, None, False
    job = jobs.get(who)
    if job is None:
        status = {"SUCCEEDED": "FINISHED", "FAILED": "FAILED"}.get(row.attempt_status or "")
        return (who[0], who[1], row.attempt_run or row.writer_run), status, None, row.attempt_at, False
    status = writer_status(job.status)
    error = None
    if status == "FAILED":
        error = job.error or job.status.lower()  # canceled or suspended, with no error of its own
    return ((job.job_namespace, job.job_name, job.run_id), status, error, job.status_at,
            job.job_type == "STREAMING")


def _health(s: InputState, now: dt.datetime) -> tuple[str, str]:
    """The input's health at ``now`` (its worst hold condition, whatever the table holds on) and why."""
    met = conditions(s, now)
    if met:
        condition, _run, detail = met[0]
        return HEALTH_OF[condition], detail
    if s.last_write_at is None:
        what = "no dataset with this table name seen yet" if not s.dataset[0] else "no successful write seen"
        return "never_written", f"{s.label}: never written ({what})"
    by = s.last_write_run[1] if s.last_write_run else "an unknown job"
    return "ok", f"{s.label}: written {when(s.last_write_at, now)} by {by}"


# -- reading: new writes, for trigger: upstream ---------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One successful write of an input: which dataset, by which run (the contract's ``RunRef``, as
    ``ScheduleRef.trigger_run`` takes it), when, and when the scheduler learnt of it."""

    dataset: tuple[str, str]
    run: dict[str, str]
    written_at: dt.datetime
    recorded_at: dt.datetime


def writes_after(conn: sa.Connection, table: MaterializedTable, after: dt.datetime | None, *,
                 inputs: list[InputRef] | None = None, limit: int = 1000) -> list[Write]:
    """Successful writes to any input of ``table`` the scheduler learnt of after ``after`` (``recorded_at``;
    None: all kept), oldest first. ``recorded_at`` is when this scheduler stored the write, so a write whose
    event arrived late is after a cursor taken before it arrived; the table's own refresh runs are left out."""
    refs = resolve_inputs(table, conn) if inputs is None else inputs
    keys = [r.key for r in refs if r.known]
    if not keys:
        return []
    w, d = input_writes, input_datasets
    cond = w.c.dataset_key.in_(keys) & ~((w.c.job_namespace == _fit(table.namespace, 200))
                                         & (w.c.job_name == _fit(table.job_name, 400)))
    if after is not None:
        cond &= w.c.recorded_at > after
    rows = conn.execute(sa.select(d.c.namespace, d.c.name, w.c.job_namespace, w.c.job_name, w.c.run_id,
                                  w.c.written_at, w.c.recorded_at).join(d, d.c.key == w.c.dataset_key)
                        .where(cond).order_by(w.c.recorded_at, w.c.written_at).limit(limit)).all()
    return [Write((r.namespace, r.name), {"job_namespace": r.job_namespace, "job_name": r.job_name,
                                          "run_id": r.run_id}, r.written_at, r.recorded_at) for r in rows]


# -- the tracker ---------------------------------------------------------------------------------


class InputTracker(Tracker):
    """Runs ``InputsHandler`` on ``ConsumerRuntime`` in a background thread (``tracking.Tracker``), and answers for
    its database.

    ``engine``: the scheduler's database, already upgraded (``EmbeddedWorkflowScheduler.open`` does it).
    """

    what = "input tracking"

    def __init__(self, settings: Settings, engine: sa.Engine, *, group_id: str = "lineagewire-scheduler-inputs",
                 metrics_port: int | None = None, retry: RetryPolicy | None = None,
                 consumer_config: dict[str, Any] | None = None, clock: Callable[[], dt.datetime] = utcnow,
                 retention: dt.timedelta = dt.timedelta(days=7)) -> None:
        super().__init__(settings, InputsHandler(engine, clock=clock, retention=retention), group_id=group_id,
                         thread_name="lineagewire-scheduler-inputs", metrics_port=metrics_port, retry=retry,
                         consumer_config=consumer_config)
        self.engine = engine

    # -- reads ------------------------------------------------------------------------------------

    def inputs_of(self, table: MaterializedTable, now: dt.datetime | None = None, *,
                  promises: Promises | None = None) -> list[InputState]:
        with self.engine.connect() as conn:
            return inputs_of(conn, table, now or utcnow(), promises=promises)

    def writes_after(self, table: MaterializedTable, after: dt.datetime | None) -> list[Write]:
        with self.engine.connect() as conn:
            return writes_after(conn, table, after)

    # -- state ------------------------------------------------------------------------------------

    @property
    def lag(self) -> int:
        """Messages of ``lineage.jobs`` not handled yet, over this member's partitions (the metric's sum)."""
        total = 0.0
        for metric in self.runtime.metrics.registry.collect():
            if metric.name == "lineagewire_consumer_lag":
                total += sum(s.value for s in metric.samples)
        return int(total)

