"""Questions to the job registry: jobs, runs, spec history, and lineage upstream/downstream.

Pure reads over ``registry_model``; the CLI (``registry_cli``) and the REST
API (``registry_api``) both answer from here, as plain dicts ready for JSON.

A dataset is named as a user writes it (``resolve_dataset``): a path
(``/data/orders``), a URI (``file:/data/orders``, ``s3://bucket/key``), a
catalog table name (``sales.orders``, matched against the symlinks the
emitter records), or an OpenLineage namespace and name.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lineagewire.exceptions import ConfigError
from lineagewire.schemas.naming import file_dataset_id

from . import registry_model as m
from . import run_diff as rd
from .registry_producer import producer_info, producer_label

__all__ = ["DEFAULT_DEPTH", "NotFoundError", "child_runs", "compute_run_diff", "dataset_detail", "dataset_lifecycle",
           "job_history", "job_runs", "lineage", "list_jobs", "resolve_dataset", "run_detail", "run_diff"]

_CHUNK = 500
#: hops ``lineage`` follows unless told otherwise: enough for the usual question (what does this feed, and
#: what do those feed), bounded so that a wide graph answers in milliseconds, not with most of the graph
DEFAULT_DEPTH = 3


class NotFoundError(ConfigError):
    """A job, run or dataset the registry does not know; the message names it."""


def _utc(value: Any) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands datetimes back without their zone; they were stored in UTC
        value = value.replace(tzinfo=dt.UTC)
    return str(value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"))


def _candidates(text: str, namespace: str | None) -> list[tuple[str, str]]:
    """(namespace, name) pairs ``text`` may mean: a path or URI named as the emitter names it (for a scheme it does
    not know, with and without the path's leading slash)."""
    if namespace is not None:
        return [(namespace, text)]
    if not (text.startswith("/") or "://" in text or text.startswith("file:")):
        return []
    ns, name = file_dataset_id(text)
    if ns != "file" and name.startswith("/"):
        return [(ns, name), (ns, name.lstrip("/"))]
    return [(ns, name)]


def resolve_dataset(conn: Connection, text: str, namespace: str | None = None) -> tuple[int, str, str]:
    """(id, namespace, name) of the dataset ``text`` names; NotFoundError says what was tried."""
    d = m.datasets.c
    for ns, name in _candidates(text, namespace):
        row = conn.execute(sa.select(d.id, d.namespace, d.name).where(d.namespace == ns, d.name == name)).first()
        if row is not None:
            return int(row.id), row.namespace, row.name
    if namespace is None:
        a = m.dataset_aliases.c
        rows = conn.execute(sa.select(d.id, d.namespace, d.name).join(m.dataset_aliases, a.dataset_id == d.id)
                            .where(a.name == text).distinct()).fetchall()
        rows = rows or conn.execute(sa.select(d.id, d.namespace, d.name).where(d.name == text)).fetchall()
        if len(rows) == 1:
            return int(rows[0].id), rows[0].namespace, rows[0].name
        if len(rows) > 1:
            names = ", ".join(f"{r.namespace} {r.name}" for r in rows[:5])
            raise NotFoundError(f"dataset {text!r} is ambiguous: {names}; give --namespace")
    tried = ", ".join(f"{ns} {name}" for ns, name in _candidates(text, namespace)) or "table names and dataset names"
    raise NotFoundError(f"dataset {text!r} is not in the registry (tried {tried}); expected a path, a URI, a "
                        "catalog table name, or --namespace NS with the dataset name")


def _job_id(conn: Connection, job: str) -> tuple[int, str, str]:
    j = m.jobs.c
    ns, sep, name = job.rpartition("/")
    query = sa.select(j.id, j.namespace, j.name)
    query = query.where(j.namespace == ns, j.name == name) if sep else query.where(j.name == job)
    rows = conn.execute(query).fetchall()
    if not rows:
        raise NotFoundError(f"job {job!r} is not in the registry; expected a job name or namespace/name "
                            "(see: lineagewire jobs list)")
    if len(rows) > 1:
        raise NotFoundError(f"job {job!r} is ambiguous: {', '.join(f'{r.namespace}/{r.name}' for r in rows)}; "
                            "give namespace/name")
    return int(rows[0].id), rows[0].namespace, rows[0].name


def list_jobs(conn: Connection) -> list[dict[str, Any]]:
    """Every job with its run count and last run, in one query (a window over the runs: the count per job and
    each job's newest run), not one per job: 10k jobs were 10k round trips (bench.registry ``jobs_list``)."""
    j, r = m.jobs.c, m.runs.c
    ranked = sa.select(
        r.job_id, r.run_id, r.status, r.producer,
        sa.func.row_number().over(partition_by=r.job_id,
                                  order_by=(r.created_at.desc().nulls_last(), r.run_id)).label("newest"),
        sa.func.count().over(partition_by=r.job_id).label("runs")).subquery()
    rows = conn.execute(
        sa.select(j.namespace, j.name, j.last_seen, ranked.c.run_id, ranked.c.status, ranked.c.runs,
                  ranked.c.producer)
        .select_from(m.jobs.outerjoin(ranked, sa.and_(ranked.c.job_id == j.id, ranked.c.newest == 1)))
        .order_by(j.namespace, j.name))
    return [{"job": f"{row.namespace}/{row.name}", "runs": row.runs or 0, "last_run": row.run_id,
             "last_status": row.status, "last_seen": _utc(row.last_seen),
             "last_producer": producer_label(row.producer)} for row in rows]


def _run_dict(row: Any) -> dict[str, Any]:
    return {"run_id": row.run_id, "status": row.status, "lifecycle_state": row.lifecycle_state,
            "created_at": _utc(row.created_at), "started_at": _utc(row.started_at), "ended_at": _utc(row.ended_at),
            "duration_ms": row.duration_ms, "restarts": row.restarts, "error_class": row.error_class,
            "error_message": row.error_message, "parent_run_id": row.parent_run_id,
            "parent_job": _job(row.parent_job_namespace, row.parent_job_name),
            "root_parent_run_id": row.root_parent_run_id,
            "root_parent_job": _job(row.root_parent_job_namespace, row.root_parent_job_name),
            "workflow_id": row.workflow_id, "nominal_time": _utc(row.nominal_time), "spec_id": row.spec_id,
            "producer": producer_info(row.producer, row.producer_version)}


def _job(namespace: str | None, name: str | None) -> str | None:
    return f"{namespace}/{name}" if name is not None else None


def child_runs(conn: Connection, run_id: str) -> dict[str, Any]:
    """The runs started under ``run_id``: those whose parent it is (an Airflow task's run) or whose root it is
    (an Airflow DAG run, a workflow), oldest first, each with its job."""
    r = m.runs.c
    rows = conn.execute(sa.select(m.runs, m.jobs.c.namespace, m.jobs.c.name).join(m.jobs, m.jobs.c.id == r.job_id)
                        .where(sa.or_(r.parent_run_id == run_id, r.root_parent_run_id == run_id))
                        .order_by(r.created_at.nulls_last(), r.run_id)).fetchall()
    if not rows:
        raise NotFoundError(f"no run in the registry has {run_id!r} as its parent or root parent run; expected the "
                            "run id of an orchestrator's task or DAG run (spark.openlineage.parentRunId, "
                            "OPENLINEAGE_PARENT_ID) or of a lineagewire run")
    return {"parent_run_id": run_id,
            "runs": [{"job": f"{row.namespace}/{row.name}", **_run_dict(row)} for row in rows]}


def job_runs(conn: Connection, job: str) -> dict[str, Any]:
    """A job's runs, oldest first, with outcome and duration."""
    job_id, ns, name = _job_id(conn, job)
    r = m.runs.c
    rows = conn.execute(sa.select(m.runs).where(r.job_id == job_id).order_by(r.created_at.nulls_last(), r.run_id))
    return {"job": f"{ns}/{name}", "runs": [_run_dict(row) for row in rows]}


def job_history(conn: Connection, job: str) -> dict[str, Any]:
    """A job's runs with, wherever the spec changed from the run before, a unified diff of the spec."""
    info = job_runs(conn, job)
    s = m.specs.c
    specs = {row.id: row.spec_json for row in conn.execute(sa.select(s.id, s.spec_json))}
    previous: int | None = None
    for run in info["runs"]:
        spec_id = run["spec_id"]
        run["spec_diff"] = None
        if spec_id is None:
            continue
        if previous is not None and spec_id != previous:
            run["spec_diff"] = rd.unified_spec_diff(specs[previous], specs[spec_id], f"spec {previous}",
                                                    f"spec {spec_id}")
        previous = spec_id
    return info


def run_detail(conn: Connection, run_id: str) -> dict[str, Any]:
    """One run: status, producer, transitions in the order of their times, inputs, outputs, error."""
    row = conn.execute(sa.select(m.runs, m.jobs.c.namespace, m.jobs.c.name).join(m.jobs, m.jobs.c.id == m.runs.c.job_id)
                       .where(m.runs.c.run_id == run_id)).first()
    if row is None:
        raise NotFoundError(f"run {run_id!r} is not in the registry; expected a run id "
                            "(see: lineagewire jobs show JOB)")
    out = {"job": f"{row.namespace}/{row.name}", **_run_dict(row)}
    t = m.transitions.c
    out["transitions"] = [{"sequence": x.sequence, "time": _utc(x.transition_time), "old_status": x.old_status,
                           "new_status": x.new_status, "lifecycle_state": x.lifecycle_state,
                           "error_class": x.error_class, "error_message": x.error_message}
                          for x in conn.execute(sa.select(m.transitions).where(t.run_id == run_id)
                                                .order_by(t.transition_time, t.sequence))]
    rd, d = m.run_datasets.c, m.datasets.c
    io = conn.execute(sa.select(rd.direction, rd.operation, d.namespace, d.name).join(m.datasets, d.id == rd.dataset_id)
                      .where(rd.run_id == run_id).order_by(d.namespace, d.name)).fetchall()
    out["inputs"] = [{"namespace": x.namespace, "name": x.name} for x in io if x.direction == "in"]
    out["outputs"] = [{"namespace": x.namespace, "name": x.name, "operation": x.operation}
                      for x in io if x.direction == "out"]
    return out


def _run_row(conn: Connection, run_id: str) -> Any:
    r, j = m.runs.c, m.jobs.c
    row = conn.execute(sa.select(r.run_id, r.job_id, r.status, r.duration_ms, r.spec_id, r.created_at, r.started_at,
                                 j.namespace, j.name).join(m.jobs, j.id == r.job_id).where(r.run_id == run_id)).first()
    if row is None:
        raise NotFoundError(f"run {run_id!r} is not in the registry; expected a run id "
                            "(see: lineagewire jobs show JOB)")
    return row


def _snapshot(conn: Connection, row: Any) -> rd.RunSnapshot:
    """What ``run_diff.compare`` needs of the run ``row`` (``_run_row``): its lineage events, spec and
    lifecycle changes."""
    e = m.run_events.c
    events = [json.loads(body) for body in conn.execute(
        sa.select(e.body).where(e.run_id == row.run_id, e.kind.in_(["JobCreatedEvent", "ActionLineageEvent"]))
        .order_by(e.sequence, e.event_id)).scalars()]
    spec = None
    if row.spec_id is not None:
        text = conn.execute(sa.select(m.specs.c.spec_json).where(m.specs.c.id == row.spec_id)).scalar()
        spec = json.loads(text) if text else None
    c, d = m.dataset_changes.c, m.datasets.c
    prev = m.datasets.alias("prev")
    changes = [{"change": x.change, "namespace": x.namespace, "name": x.name,
                "previous": {"namespace": x.prev_namespace, "name": x.prev_name} if x.prev_name is not None else None}
               for x in conn.execute(
                   sa.select(c.change, d.namespace, d.name, prev.c.namespace.label("prev_namespace"),
                             prev.c.name.label("prev_name"))
                   .select_from(m.dataset_changes.join(m.datasets, d.id == c.dataset_id)
                                .outerjoin(prev, prev.c.id == c.previous_id))
                   .where(c.run_id == row.run_id))]
    return rd.snapshot(row.run_id, f"{row.namespace}/{row.name}", events, status=row.status,
                       duration_ms=row.duration_ms, spec=spec, changes=changes)


def _previous_success(conn: Connection, row: Any) -> Any:
    """The job's newest FINISHED run that began before the run ``row`` (created, else started), or None."""
    r = m.runs.c
    query = sa.select(r.run_id).where(r.job_id == row.job_id, r.status == "FINISHED", r.run_id != row.run_id)
    if row.created_at is not None:
        # ix_runs_job_created read backwards: a job that ran every 10 minutes for a year is not scanned whole at
        # each run's end (runs without a JobCreatedEvent, so without spec or lineage, are not candidates)
        query = query.where(sa.or_(r.created_at < row.created_at,
                                   sa.and_(r.created_at == row.created_at, r.run_id < row.run_id)))
        order = [r.created_at.desc(), r.run_id.desc()]
    else:
        began = sa.func.coalesce(r.created_at, r.started_at)
        if row.started_at is not None:
            query = query.where(began < row.started_at)
        order = [began.desc().nulls_last(), r.run_id.desc()]
    run_id = conn.execute(query.order_by(*order).limit(1)).scalar()
    return None if run_id is None else _run_row(conn, run_id)


def compute_run_diff(conn: Connection, run_id: str, against: str | None = None) -> dict[str, Any]:
    """What changed in run ``run_id`` since ``against``, by default its job's previous successful run
    (``run_diff.compare``), computed now. A run of another job is refused (ConfigError naming both jobs)."""
    row = _run_row(conn, run_id)
    other = _previous_success(conn, row) if against is None else _run_row(conn, against)
    if other is not None and other.job_id != row.job_id:
        raise ConfigError(f"run {run_id} is of job {row.namespace}/{row.name} and run {against} of job "
                          f"{other.namespace}/{other.name}; a diff compares two runs of one job")
    return rd.compare(_snapshot(conn, row), None if other is None else _snapshot(conn, other))


def run_diff(conn: Connection, run_id: str, against: str | None = None) -> dict[str, Any]:
    """What changed in run ``run_id`` since its job's previous successful run: the diff stored when the run ended
    (``stored``: true), else computed now (a run still going, or one that ended before the registry kept
    diffs); against another run of the job when ``against`` is given (computed now)."""
    if against is None:
        body = conn.execute(sa.select(m.run_diffs.c.diff_json).where(m.run_diffs.c.run_id == run_id)).scalar()
        if body is not None:
            return {**json.loads(body), "stored": True}
    return {**compute_run_diff(conn, run_id, against), "stored": False}


#: the most earlier names a dataset's history follows back (a chain of renames; also stops a cycle A -> B -> A)
_MAX_NAMES = 20


def dataset_lifecycle(conn: Connection, dataset_id: int) -> dict[str, Any]:
    """A dataset's lifecycle: its changes (CREATE, ALTER, RENAME... with run, action, job and time, oldest first),
    joined to the changes of the names it had before (``previous_names``, newest first, each up to its rename);
    ``state``: ``dropped`` (``dropped_by``: the run) when its newest change is a DROP, ``renamed`` (``renamed_to``)
    when it was renamed since, else ``present``, or None when no change of it is known."""
    own = _changes(conn, [dataset_id], None)
    previous: list[dict[str, Any]] = []
    changes = list(own)
    seen, rename = {dataset_id}, _last_rename(own)
    while rename is not None and rename["previous"] is not None and len(previous) < _MAX_NAMES:
        before = rename["previous"]
        if before["id"] in seen:
            break
        seen.add(before["id"])
        previous.append({**before, "renamed_at": rename["at"], "renamed_by": rename["run_id"]})
        theirs = _changes(conn, [before["id"]], rename["raw_at"])
        changes = theirs + changes
        rename = _last_rename(theirs)
    c = m.dataset_changes.c
    away = conn.execute(sa.select(c.dataset_id, c.run_id, c.changed_at).where(c.previous_id == dataset_id,
                                                                             c.change == "RENAME")
                        .order_by(c.changed_at.desc(), c.sequence.desc()).limit(1)).first()
    state, dropped_by, renamed_to = _state(conn, own, away)
    for x in changes:
        del x["raw_at"]
    return {"state": state, "dropped_by": dropped_by, "renamed_to": renamed_to, "previous_names": previous,
            "changes": changes}


def _changes(conn: Connection, ids: list[int], until: Any) -> list[dict[str, Any]]:
    """The lifecycle changes of datasets ``ids`` (up to ``until``, when given), oldest first."""
    c, d, r, j = m.dataset_changes.c, m.datasets.c, m.runs.c, m.jobs.c
    prev = m.datasets.alias("prev")
    query = (sa.select(c.dataset_id, c.run_id, c.action_id, c.change, c.changed_at, c.previous_id, d.namespace,
                       d.name, prev.c.namespace.label("prev_namespace"), prev.c.name.label("prev_name"),
                       j.namespace.label("job_namespace"), j.name.label("job_name"), j.id.label("job_id"))
             .select_from(m.dataset_changes.join(m.datasets, d.id == c.dataset_id)
                          .outerjoin(prev, prev.c.id == c.previous_id)
                          .outerjoin(m.runs, r.run_id == c.run_id).outerjoin(m.jobs, j.id == r.job_id))
             .where(c.dataset_id.in_(ids)).order_by(c.changed_at, c.sequence))
    if until is not None:
        query = query.where(c.changed_at <= until)
    return [{"change": x.change, "run_id": x.run_id, "action_id": x.action_id or None, "at": _utc(x.changed_at),
             "raw_at": x.changed_at, "dataset": {"id": x.dataset_id, "namespace": x.namespace, "name": x.name},
             "job": _job(x.job_namespace, x.job_name), "job_id": x.job_id,
             "previous": {"id": x.previous_id, "namespace": x.prev_namespace, "name": x.prev_name}
             if x.previous_id is not None else None}
            for x in conn.execute(query)]


def _last_rename(changes: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((x for x in reversed(changes) if x["change"] == "RENAME"), None)


def _state(conn: Connection, own: list[dict[str, Any]], away: Any
           ) -> tuple[str | None, dict[str, Any] | None, dict[str, Any] | None]:
    """(state, the run that dropped it, the name it was renamed to) from its own changes and the newest rename
    away from it (``away``: a row of the new name's RENAME, or None)."""
    last = own[-1] if own else None
    if away is not None and (last is None or away.changed_at >= last["raw_at"]):
        d = m.datasets.c
        new = conn.execute(sa.select(d.namespace, d.name).where(d.id == away.dataset_id)).one()
        return "renamed", None, {"id": away.dataset_id, "namespace": new.namespace, "name": new.name,
                                 "run_id": away.run_id, "at": _utc(away.changed_at)}
    if last is None:
        return None, None, None
    if last["change"] == "DROP":
        return "dropped", {"run_id": last["run_id"], "action_id": last["action_id"], "job": last["job"],
                           "at": last["at"]}, None
    return "present", None, None


def dataset_detail(conn: Connection, dataset: str, namespace: str | None = None) -> dict[str, Any]:
    """The dataset ``dataset`` names (``resolve_dataset``) with its lifecycle (``dataset_lifecycle``)."""
    ds_id, ns, name = resolve_dataset(conn, dataset, namespace)
    return {"id": ds_id, "namespace": ns, "name": name, **dataset_lifecycle(conn, ds_id)}


def _chunks(ids: list[Any]) -> Iterable[list[Any]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i:i + _CHUNK]


#: a node of the walk: (dataset id, column or None)
_Node = tuple[int, str | None]


def lineage(conn: Connection, dataset: str, *, direction: str, namespace: str | None = None,
            column: str | None = None, depth: int | None = DEFAULT_DEPTH,
            since: dt.datetime | None = None) -> dict[str, Any]:
    """Datasets (or columns) reachable from ``dataset`` downstream or upstream, level by level.

    ``depth``: at most this many hops (``DEFAULT_DEPTH`` unless given; None for no limit). A wide
    graph grows by its fan-out at every hop, so an unlimited walk can return most of it.

    Returns ``{"root", "direction", "nodes": [{id, namespace, name, field, depth}], "edges": [{source, sink,
    jobs, transformation}], "more"}``; node ids are "namespace name" (plus " field" for columns); ``more`` is
    true when the depth limit stopped the walk before the end of the graph.

    One query per level (per ``_CHUNK`` nodes of it), on the edge table alone; job and dataset names are
    read once at the end for the ids found.
    """
    if direction not in ("upstream", "downstream"):
        raise ConfigError(f"direction {direction!r}; expected upstream or downstream")
    if depth is not None and depth < 1:
        raise ConfigError(f"--depth {depth}; expected 1 or more (or all for no limit)")
    root_id, root_ns, root_name = resolve_dataset(conn, dataset, namespace)
    if column:
        _check_column(conn, root_id, root_ns, root_name, column)
    walk = _Walk(conn, direction, column, since)
    root = (root_id, column)
    walk.run(root, depth)
    more = bool(walk.frontier) and _has_edges(conn, walk.base, walk.here, column, walk.frontier)
    names = _dataset_names(conn, walk.depth_of)
    ids = {n: f"{names[n[0]][0]} {names[n[0]][1]}" + (f" {n[1]}" if n[1] is not None else "") for n in walk.depth_of}
    nodes = [{"id": ids[n], "namespace": names[n[0]][0], "name": names[n[0]][1], "field": n[1], "depth": dep}
             for n, dep in sorted(walk.depth_of.items(), key=lambda kv: (kv[1], names[kv[0][0]], kv[0][1] or ""))]
    return {"root": ids[root], "root_namespace": root_ns, "root_name": root_name, "direction": direction,
            "column": column, "nodes": nodes, "edges": _edges_out(conn, walk.edges, ids, direction, column),
            "depth": depth, "more": more}


class _Walk:
    """The breadth-first walk of ``lineage`` over the edge table: the depth each node was first reached at,
    and the edges followed (``(here, there) -> [job ids, transformation]``)."""

    def __init__(self, conn: Connection, direction: str, column: str | None, since: dt.datetime | None) -> None:
        self.conn, self.column = conn, column
        c = (m.column_edges if column else m.dataset_edges).c
        self.here, there = (c.source_id, c.sink_id) if direction == "downstream" else (c.sink_id, c.source_id)
        cols = [self.here, there, c.job_id]
        if column:
            cols += ([c.source_field, c.sink_field] if direction == "downstream"
                     else [c.sink_field, c.source_field]) + [c.transformation]
        base = sa.select(*cols)
        if since is not None:
            # Stored in UTC; SQLite keeps no zone, so compare UTC with UTC.
            base = base.where(c.last_seen >= (since.astimezone(dt.UTC).replace(tzinfo=None)
                                              if conn.dialect.name == "sqlite" else since))
        self.base = base
        self.depth_of: dict[_Node, int] = {}
        self.edges: dict[tuple[_Node, _Node], list[Any]] = {}
        self.frontier: list[_Node] = []

    def run(self, root: _Node, depth: int | None) -> None:
        """Walk from ``root`` for at most ``depth`` hops; ``frontier`` is then the last level found."""
        self.depth_of[root] = 0
        self.frontier = [root]
        level = 0
        while self.frontier and (depth is None or level < depth):
            level += 1
            self.frontier = self._step(level)

    def _step(self, level: int) -> list[_Node]:
        """One level: the edges leaving the frontier, and the nodes they reach first (the next frontier)."""
        found: list[_Node] = []
        for src, dst, job, transformation in self._rows():
            edge = self.edges.get((src, dst))
            if edge is None:
                self.edges[(src, dst)] = [{job}, transformation]
            else:
                edge[0].add(job)
                edge[1] = transformation
            if dst not in self.depth_of:
                self.depth_of[dst] = level
                found.append(dst)
        return found

    def _rows(self) -> Iterable[tuple[_Node, _Node, Any, Any]]:
        """``(here node, there node, job id, transformation)`` of every edge leaving the frontier."""
        wanted = set(self.frontier)
        for part in _chunks(sorted({node[0] for node in self.frontier})):
            rows = self.conn.execute(self.base.where(self.here.in_(part))).fetchall()
            if self.column:
                yield from (((r[0], r[3]), (r[1], r[4]), r[2], r[5]) for r in rows if (r[0], r[3]) in wanted)
            else:
                yield from (((r[0], None), (r[1], None), r[2], None) for r in rows)


def _dataset_names(conn: Connection, nodes: Iterable[_Node]) -> dict[int, tuple[str, str]]:
    """dataset id -> (namespace, name) of the datasets of ``nodes``."""
    d = m.datasets.c
    names: dict[int, tuple[str, str]] = {}
    for part in _chunks(sorted({node[0] for node in nodes})):
        names.update({row[0]: (row[1], row[2]) for row in
                      conn.execute(sa.select(d.id, d.namespace, d.name).where(d.id.in_(part))).fetchall()})
    return names


def _job_names(conn: Connection, job_ids: Iterable[int]) -> dict[int, str]:
    """job id -> ``namespace/name`` of the jobs ``job_ids``."""
    j = m.jobs.c
    names: dict[int, str] = {}
    for part in _chunks(sorted(job_ids)):
        names.update({row[0]: f"{row[1]}/{row[2]}" for row in
                      conn.execute(sa.select(j.id, j.namespace, j.name).where(j.id.in_(part))).fetchall()})
    return names


def _edges_out(conn: Connection, edges: dict[tuple[_Node, _Node], list[Any]], ids: dict[_Node, str],
               direction: str, column: str | None) -> list[dict[str, Any]]:
    """The walk's edges as ``lineage`` returns them: source to sink whatever the direction, jobs by name."""
    job_names = _job_names(conn, {job for e in edges.values() for job in e[0]})
    downstream = direction == "downstream"
    keyed = sorted(((ids[s], ids[t]), e) for (s, t), e in edges.items())
    return [{"source": a if downstream else b, "sink": b if downstream else a,
             "jobs": sorted(job_names[x] for x in e[0]),
             **({"transformation": e[1]} if column else {})}
            for (a, b), e in keyed]


def _check_column(conn: Connection, dataset_id: int, namespace: str, name: str, column: str) -> None:
    """NotFoundError unless ``column`` of the dataset is in some column lineage edge (either end, any time): a
    typo would otherwise answer with the root alone, as if the column had no lineage."""
    c = m.column_edges.c
    known = sorted(set(conn.execute(sa.union(sa.select(c.source_field).where(c.source_id == dataset_id),
                                             sa.select(c.sink_field).where(c.sink_id == dataset_id))).scalars()))
    if column in known:
        return
    listed = (f"expected one of: {', '.join(known[:20])}{', ...' if len(known) > 20 else ''}" if known
              else "the dataset has no column lineage")
    raise NotFoundError(f"column {column!r} of dataset {namespace} {name} is not in the registry's column lineage; "
                        f"{listed}")


def _has_edges(conn: Connection, base: sa.Select, here: Any, column: str | None,
               frontier: list[tuple[int, str | None]]) -> bool:
    """Whether any edge leads on from ``frontier`` (the nodes the depth limit stopped at)."""
    wanted = set(frontier)
    for part in _chunks(sorted({node[0] for node in frontier})):
        if not column:
            if conn.execute(base.where(here.in_(part)).limit(1)).first() is not None:
                return True
            continue
        if any((row[0], row[3]) in wanted for row in conn.execute(base.where(here.in_(part)))):
            return True
    return False


def render_tree(result: dict[str, Any]) -> list[str]:
    """The lineage result as an indented tree; a node reached again is marked, not expanded twice."""
    downstream = result["direction"] == "downstream"
    children: dict[str, list[dict[str, Any]]] = {}
    for e in result["edges"]:
        parent, child = (e["source"], e["sink"]) if downstream else (e["sink"], e["source"])
        children.setdefault(parent, []).append({"node": child, **e})
    lines = [result["root"]]
    shown = {result["root"]}

    def walk(node: str, indent: str) -> None:
        kids = children.get(node, [])
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            via = ", ".join(kid["jobs"])
            again = kid["node"] in shown
            lines.append(f"{indent}{'└── ' if last else '├── '}{kid['node']}  [{via}]" + ("  (above)" if again else ""))
            if not again:
                shown.add(kid["node"])
                walk(kid["node"], indent + ("    " if last else "│   "))

    walk(result["root"], "")
    if result.get("more"):
        lines.append(f"(stopped at depth {result['depth']}; more lies beyond: --depth N or --depth all)")
    return lines


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)
