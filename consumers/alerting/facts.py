"""What the rules know beyond the event in hand: runs, each job's history, datasets, refreshes.

``Facts.observe(event)`` folds one event in and returns an ``Observation``:
the event plus what it means against what came before (the run's previous
status, whether its sequence number went backwards, the job's earlier
successful durations, output schema differences, the refresh it belongs to).
Rules read observations and facts and never change them, so rule logic is
pure and needs no database; the service saves ``Facts`` to the alert
database as JSON (``dump_dirty`` / ``load``) so baselines survive restarts.

Observing is idempotent: an event whose sequence number the run has already
seen returns None (a redelivery after a restart), so a replay adds no second
duration to a baseline and no second restart to a storm window. A run keeps
its highest and lowest sequence numbers and the gaps between them, the gaps
only within ``SEQ_WINDOW`` of the highest (at most ``MAX_GAPS``): bounded
however long a streaming run lives.

Events ingested from OpenLineage (``header.openlineage`` set) are numbered
otherwise: their sequence is the event time in microseconds x 1024 plus a few
bits, so consecutive events of a run are millions apart and gaps mean nothing.
For them a run keeps the ids of its last ``MAX_EVENT_IDS`` events (a
redelivered id returns None) and its highest sequence; an event below it is
out of order, which by that numbering is earlier in event time (ties go START,
RUNNING, OTHER, end). The cost per event does not depend on the gap, and a
late event is folded in as late rather than taken as seen.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from lineagewire.schemas import TERMINAL_STATUSES, kind_of

from .breaking import LIFECYCLE_BREAKING, Change, Reads, base_type
from .writes import FreshWrite, Writes

__all__ = ["Facts", "JobState", "Observation", "RefreshState", "RunState", "SchemaChange"]

#: successful durations kept per job (the longest baseline a rule may ask for)
MAX_HISTORY = 100
#: restart/failure times kept per job
MAX_RESTARTS = 1000
#: a terminal run is forgotten this long after its last event (late events of it are still ordered)
RUN_TTL = dt.timedelta(hours=6)
REFRESH_TTL = dt.timedelta(days=2)
#: a dataset's readers are those seen reading it this long ago at most; a change of a dataset is kept as long
#: (``breaking_change``'s ``window`` narrows the readers it classifies)
READER_TTL = dt.timedelta(days=30)
#: at most this many changes of one dataset wait for their readers or a compatible write (the oldest go first)
MAX_CHANGES = 20
#: sequence numbers of a run are tracked exactly this far below its highest one; an older number is taken as
#: seen (a redelivery after a restart is a second or two of events, never this many)
SEQ_WINDOW = 10_000
#: at most this many missing numbers (gaps) are remembered per run, the most recent ones
MAX_GAPS = 1_000
#: ingested (OpenLineage) events: the ids of a run's latest events kept to drop redeliveries (a producer's retry
#: or a replay after a restart is a second or two of a run's events, far fewer than this)
MAX_EVENT_IDS = 256

_REFRESH_STATUS = {"FINISHED": "COMPLETED", "FAILED": "FAILED", "CANCELED": "CANCELED", "SUSPENDED": "CANCELED"}


def _t(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def _s(when: dt.datetime | None) -> str | None:
    return when.isoformat() if when else None


@dataclass
class RunState:
    run_id: str
    namespace: str
    job: str
    created: dt.datetime
    last_seen: dt.datetime
    status: str | None = None
    restarts: int = 0
    #: the highest and lowest sequence numbers seen, and the numbers between them not seen (yet): a bounded
    #: window, not the set of every number, so a streaming run's 30k heartbeats keep a small row
    max_seq: int = -1
    min_seq: int = -1
    gaps: set[int] = field(default_factory=set)
    job_type: str = "BATCH"
    command_id: str | None = None
    #: names of rules that fired on this run (a clean run resolves them)
    flags: set[str] = field(default_factory=set)
    #: the partition its events come from ("topic[n]"): with several instances, only its owner checks and saves it
    partition: str | None = None
    #: its lineage so far: None (no action seen), "complete", or "incomplete" (an action's lineage was cut)
    lineage: str | None = None
    #: its events came from OpenLineage (``header.openlineage``): deduplicated by id (``event_ids``) and ordered by
    #: ``ol_seq``, the highest sequence of them; ``started``: its START (a JobCreatedEvent) was seen, so
    #: ``created`` is when it began (an OpenLineage run may have no START)
    ingested: bool = False
    event_ids: dict[str, None] = field(default_factory=dict)
    ol_seq: int = -1
    started: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def has_lifecycle(self) -> bool:
        """Does it have a status to end with? An ingested run with no status event (only OTHER events, or the
        static lineage of an OpenLineage JobEvent or DatasetEvent) never ends, and is not expected to."""
        return not self.ingested or self.status is not None

    def seen_ingested(self, event_id: str, seq: int) -> bool:
        """Was this ingested event folded in already? By its id among the latest ``MAX_EVENT_IDS``, or by its
        sequence equal to the highest (a sequence names one OpenLineage event of a run: its time, type and slot),
        so the run's latest event, its end, is never folded in twice however late the copy."""
        return event_id in self.event_ids or seq == self.ol_seq

    def add_ingested(self, event_id: str, seq: int) -> None:
        self.event_ids[event_id] = None
        if len(self.event_ids) > MAX_EVENT_IDS:
            del self.event_ids[next(iter(self.event_ids))]  # the oldest: a dict keeps insertion order
        self.ol_seq = max(self.ol_seq, seq)

    def seen(self, seq: int) -> bool:
        """Was ``seq`` folded in already? Numbers more than ``SEQ_WINDOW`` below the highest count as seen."""
        return self.min_seq <= seq <= self.max_seq and seq not in self.gaps

    def add_seq(self, seq: int) -> None:
        if self.max_seq < 0:
            self.min_seq = self.max_seq = seq
            return
        if seq > self.max_seq:
            self.gaps.update(range(max(self.max_seq + 1, seq - SEQ_WINDOW), seq))
            self.max_seq = seq
            if self.gaps:
                self.trim_gaps()
        elif seq < self.min_seq:
            # an earlier part of a run first seen midway: what lies between is still to come
            self.gaps.update(range(max(seq + 1, self.max_seq - SEQ_WINDOW), self.min_seq))
            self.min_seq = seq
            self.trim_gaps()
        else:
            self.gaps.discard(seq)

    def trim_gaps(self) -> None:
        floor = self.max_seq - SEQ_WINDOW
        if min(self.gaps, default=floor) < floor:
            self.gaps = {g for g in self.gaps if g >= floor}
        if len(self.gaps) > MAX_GAPS:
            self.gaps = set(sorted(self.gaps)[-MAX_GAPS:])

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "namespace": self.namespace, "job": self.job, "created": _s(self.created),
                "last_seen": _s(self.last_seen), "status": self.status, "restarts": self.restarts,
                "max_seq": self.max_seq, "min_seq": self.min_seq, "gaps": sorted(self.gaps), "job_type": self.job_type,
                "command_id": self.command_id, "flags": sorted(self.flags), "partition": self.partition,
                "lineage": self.lineage, "ingested": self.ingested, "event_ids": list(self.event_ids),
                "ol_seq": self.ol_seq, "started": self.started}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunState:
        run = cls(run_id=d["run_id"], namespace=d["namespace"], job=d["job"], created=_t(d["created"]),  # type: ignore[arg-type]
                  last_seen=_t(d["last_seen"]), status=d["status"], restarts=d["restarts"],  # type: ignore[arg-type]
                  max_seq=d["max_seq"], job_type=d["job_type"], command_id=d["command_id"], flags=set(d["flags"]),
                  partition=d.get("partition"), lineage=d.get("lineage"), ingested=d.get("ingested", False),
                  event_ids=dict.fromkeys(d.get("event_ids") or []), ol_seq=d.get("ol_seq", -1),
                  started=d.get("started", False))
        if "seqs" in d:  # a row saved before the window: every number seen
            seqs = set(d["seqs"])
            run.min_seq = min(seqs, default=-1)
            run.gaps = set(range(max(run.min_seq, run.max_seq - SEQ_WINDOW), run.max_seq)) - seqs
            if run.gaps:
                run.trim_gaps()
        else:
            run.min_seq, run.gaps = d["min_seq"], set(d["gaps"])
        return run


@dataclass
class JobState:
    namespace: str
    job: str
    tags: dict[str, str] = field(default_factory=dict)
    #: (run_id, duration_ms) of the latest successful runs, oldest first
    durations: deque[tuple[str, int]] = field(default_factory=lambda: deque(maxlen=MAX_HISTORY))
    #: epoch seconds of restarts and failed attempts, oldest first
    restarts: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_RESTARTS))
    tags_key: tuple[tuple[str, str], ...] = ()
    #: the partition of its runs' events (events are keyed by job)
    partition: str | None = None
    #: its latest run's id, status, when it got it and its error (a FAILED run's): what ``dataset_stale`` says of
    #: the writer of an input that is stale or failing
    last_run: str | None = None
    last_status: str | None = None
    last_at: dt.datetime | None = None
    last_error: str | None = None

    def set_tags(self, tags: dict[str, str]) -> None:
        self.tags = dict(tags)
        self.tags_key = tuple(sorted(self.tags.items()))

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "job": self.job, "tags": self.tags,
                "durations": [list(d) for d in self.durations], "restarts": list(self.restarts),
                "partition": self.partition, "last_run": self.last_run, "last_status": self.last_status,
                "last_at": _s(self.last_at), "last_error": self.last_error}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JobState:
        js = cls(d["namespace"], d["job"], partition=d.get("partition"), last_run=d.get("last_run"),
                 last_status=d.get("last_status"), last_at=_t(d.get("last_at")), last_error=d.get("last_error"))
        js.set_tags(d["tags"])
        js.durations.extend((r, int(ms)) for r, ms in d["durations"])
        js.restarts.extend(float(x) for x in d["restarts"])
        return js


@dataclass
class RefreshState:
    """One scheduled refresh (a RefreshCommand id), its latest attempt and status."""

    command_id: str
    namespace: str
    job: str
    table: str
    nominal_time: dt.datetime
    attempt: int = 1
    status: str = "PENDING"  # PENDING, RUNNING, COMPLETED, FAILED, CANCELED
    deadline: dt.datetime | None = None
    error: str | None = None
    updated: dt.datetime | None = None
    flags: set[str] = field(default_factory=set)
    #: the partition of its runs' events once one was read, else of its command
    partition: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"command_id": self.command_id, "namespace": self.namespace, "job": self.job, "table": self.table,
                "nominal_time": _s(self.nominal_time), "attempt": self.attempt, "status": self.status,
                "deadline": _s(self.deadline), "error": self.error, "updated": _s(self.updated),
                "flags": sorted(self.flags), "partition": self.partition}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RefreshState:
        return cls(command_id=d["command_id"], namespace=d["namespace"], job=d["job"], table=d["table"],
                   nominal_time=_t(d["nominal_time"]), attempt=d["attempt"], status=d["status"],  # type: ignore[arg-type]
                   deadline=_t(d["deadline"]), error=d["error"], updated=_t(d["updated"]), flags=set(d["flags"]),
                   partition=d.get("partition"))


@dataclass(frozen=True)
class SchemaChange:
    """How an output dataset's schema differs from the one its previous run wrote."""

    dataset: str
    added: list[str]
    removed: list[str]
    retyped: list[str]  # "col: old -> new"

    def describe(self) -> str:
        parts = []
        if self.added:
            parts.append("added " + ", ".join(self.added))
        if self.removed:
            parts.append("removed " + ", ".join(self.removed))
        if self.retyped:
            parts.append("retyped " + ", ".join(self.retyped))
        return "; ".join(parts)


@dataclass
class Observation:
    """One event and what it means given the facts before it."""

    event: dict[str, Any]
    kind: str
    namespace: str
    job: str
    at: dt.datetime
    job_state: JobState
    run: RunState | None
    previous_status: str | None = None
    out_of_order: bool = False
    #: for a FINISHED run: its duration and the job's earlier successful durations (oldest first)
    duration_ms: int | None = None
    history: list[int] = field(default_factory=list)
    schema_changes: list[SchemaChange] = field(default_factory=list)
    #: outputs whose schema is the same as the one their previous run wrote
    unchanged_outputs: list[str] = field(default_factory=list)
    refresh: RefreshState | None = None
    #: changes this event made final (its writer run ended) that can break readers, with their dataset's readers
    impacts: list[tuple[Change, list[Reads]]] = field(default_factory=list)
    #: for a FINISHED run: the final changes of the datasets its job read, with their readers now (its lineage
    #: may no longer read what the change took away)
    rechecks: list[tuple[Change, list[Reads]]] = field(default_factory=list)
    #: final changes this event's writes made compatible again (the columns are back, the table is written again)
    restored: list[Change] = field(default_factory=list)
    #: datasets this event made fresh: written by a run that ended FINISHED (``writes.py``)
    fresh_writes: list[FreshWrite] = field(default_factory=list)

    @property
    def tags(self) -> dict[str, str]:
        return self.job_state.tags

    @property
    def ingested(self) -> bool:
        """The event came from another tool's OpenLineage (``lineagewire ingest openlineage``)."""
        return self.event["header"].get("openlineage") is not None

    @property
    def new_status(self) -> str | None:
        return self.event.get("new_status") if self.kind == "JobStatusChangedEvent" else None


def _row_key(key: str) -> str:
    """The database key of a reader or change row: the key itself, or its hash when longer than the key column
    (500 characters; a long path and a job name together can be). The row's value names what it is about."""
    return key if len(key) <= 400 else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _reader_key(dataset: str, who: tuple[str, str]) -> str:
    return f"{dataset}\x1f{who[0]}\x1f{who[1]}"


def reader_row_prefix(dataset: str) -> str:
    """The database keys of ``dataset``'s reader rows start with this (``AlertStore.shared_facts``)."""
    return _row_key(dataset) + "\x1f"


def change_row_key(dataset: str) -> str:
    return _row_key(dataset)


def _flatten(fields: list[dict[str, Any]], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for f in fields:
        name = prefix + f["name"]
        out[name] = f["type"] + ("" if f.get("nullable", True) else " not null")
        if f.get("fields"):
            out.update(_flatten(f["fields"], name + "."))
    return out


def _schema_change(dataset: str, old: dict[str, str], new: dict[str, str]) -> SchemaChange:
    """How the flattened fields ``new`` differ from ``old`` (a change of nullability is a retype here)."""
    return SchemaChange(dataset=dataset, added=sorted(set(new) - set(old)), removed=sorted(set(old) - set(new)),
                        retyped=sorted(f"{c}: {old[c]} -> {new[c]}" for c in set(old) & set(new) if old[c] != new[c]))


def _fields_read(event: dict[str, Any]) -> dict[str, set[str]]:
    """Dataset -> the input fields an action's column lineage names of it."""
    fields: dict[str, set[str]] = {}
    for cl in event.get("column_lineage") or []:
        for f in cl.get("inputs") or []:
            fields.setdefault(f"{f['namespace']}/{f['name']}", set()).add(f["field"])
    return fields


def _change_made(made: Change, ds: dict[str, Any], fields: dict[str, str] | None, old: dict[str, str] | None,
                 prev: tuple[str, dict[str, str]] | None) -> Change | None:
    """The change a write of output ``ds`` made that can break its readers, as ``made`` (who made it, when), or
    None: ``fields`` are the flattened fields it wrote (None: it named none), ``old`` the schema before this run,
    ``prev`` the dataset's last known write (this run's included)."""
    life = ds.get("lifecycle_change")
    if life == "RENAME":
        was = ds.get("previous_identifier")
        if not was:
            return None
        return replace(made, dataset=f"{was['namespace']}/{was['name']}", lifecycle=life, renamed_to=made.dataset)
    if life in LIFECYCLE_BREAKING:
        schema = old if old is not None else (prev[1] if prev is not None else {})
        return replace(made, lifecycle=life, old_types=dict(fields or schema))
    if fields is None or old is None:
        return None
    return _column_change(made, old, fields)


def _column_change(made: Change, old: dict[str, str], new: dict[str, str]) -> Change | None:
    """``made`` with the columns of ``old`` that ``new`` removed or retyped (nullability aside), or None: added
    columns break no reader."""
    removed = tuple(sorted(set(old) - set(new)))
    retyped = tuple(sorted(f"{c}: {base_type(old[c])} -> {base_type(new[c])}"
                           for c in set(old) & set(new) if base_type(old[c]) != base_type(new[c])))
    if not (removed or retyped):
        return None
    gone = set(removed) | {r.split(": ", 1)[0] for r in retyped}
    return replace(made, removed=removed, retyped=retyped, old_types={c: old[c] for c in sorted(gone)})


def _arrival(run: RunState, h: dict[str, Any], at: dt.datetime) -> bool | None:
    """None when the run has folded in the event of header ``h`` already, else whether it is out of order (see
    the module docstring: the emitter's events by sequence number, ingested ones by id and event time)."""
    seq = h["sequence"]
    if h.get("openlineage") is None:
        return None if run.seen(seq) else seq < run.max_seq
    if run.seen_ingested(h["event_id"], seq):
        return None
    run.ingested = True
    run.created = min(run.created, at)  # ordered by event time: it began at its earliest event, not its first read
    return seq < run.ol_seq


def _add_arrival(run: RunState, h: dict[str, Any]) -> None:
    if h.get("openlineage") is None:
        run.add_seq(h["sequence"])
    else:
        run.add_ingested(h["event_id"], h["sequence"])


class Facts:
    """Runs, jobs, datasets and refreshes, folded from events; see the module docstring."""

    def __init__(self) -> None:
        self.runs: dict[str, RunState] = {}
        self.jobs: dict[tuple[str, str], JobState] = {}
        self.datasets: dict[str, tuple[str, dict[str, str]]] = {}  # "ns/name" -> (run_id, flattened fields)
        self.refreshes: dict[str, RefreshState] = {}
        #: dataset ("ns/name") -> reader job (ns, name) -> what its latest run read of it
        self.readers: dict[str, dict[tuple[str, str], Reads]] = {}
        #: dataset -> its changes that can break readers, oldest first, until a compatible write or READER_TTL
        self.changes: dict[str, list[Change]] = {}
        #: indexes of the two above: job -> datasets it reads; writer run -> datasets it changed (not final yet)
        self._reads_of: dict[tuple[str, str], set[str]] = {}
        self._changed_by: dict[str, set[str]] = {}
        self._dirty: set[tuple[str, str]] = set()
        #: each dataset's last successful write (freshness promises, ``dataset_stale``)
        self.writes = Writes()
        #: when the clock's rules first looked (a promise of a dataset never written counts from then)
        self.started: dt.datetime | None = None
        #: the partitions ("topic[n]") this instance owns; None: all of them (one instance, or not assigned yet).
        #: Runs, jobs and refreshes of other partitions are neither checked by the clock's rules nor saved.
        self.owned: set[str] | None = None

    # -- ownership (several instances) -----------------------------------------------------------

    def mine(self, fact: RunState | JobState | RefreshState | None) -> bool:
        """Is ``fact`` of a partition this instance owns (or of no known partition: a row from before)?"""
        return fact is not None and (self.owned is None or fact.partition is None or fact.partition in self.owned)

    def view(self) -> Facts:
        """What the clock's rules look at: everything, or with ``owned`` the runs and refreshes of owned partitions
        (another instance's runs end where this one never sees it)."""
        if self.owned is None:
            return self
        out = Facts()
        out.jobs, out.datasets, out.started = self.jobs, self.datasets, self.started
        out.readers, out._reads_of = self.readers, self._reads_of
        out.writes = self.writes.shared(self.owned)
        out.runs = {k: r for k, r in self.runs.items() if self.mine(r)}
        out.refreshes = {k: r for k, r in self.refreshes.items() if self.mine(r)}
        return out

    def drop(self, partitions: set[str]) -> None:
        """Forget the runs, jobs and refreshes of ``partitions`` (revoked: their new owner has them), unsaved
        changes included (the caller saved what it had first)."""
        for rid in [k for k, r in self.runs.items() if r.partition in partitions]:
            self.forget("run", rid)
        for ns, name in [k for k, j in self.jobs.items() if j.partition in partitions]:
            self.forget("job", f"{ns}\x1f{name}")
        for cid in [k for k, r in self.refreshes.items() if r.partition in partitions]:
            self.forget("refresh", cid)
        self.writes.drop(partitions)

    def forget(self, kind: str, key: str) -> None:
        """Drop one run, job (``ns\x1fname``) or refresh from memory, and its unsaved change (not a deletion)."""
        if kind == "run":
            self.runs.pop(key, None)
        elif kind == "job":
            ns, _, name = key.partition("\x1f")
            self.jobs.pop((ns, name), None)
        elif kind == "refresh":
            self.refreshes.pop(key, None)
        self._dirty.discard((kind, key))

    # -- folding events --------------------------------------------------------------------------

    def job(self, namespace: str, job: str) -> JobState:
        js = self.jobs.get((namespace, job))
        if js is None:
            js = self.jobs[(namespace, job)] = JobState(namespace, job)
        return js

    def observe(self, event: dict[str, Any], partition: str | None = None) -> Observation | None:
        """Fold ``event`` (read from ``partition``, when known) in; None when the run has folded it in already (a
        redelivery: the same sequence number, or for an ingested event the same id)."""
        h = event["header"]
        kind = kind_of(event)
        at = event.get("transition_time") or h["event_time"]
        js = self.job(h["job_namespace"], h["job_name"])
        if kind == "RefreshCommand":
            return self._observe_command(event, js, at, partition)
        if kind in ("CancelRefresh", "RefreshHeld"):
            return Observation(event, kind, h["job_namespace"], h["job_name"], at, js, None)
        return self._observe_run(event, kind, js, at, partition)

    def _observe_run(self, event: dict[str, Any], kind: str, js: JobState, at: dt.datetime,
                     partition: str | None) -> Observation | None:
        """Fold in an event of a run (not a refresh command); None for an event it has folded in already."""
        h = event["header"]
        ns, name, run_id = h["job_namespace"], h["job_name"], h["run_id"]
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunState(run_id, ns, name, created=at, last_seen=at)
        late = _arrival(run, h, at)
        if late is None:
            return None
        if partition is not None:
            run.partition = js.partition = partition
        obs = Observation(event, kind, ns, name, at, js, run, previous_status=run.status, out_of_order=late)
        _add_arrival(run, h)
        run.last_seen = max(run.last_seen, at)
        self._dirty.add(("run", run_id))
        self._dirty.add(("job", f"{ns}\x1f{name}"))
        sched = h.get("schedule")
        if kind == "JobCreatedEvent":
            self._observe_created(event, at, run, js)
        elif kind == "JobStatusChangedEvent" and not obs.out_of_order:
            self._observe_status(event, obs, run, js)
            if run.terminal:
                self._settle(obs, run)
        elif kind == "ActionLineageEvent":
            self._observe_action(event, obs, run, js)
        if sched:
            obs.refresh = self._observe_schedule(sched, obs, run)
        return obs

    def _observe_created(self, event: dict[str, Any], at: dt.datetime, run: RunState, js: JobState) -> None:
        """The job's tags and the run's type from its spec; a JobCreatedEvent read after the run's later events
        still dates its start and leaves their status."""
        spec = event["spec"]
        js.set_tags(spec.get("tags") or {})
        # an OpenLineage START read after its run's later events: the job keeps their status
        if not (run.ingested and run.status is not None):
            self._note_job_run(js, run, event.get("status") or "CREATED", at)
        self._observe_sinks(event, at, run)
        run.job_type = spec.get("job_type") or "BATCH"
        run.created = min(run.created, at)
        run.started = True
        if run.status is None:
            run.status = event.get("status") or "CREATED"

    def _observe_sinks(self, event: dict[str, Any], at: dt.datetime, run: RunState) -> None:
        """Sinks declared at creation are written by the run (a streaming query's, a job that names them)."""
        for ds in (event.get("lineage") or {}).get("sinks") or []:
            self.writes.wrote(ds, (run.namespace, run.job), run.run_id, at, finished=False, partition=run.partition)

    def _observe_action(self, event: dict[str, Any], obs: Observation, run: RunState, js: JobState) -> None:
        """An action's lineage: what it read, its outputs' schemas, and the changes its writes made."""
        self._observe_reads(event, obs, run, js)
        self._observe_writes(event, obs, run)
        before = {f"{ds['namespace']}/{ds['name']}": self.datasets.get(f"{ds['namespace']}/{ds['name']}")
                  for ds in event.get("outputs") or []}
        obs.schema_changes, obs.unchanged_outputs = self._observe_outputs(event, run.run_id)
        self._observe_changes(event, obs, run, js, before)
        if run.terminal:  # lineage that came after its run's end (a slow extraction): final at once
            self._settle_changes(obs, run)

    def _observe_status(self, event: dict[str, Any], obs: Observation, run: RunState, js: JobState) -> None:
        new = event["new_status"]
        restarts = int(event.get("restarts") or 0)
        extra = max(restarts - run.restarts, 0)
        if new == "RESTARTING" and extra == 0:
            extra = 1
        if new == "FAILED":
            extra += 1  # a failed attempt counts towards a storm too
        when = obs.at.timestamp()
        js.restarts.extend([when] * extra)
        run.restarts = max(run.restarts, restarts)
        run.status = new
        self._note_job_run(js, run, new, obs.at, event.get("error"))
        if new == "FINISHED":
            self._observe_duration(event, obs, run, js)
        if run.terminal:
            obs.fresh_writes += self.writes.ended(run.run_id, (run.namespace, run.job), new)

    @staticmethod
    def _note_job_run(js: JobState, run: RunState, status: str, at: dt.datetime,
                      error: dict[str, Any] | None = None) -> None:
        """The job's latest run is this one (unless an earlier-started run's late event): its status and error."""
        if js.last_run not in (None, run.run_id) and js.last_at is not None and run.created < js.last_at:
            return
        js.last_run, js.last_status, js.last_at = run.run_id, status, at
        js.last_error = f"{error['error_class']}: {error['message']}" if error else None

    def _observe_writes(self, event: dict[str, Any], obs: Observation, run: RunState) -> None:
        """The outputs of a successful action are pending with its run (counted once it ends FINISHED), or count
        at once."""
        if event.get("action_status") == "FAILED":
            return
        # a streaming run never finishes: each micro-batch's write counts at once
        done = run.status == "FINISHED" or run.job_type == "STREAMING"
        for ds in event.get("outputs") or []:
            fresh = self.writes.wrote(ds, (run.namespace, run.job), run.run_id, obs.at, finished=done,
                                      partition=run.partition)
            if fresh is not None:
                obs.fresh_writes.append(fresh)

    def reads_of(self, job: tuple[str, str]) -> set[str]:
        """The datasets ("ns/name") job ``(namespace, name)`` was seen reading (within ``READER_TTL``)."""
        return set(self._reads_of.get(job, set()))

    def _observe_duration(self, event: dict[str, Any], obs: Observation, run: RunState, js: JobState) -> None:
        """A successful run's duration (from its start when the event has none), against the job's earlier
        successful ones, and added to them once."""
        ms = event.get("duration_ms")
        if ms is None and run.ingested and not run.started:
            return  # an OpenLineage run whose START never came: when it began is unknown, so is its duration
        if ms is None:
            ms = int((obs.at - run.created).total_seconds() * 1000)
        obs.duration_ms = int(ms)
        obs.history = [d for r, d in js.durations if r != run.run_id]
        if all(r != run.run_id for r, _ in js.durations):
            js.durations.append((run.run_id, int(ms)))

    def _observe_outputs(self, event: dict[str, Any], run_id: str) -> tuple[list[SchemaChange], list[str]]:
        changes, same = [], []
        for ds in event.get("outputs") or []:
            if not ds.get("fields"):
                continue
            key = f"{ds['namespace']}/{ds['name']}"
            fields = _flatten(ds["fields"])
            prev = self.datasets.get(key)
            if prev is not None and prev[0] != run_id:  # against the previous run's write, not this run's own
                if prev[1] != fields:
                    changes.append(_schema_change(key, prev[1], fields))
                else:
                    same.append(key)
            self.datasets[key] = (run_id, fields)
            self._dirty.add(("dataset", key))
        return changes, same

    # -- readers and breaking changes (``breaking_change``) ------------------------------------------

    def _observe_reads(self, event: dict[str, Any], obs: Observation, run: RunState, js: JobState) -> None:
        """Record what this action read of each input: the input fields of its column lineage, or the whole
        dataset when no column lineage names its fields (an action without outputs)."""
        complete = bool(event.get("lineage_complete", True))
        run.lineage = "incomplete" if not complete or run.lineage == "incomplete" else "complete"
        fields = _fields_read(event)
        # A part of split column lineage carries every input but only some outputs' lineage: an input it does not
        # name may be named by another part, so it reads no column here rather than the whole dataset.
        split = int(event.get("parts") or 1) > 1
        for ds in event.get("inputs") or []:
            key = f"{ds['namespace']}/{ds['name']}"
            cols = fields.get(key)
            if cols is None and split:
                cols = set()
            self._add_reads(key, Reads(obs.namespace, obs.job, run.run_id,
                                       frozenset(cols) if cols is not None else None, complete, obs.at,
                                       dict(js.tags)))

    def _add_reads(self, key: str, reads: Reads) -> None:
        """``reads`` is what its job reads of dataset ``key`` now: with what earlier actions of the same run read,
        in place of what an earlier run read."""
        who = (reads.namespace, reads.job)
        known = self.readers.setdefault(key, {})
        old = known.get(who)
        known[who] = old.merged(reads) if old is not None and old.run_id == reads.run_id else reads
        self._reads_of.setdefault(who, set()).add(key)
        self._dirty.add(("reader", _reader_key(key, who)))

    def _observe_changes(self, event: dict[str, Any], obs: Observation, run: RunState, js: JobState,
                         before: dict[str, tuple[str, dict[str, str]] | None]) -> None:
        """Changes of this action's outputs that can break readers (kept until the run ends: see ``_settle``),
        and earlier changes its writes make compatible again."""
        for ds in event.get("outputs") or []:
            key = f"{ds['namespace']}/{ds['name']}"
            life = ds.get("lifecycle_change")
            fields = _flatten(ds["fields"]) if ds.get("fields") else None
            prev = before.get(key)
            # the schema before this run: what an earlier run wrote, or what a table this run dropped had
            old = prev[1] if prev is not None and prev[0] != run.run_id else None
            dropped = self._restore_changes(key, fields, life, obs, run)
            if dropped is not None:
                old = dropped  # dropped and created again by this run: only its columns may have changed
            made = Change(key, obs.namespace, obs.job, run.run_id, obs.at, dict(js.tags))
            change = _change_made(made, ds, fields, old, prev)
            if change is not None and not (run.ingested and self._made_final(change)):
                self._add_change(change)

    def _made_final(self, change: Change) -> bool:
        """Did ``change``'s run make the same change final already? Every event of an OpenLineage run repeats its
        outputs and their lifecycle change (a DROP on its START and its COMPLETE): reported once, at the end."""
        return any(c.settled and c.writer_run == change.writer_run and c.ident == change.ident
                   for c in self.changes.get(change.dataset, []))

    def _restore_changes(self, key: str, fields: dict[str, str] | None, life: str | None, obs: Observation,
                         run: RunState) -> dict[str, str] | None:
        """Forget the changes of ``key`` that this write (its ``fields`` and ``life``cycle change) makes compatible
        again; final ones are reported as restored. Returns the columns the table had when this run dropped it,
        if it did: a table a run drops and writes again is no change but of its columns."""
        kept: list[Change] = []
        dropped: dict[str, str] | None = None
        for c in self.changes.get(key, []):
            if not c.restored_by(fields, life):
                kept.append(c)
            elif c.settled:
                obs.restored.append(c)
            elif c.writer_run == run.run_id and c.lifecycle == "DROP":
                dropped = c.old_types
        self._set_changes(key, kept)
        return dropped

    def _add_change(self, change: Change) -> None:
        held = [c for c in self.changes.get(change.dataset, [])
                if not (c.writer_run == change.writer_run and not c.settled and c.ident == change.ident)]
        self._set_changes(change.dataset, [*held, change][-MAX_CHANGES:])
        self._changed_by.setdefault(change.writer_run, set()).add(change.dataset)

    def _set_changes(self, dataset: str, changes: list[Change]) -> None:
        if changes == self.changes.get(dataset, []):
            return
        if changes:
            self.changes[dataset] = changes
        else:
            self.changes.pop(dataset, None)
        self._dirty.add(("change", dataset))

    def shared_keys(self, event: dict[str, Any]) -> set[str]:
        """The datasets whose readers and changes ``event`` needs, as other instances may have saved them (their
        readers' and writers' events come from partitions this instance does not own): an action's outputs (and a
        renamed output's old name); for a run's end, the datasets its run changed and those its job reads."""
        kind = kind_of(event)
        if kind == "ActionLineageEvent":
            out = set()
            for ds in event.get("outputs") or []:
                out.add(f"{ds['namespace']}/{ds['name']}")
                if ds.get("previous_identifier"):
                    out.add(f"{ds['previous_identifier']['namespace']}/{ds['previous_identifier']['name']}")
            return out
        if kind == "JobStatusChangedEvent" and event.get("new_status") in TERMINAL_STATUSES:
            h = event["header"]
            return (self._changed_by.get(h["run_id"], set())
                    | self._reads_of.get((h["job_namespace"], h["job_name"]), set()))
        return set()

    def take_shared(self, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Take the database's reader and change rows (``AlertStore.shared_facts``) over what is held, except what
        this instance changed and has not saved yet (its own is newer)."""
        for kind, _key, doc in rows:
            if kind == "reader":
                who = (doc["namespace"], doc["job"])
                if ("reader", _reader_key(doc["dataset"], who)) not in self._dirty:
                    self.readers.setdefault(doc["dataset"], {})[who] = Reads.from_json(doc)
                    self._reads_of.setdefault(who, set()).add(doc["dataset"])
            elif kind == "change" and ("change", doc["dataset"]) not in self._dirty:
                self.changes[doc["dataset"]] = held = [Change.from_json(c) for c in doc["changes"]]
                for c in held:
                    if not c.settled:
                        self._changed_by.setdefault(c.writer_run, set()).add(doc["dataset"])

    def readers_of(self, dataset: str) -> list[Reads]:
        return list(self.readers.get(dataset, {}).values())

    def _settle(self, obs: Observation, run: RunState) -> None:
        """The run ended: its changes are final (impacts, with their readers now). A FINISHED run's job may no
        longer read what an earlier change broke (rechecks): a dataset its complete lineage did not read this
        time is no longer one it reads."""
        self._settle_changes(obs, run)
        if run.status == "FINISHED":
            self._recheck_reads(obs, run)

    def _settle_changes(self, obs: Observation, run: RunState) -> None:
        for key in sorted(self._changed_by.pop(run.run_id, set())):
            changes = self.changes.get(key, [])
            final = [replace(c, settled=True) if c.writer_run == run.run_id else c for c in changes]
            self._set_changes(key, final)
            readers = self.readers_of(key)
            obs.impacts += [(c, readers) for c, was in zip(final, changes, strict=True)
                            if c.settled and not was.settled]

    def _recheck_reads(self, obs: Observation, run: RunState) -> None:
        who = (run.namespace, run.job)
        read = self._reads_of.get(who, set())
        for key in sorted(read):
            mine = self.readers.get(key, {})
            if run.lineage == "complete" and mine.get(who) is not None and mine[who].run_id != run.run_id:
                del mine[who]
                if not mine:
                    del self.readers[key]
                self._dirty.add(("reader", _reader_key(key, who)))
            readers = self.readers_of(key)
            obs.rechecks += [(c, readers) for c in self.changes.get(key, []) if c.settled]
        self._reads_of[who] = {k for k in read if who in self.readers.get(k, {})}

    def _observe_command(self, event: dict[str, Any], js: JobState, at: dt.datetime,
                         partition: str | None) -> Observation:
        cid = event["command_id"]
        h = event["header"]
        rs = self.refreshes.get(cid)
        if rs is None:
            rs = self.refreshes[cid] = RefreshState(cid, h["job_namespace"], h["job_name"], event["table"],
                                                    event["nominal_time"], updated=at)
        if rs.partition is None:  # the partition of its runs' events wins: that is where it ends
            rs.partition = partition
        rs.table = event["table"]
        rs.deadline = event.get("deadline") or rs.deadline
        if event.get("attempt", 1) > rs.attempt:
            rs.attempt, rs.status = event["attempt"], "PENDING"
        self._dirty.add(("refresh", cid))
        return Observation(event, "RefreshCommand", h["job_namespace"], h["job_name"], at, js, None, refresh=rs)

    def _observe_schedule(self, sched: dict[str, Any], obs: Observation, run: RunState) -> RefreshState:
        cid = sched["command_id"]
        run.command_id = cid
        rs = self.refreshes.get(cid)
        table = obs.tags.get("table") or (obs.job[len("refresh "):] if obs.job.startswith("refresh ") else obs.job)
        if rs is None:
            rs = self.refreshes[cid] = RefreshState(cid, obs.namespace, obs.job, table, sched["nominal_time"])
        elif obs.tags.get("table"):
            rs.table = obs.tags["table"]
        attempt = int(sched.get("attempt") or 1)
        if attempt >= rs.attempt and obs.kind == "JobStatusChangedEvent" and not obs.out_of_order:
            rs.attempt = attempt
            new = obs.event["new_status"]
            rs.status = _REFRESH_STATUS.get(new, "RUNNING")
            err = obs.event.get("error")
            rs.error = f"{err['error_class']}: {err['message']}" if err else None
        rs.updated = obs.at
        if run.partition is not None:
            rs.partition = run.partition
        self._dirty.add(("refresh", cid))
        return rs

    # -- upkeep and persistence ------------------------------------------------------------------

    def prune(self, now: dt.datetime) -> None:
        """Forget terminal runs and settled refreshes long past (bounded memory on a long-running service)."""
        self._prune_runs(now)
        for cid in [c.command_id for c in self.refreshes.values()
                    if c.status in ("COMPLETED", "CANCELED") and c.updated and now - c.updated > REFRESH_TTL
                    and self.mine(c)]:
            del self.refreshes[cid]
            self._dirty.add(("refresh", cid))
        floor = now - READER_TTL
        for key in list(self.readers):
            for who in [w for w, r in self.readers[key].items() if r.seen < floor]:
                del self.readers[key][who]
                self._reads_of.get(who, set()).discard(key)
                self._dirty.add(("reader", _reader_key(key, who)))
            if not self.readers[key]:
                del self.readers[key]
        for key in list(self.changes):
            self._set_changes(key, [c for c in self.changes[key] if c.at >= floor])
        self.writes.prune(now - REFRESH_TTL)

    def _prune_runs(self, now: dt.datetime) -> None:
        """Terminal runs, and ingested runs that will not end (no status event), ``RUN_TTL`` after their last
        event."""
        for rid in [r.run_id for r in self.runs.values() if (r.terminal or not r.has_lifecycle)
                    and now - r.last_seen > RUN_TTL and self.mine(r)]:
            del self.runs[rid]
            self._dirty.add(("run", rid))

    def mark_dirty(self, kind: str, key: str) -> None:
        self._dirty.add((kind, key))

    def dump_dirty(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """(kind, key, JSON or None when deleted) of everything changed since the last call."""
        out = self._dump_writes()
        for kind, key in self._dirty:
            value: Any
            if kind == "run":
                value = self.runs.get(key)
            elif kind == "job":
                ns, _, name = key.partition("\x1f")
                value = self.jobs.get((ns, name))
            elif kind == "refresh":
                value = self.refreshes.get(key)
            elif kind == "reader":
                dataset, ns, name = key.split("\x1f")
                reads = self.readers.get(dataset, {}).get((ns, name))
                js = self.jobs.get((ns, name))
                job_hash = hashlib.sha256(f"{ns}\x1f{name}".encode()).hexdigest()[:16]
                out.append((kind, reader_row_prefix(dataset) + job_hash, {**reads.to_json(), "dataset": dataset,
                                                  "partition": js.partition if js else None} if reads else None))
                continue
            elif kind == "change":
                held = self.changes.get(key)
                part = None
                if held:
                    writer = self.jobs.get((held[-1].writer_namespace, held[-1].writer_job))
                    part = writer.partition if writer else None
                out.append((kind, change_row_key(key), {"dataset": key, "changes": [c.to_json() for c in held],
                                                  "partition": part} if held else None))
                continue
            else:
                ds = self.datasets.get(key)
                out.append((kind, key, {"run_id": ds[0], "fields": ds[1]} if ds else None))
                continue
            if value is not None and not self.mine(value):
                continue  # another instance's: it saves its own, newer copy
            out.append((kind, key, value.to_json() if value is not None else None))
        self._dirty.clear()
        return out

    def _dump_writes(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """The changed write states and promise flags of datasets this instance owns."""
        out: list[tuple[str, str, dict[str, Any] | None]] = []
        for kind, key in sorted(self.writes.dirty):
            st = self.writes.states.get(key)
            if st is not None and self.owned is not None and st.partition is not None and st.partition not in \
                    self.owned:
                continue  # another instance's: it saves its own, newer copy
            out.append((kind, _row_key(key), self.writes.row(kind, key)))
        self.writes.dirty.clear()
        return out

    def reload(self, rows: list[tuple[str, str, dict[str, Any]]], partitions: set[str]) -> None:
        """Take ``rows`` (the database's facts of ``partitions``, newly assigned) over what is held of them."""
        self.drop(partitions)
        dirty, writes_dirty = set(self._dirty), set(self.writes.dirty)
        self.load(rows)
        self._dirty, self.writes.dirty = dirty, writes_dirty

    def load(self, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
        for kind, key, doc in rows:
            if kind == "run":
                self.runs[key] = RunState.from_json(doc)
            elif kind == "job":
                js = JobState.from_json(doc)
                self.jobs[(js.namespace, js.job)] = js
            elif kind == "refresh":
                self.refreshes[key] = RefreshState.from_json(doc)
            elif kind == "dataset":
                self.datasets[key] = (doc["run_id"], doc["fields"])
            elif kind in ("reader", "change"):
                self.take_shared([(kind, key, doc)])
            elif kind in ("write", "fired"):
                self.writes.load_row(kind, doc)
        self._dirty.clear()
        self.writes.dirty.clear()
