"""Impact: everything downstream of a dataset (or of one of its columns), from the job registry.

``impact(conn, dataset, column=None, depth=None)`` answers "who does this break?":

* **datasets** reached through the dataset lineage edges, each with its hops (1: written from the root);
* **columns** reached through column lineage, each DIRECT or INDIRECT: DIRECT when some path from the root
  carries the value through DIRECT edges only, INDIRECT when every path has an INDIRECT edge (a filter, a
  join or group key: the column decides which rows, not what they hold);
* **jobs** that read what is affected, with their owners (``OWNER_TAGS`` of the newest spec's tags), the hops
  of what they write (a job reading the root is 1 hop away), whether the registry's lineage of the job is
  incomplete (its newest run had an action with ``lineage_complete`` false: it may read more than shown) and,
  for the scheduler's refresh jobs, the materialized table and workflow;
* **materialized_tables**: those refresh jobs' tables.

With ``column`` only what reads that column through column lineage counts: its downstream columns, the
datasets that hold them and the jobs of those edges (a job is DIRECT when one of its edges carries a DIRECT
column directly). Jobs that read the root but write nothing the registry knows are found in the runs'
inputs (``run_datasets``), for the root and every dataset reached.

How it stays fast (``python -m bench.impact``: 100k datasets, 500k edges): a breadth-first walk, one query
per level (per ``_CHUNK`` ids of it) on the edge tables' unique indexes, whose leading columns are the
source's (``uq_dataset_edges``: source, sink, job; ``uq_column_edges``: source, field, sink, ...), so each level
reads an index range and no table rows; then one query per chunk of the jobs found for their newest run
(``ix_runs_job_created``), spec and incomplete actions. Node and job names are read once at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lineagewire.exceptions import ConfigError

from . import registry_model as m
from .registry_query import NotFoundError, resolve_dataset

__all__ = ["CSV_COLUMNS", "MAX_DEPTH", "OWNER_TAGS", "csv_rows", "edge_type", "impact", "owners_of", "render_text",
           "walk_columns", "walk_datasets"]

#: the spec tags whose values name a job's owners (comma-separated lists allowed), in this order
OWNER_TAGS = ("owner", "owners", "team")
#: the most hops ``impact`` takes when given a number (``--depth all`` has no limit)
MAX_DEPTH = 1000
#: ids per ``IN`` list: large enough that a level of a wide graph is a few queries, below every database's
#: bound-parameter limit (SQLite's is 32,766)
_CHUNK = 5000
#: how the stored events say that an action's lineage is incomplete (``RegistryStore`` writes them with
#: ``json.dumps(..., sort_keys=True)``, so this is the text of the field set to false)
_INCOMPLETE = '%"lineage_complete": false%'
#: the job-name prefix of the scheduler's refresh jobs (``MaterializedTable.job_name``)
_REFRESH_PREFIX = "refresh "

_DECODER = json.JSONDecoder()

#: a column: (dataset id, field)
Col = tuple[int, str]


def edge_type(transformation: str | None) -> str:
    """DIRECT or INDIRECT for a column edge's stored kinds (``"DIRECT/IDENTITY,INDIRECT/FILTER"``): INDIRECT only
    when every kind is; an edge with none recorded carries the value as it is (as the UI's column view reads it)."""
    kinds = [k for k in (transformation or "").split(",") if k]
    return "INDIRECT" if kinds and all(k.startswith("INDIRECT") for k in kinds) else "DIRECT"


def owners_of(tags: dict[str, str]) -> list[str]:
    """A job's owners from its spec's tags: the values of ``OWNER_TAGS``, split on commas, in order, once each."""
    out: list[str] = []
    for key in OWNER_TAGS:
        for name in (tags.get(key) or "").split(","):
            if name.strip() and name.strip() not in out:
                out.append(name.strip())
    return out


def _chunks(ids: Iterable[Any]) -> Iterator[list[Any]]:
    items = sorted(ids)
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


# -- the walks: pure over an edge source, so that they are tested without a database ---------------------------

@dataclass
class DatasetWalk:
    """What ``walk_datasets`` found: hops per dataset, and per job the datasets it read on the way."""

    hops: dict[int, int]
    #: job id -> fewest hops of a dataset it read (the job is one more)
    job_from: dict[int, int] = field(default_factory=dict)
    #: job id -> datasets it wrote that the walk reached
    job_writes: dict[int, set[int]] = field(default_factory=dict)
    #: datasets where the depth limit stopped the walk (their edges not followed)
    frontier: list[int] = field(default_factory=list)


def walk_datasets(edges_from: Any, root: int, depth: int | None) -> DatasetWalk:
    """Breadth first from ``root`` for at most ``depth`` hops (None: no limit). ``edges_from(ids)`` yields
    ``(sink, job)`` of the edges leaving the datasets ``ids`` (all at the same hops: one level). A cycle ends where
    it meets a dataset already reached; each dataset keeps its fewest hops, each job the fewest hops of what it
    read (the level it was first met at, less one)."""
    walk = DatasetWalk({root: 0})
    frontier, level = [root], 0
    while frontier and (depth is None or level < depth):
        level += 1
        found: list[int] = []
        for dst, job in edges_from(frontier):
            if job not in walk.job_from:
                walk.job_from[job] = level - 1
            walk.job_writes.setdefault(job, set()).add(dst)
            if dst not in walk.hops:
                walk.hops[dst] = level
                found.append(dst)
        frontier = found
    walk.frontier = frontier
    return walk


@dataclass
class ColumnWalk:
    """What ``walk_columns`` found: hops per column and whether a DIRECT-only path reaches it; per job, the
    fewest hops of a column it read and whether it carried a DIRECT column directly."""

    hops: dict[Col, int]
    direct: set[Col]
    job_from: dict[int, int]
    job_direct: set[int]
    job_writes: dict[int, set[Col]]
    frontier: list[Col]


def walk_columns(edges_from: Any, roots: list[Col], depth: int | None) -> ColumnWalk:
    """Breadth first over column edges from ``roots`` (hops 0), at most ``depth`` hops. ``edges_from(datasets)``
    yields ``(source col, sink col, job, transformation)`` of the column edges leaving those datasets (any
    field: the walk keeps those of the columns it holds). A column is DIRECT when a path of DIRECT edges
    (``edge_type``) from a root reaches it; found after the walk, over the edges it followed, since the
    fewest hops and a DIRECT path need not be the same path."""
    hops: dict[Col, int] = dict.fromkeys(roots, 0)
    followed: list[tuple[Col, Col, int, bool]] = []
    frontier, level = list(roots), 0
    while frontier and (depth is None or level < depth):
        level += 1
        wanted = set(frontier)
        found: list[Col] = []
        for src, dst, job, transformation in edges_from({c[0] for c in frontier}):
            if src not in wanted:
                continue
            followed.append((src, dst, job, edge_type(transformation) == "DIRECT"))
            if dst not in hops:
                hops[dst] = level
                found.append(dst)
        frontier = found
    out: dict[Col, list[Col]] = {}
    for src, dst, _, is_direct in followed:
        if is_direct:
            out.setdefault(src, []).append(dst)
    direct = set(roots)
    todo = list(roots)
    while todo:
        for nxt in out.get(todo.pop(), ()):
            if nxt not in direct:
                direct.add(nxt)
                todo.append(nxt)
    job_from: dict[int, int] = {}
    job_direct: set[int] = set()
    job_writes: dict[int, set[Col]] = {}
    for src, dst, job, is_direct in followed:
        if job not in job_from or hops[src] < job_from[job]:
            job_from[job] = hops[src]
        if is_direct and src in direct:
            job_direct.add(job)
        job_writes.setdefault(job, set()).add(dst)
    return ColumnWalk(hops, direct, job_from, job_direct, job_writes, frontier)


# -- the registry's side -----------------------------------------------------------------------------------------
#
# The walks' queries run on the driver's own cursor with the ids written into the SQL as integers: they return up
# to a row per edge of the whole graph, and SQLAlchemy's result rows cost three times the driver's tuples
# (bench.impact). Every value written in is an int() of an id the registry gave; text always goes as a parameter.

def _fetch(conn: Connection, sql: str) -> list[tuple[Any, ...]]:
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql)
        return list(cur.fetchall())
    finally:
        cur.close()


def _ids(part: list[int]) -> str:
    return ",".join(map(str, map(int, part)))


def _dataset_edges(conn: Connection) -> Any:
    def edges_from(ids: list[int]) -> Iterator[tuple[int, int]]:
        # DISTINCT sink and job, not every edge: many sources feed one sink by one job, and a level needs each once
        for part in _chunks(ids):
            yield from _fetch(conn, "SELECT DISTINCT sink_id, job_id FROM dataset_edges "
                                    f"WHERE source_id IN ({_ids(part)})")
    return edges_from


def _column_edges(conn: Connection) -> Any:
    def edges_from(ids: set[int]) -> Iterator[tuple[Col, Col, int, str | None]]:
        for part in _chunks(ids):
            for row in _fetch(conn, "SELECT source_id, source_field, sink_id, sink_field, job_id, transformation "
                                    f"FROM column_edges WHERE source_id IN ({_ids(part)})"):
                yield (row[0], row[1]), (row[2], row[3]), row[4], row[5]
    return edges_from


def _has_edges(conn: Connection, table: str, ids: Iterable[int]) -> bool:
    return any(_fetch(conn, f"SELECT 1 FROM {table} WHERE source_id IN ({_ids(part)}) LIMIT 1")
               for part in _chunks(ids))


def _readers(conn: Connection, datasets: dict[int, int], depth: int | None) -> dict[int, int]:
    """job id -> fewest hops of a dataset of ``datasets`` (id -> hops) that a run of a job read, for the jobs that
    wrote nothing the lineage edges know (a count, a collect, an export the emitter could not name): a job with
    an edge is found by the walk; the others are few, and only their runs' inputs are read."""
    writers = {row[0] for row in _fetch(conn, "SELECT DISTINCT job_id FROM dataset_edges")}
    others = [row[0] for row in _fetch(conn, "SELECT id FROM jobs") if row[0] not in writers]
    out: dict[int, int] = {}
    for part in _chunks(others):
        for job, ds in _fetch(conn, "SELECT DISTINCT r.job_id, rd.dataset_id FROM runs r JOIN run_datasets rd "
                                    f"ON rd.run_id = r.run_id WHERE r.job_id IN ({_ids(part)}) "
                                    "AND rd.direction = 'in'"):
            h = datasets.get(ds)
            if h is not None and (depth is None or h < depth) and (job not in out or h < out[job]):
                out[job] = h
    return out


def _jobs(conn: Connection, job_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """job id -> name, newest run (id, status, workflow), owners, and lineage completeness of that run."""
    # SQLite sorts NULL first, so DESC puts a run without a creation time last already, and saying NULLS LAST would
    # keep it off the index ix_runs_job_created; PostgreSQL needs it said.
    nulls = "" if conn.dialect.name == "sqlite" else " NULLS LAST"
    out: dict[int, dict[str, Any]] = {}
    for part in _chunks(job_ids):
        for row in _fetch(conn, "SELECT j.id, j.namespace, j.name, r.run_id, r.status, r.workflow_id, r.spec_id "
                                "FROM jobs j LEFT JOIN runs r ON r.run_id = (SELECT x.run_id FROM runs x WHERE "
                                f"x.job_id = j.id ORDER BY x.created_at DESC{nulls}, x.run_id DESC LIMIT 1) "
                                f"WHERE j.id IN ({_ids(part)})"):
            out[row[0]] = {"id": row[0], "job": f"{row[1]}/{row[2]}", "namespace": row[1], "name": row[2],
                           "last_run_id": row[3], "last_status": row[4], "workflow_id": row[5], "spec_id": row[6],
                           "owners": [], "tags": {}, "lineage_complete": True, "incomplete_reason": None}
    s = m.specs.c
    unspecified = [x["id"] for x in out.values() if x["spec_id"] is None]  # a newest run with no JobCreatedEvent yet
    for part in _chunks(unspecified):
        for job_id, spec_id in conn.execute(sa.select(s.job_id, sa.func.max(s.id)).where(s.job_id.in_(part))
                                            .group_by(s.job_id)):
            out[job_id]["spec_id"] = spec_id
    tags: dict[int, dict[str, str]] = {}
    for part in _chunks({x["spec_id"] for x in out.values() if x["spec_id"] is not None}):
        tags.update((row[0], _tags(row[1])) for row in
                    _fetch(conn, f"SELECT id, spec_json FROM specs WHERE id IN ({_ids(part)})"))
    by_run = {x["last_run_id"]: x for x in out.values() if x["last_run_id"] is not None}
    ev = m.run_events.c
    for part in _chunks(by_run):
        for row in conn.execute(sa.select(ev.run_id, ev.body).where(
                ev.run_id.in_(part), ev.kind == "ActionLineageEvent", ev.body.like(_INCOMPLETE))):
            job = by_run[row.run_id]
            job["lineage_complete"] = False
            job["incomplete_reason"] = job["incomplete_reason"] or json.loads(row.body).get("incomplete_reason")
    for job in out.values():
        job["tags"] = tags.get(job["spec_id"], {})
        job["owners"] = owners_of(job["tags"])
    return out


def _tags(spec_json: str) -> dict[str, str]:
    """The ``tags`` of a stored spec, read without parsing the whole spec where its text allows (the store writes
    specs with sorted keys and an indent of 1, so ``"tags"`` is a key at the first level)."""
    at = spec_json.find('\n "tags": ')
    if at < 0:
        return dict(json.loads(spec_json).get("tags") or {})
    value, _ = _DECODER.raw_decode(spec_json, at + len('\n "tags": '))
    return dict(value or {})


def _materialized(conn: Connection, jobs: dict[int, dict[str, Any]]) -> dict[int, str]:
    """job id -> the materialized table of each refresh job among ``jobs`` (its newest run came from the
    scheduler: ``header.schedule``, kept as the run's workflow). The table is the one its RefreshCommand names
    (in the registry when ``consume registry`` also reads the commands' topic), else its spec's ``table`` tag (the
    refresh runner's), else its job name after ``refresh ``."""
    refresh = {x["last_run_id"]: x for x in jobs.values() if x["workflow_id"] is not None}
    commanded: dict[str, str] = {}
    ev = m.run_events.c
    for part in _chunks(refresh):
        for row in conn.execute(sa.select(ev.run_id, ev.body).where(ev.run_id.in_(part),
                                                                    ev.kind == "RefreshCommand")):
            commanded[row.run_id] = json.loads(row.body).get("table")
    out = {}
    for run_id, job in refresh.items():
        name = job["name"]
        out[job["id"]] = (commanded.get(run_id) or job["tags"].get("table")
                          or (name[len(_REFRESH_PREFIX):] if name.startswith(_REFRESH_PREFIX) else name))
    return out


def _names(conn: Connection, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    for part in _chunks(ids):
        out.update((row[0], (row[1], row[2])) for row in
                   _fetch(conn, f"SELECT id, namespace, name FROM datasets WHERE id IN ({_ids(part)})"))
    return out


def _check_column(conn: Connection, dataset_id: int, namespace: str, name: str, column: str) -> None:
    """NotFoundError unless the column is in the dataset's column lineage (as source or sink) or its schema: a
    typo would otherwise answer that nothing reads it."""
    c, st = m.column_edges.c, m.dataset_states.c
    for query in (sa.select(c.source_field).where(c.source_id == dataset_id, c.source_field == column).limit(1),
                  sa.select(c.sink_field).where(c.sink_id == dataset_id, c.sink_field == column).limit(1)):
        if conn.execute(query).first() is not None:
            return
    known: set[str] = set()
    for text in conn.execute(sa.select(st.fields_json).where(st.dataset_id == dataset_id,
                                                             st.fields_json.is_not(None))).scalars():
        known.update(f["name"] for f in json.loads(text))
    if column in known:
        return
    known.update(conn.execute(sa.select(c.source_field).where(c.source_id == dataset_id).distinct()).scalars())
    listed = sorted(known)
    expected = (f"expected one of: {', '.join(listed[:20])}{', ...' if len(listed) > 20 else ''}" if listed
                else "the dataset has no known columns")
    raise NotFoundError(f"column {column!r} of dataset {namespace} {name} is not in the registry (neither its "
                        f"schema nor its column lineage); {expected}")


def impact(conn: Connection, dataset: str, *, namespace: str | None = None, column: str | None = None,
           depth: int | None = None) -> dict[str, Any]:
    """Everything downstream of ``dataset`` (a path, URI, table name, or a name in ``namespace``), or of its
    ``column``, for at most ``depth`` hops (None: all). See the module's docstring for what each part means.

    Returns ``{"root", "column", "depth", "more", "datasets", "columns", "jobs", "materialized_tables",
    "incomplete_jobs"}``; ``more`` says that the depth limit stopped the walk while edges led on.
    """
    if depth is not None and not 1 <= depth <= MAX_DEPTH:
        raise ConfigError(f"depth {depth}; expected 1 to {MAX_DEPTH}, or all for no limit")
    root_id, root_ns, root_name = resolve_dataset(conn, dataset, namespace)
    if column is not None:
        _check_column(conn, root_id, root_ns, root_name, column)
        return _column_impact(conn, (root_id, column), root_ns, root_name, depth)
    walk = walk_datasets(_dataset_edges(conn), root_id, depth)
    more = bool(walk.frontier) and _has_edges(conn, "dataset_edges", walk.frontier)
    job_hops = {job: h + 1 for job, h in walk.job_from.items()}
    for job, h in _readers(conn, walk.hops, depth).items():
        job_hops[job] = min(job_hops.get(job, h + 1), h + 1)
    c = m.column_edges.c
    root_fields = list(conn.execute(sa.select(c.source_field).where(c.source_id == root_id).distinct()).scalars())
    cols = walk_columns(_column_edges(conn), [(root_id, f) for f in root_fields], depth)
    return _answer(conn, root_id, root_ns, root_name, None, depth, more,
                   {d: h for d, h in walk.hops.items() if d != root_id},
                   {x: h for x, h in cols.hops.items() if x[0] != root_id or h > 0}, cols.direct,
                   job_hops, None, walk.job_writes)


def _column_impact(conn: Connection, root: Col, root_ns: str, root_name: str, depth: int | None) -> dict[str, Any]:
    cols = walk_columns(_column_edges(conn), [root], depth)
    more = bool(cols.frontier) and any(
        s in set(cols.frontier) for s, *_ in _column_edges(conn)({x[0] for x in cols.frontier}))
    ds_hops: dict[int, int] = {}
    for (ds, _), h in cols.hops.items():
        if h > 0 and (ds not in ds_hops or h < ds_hops[ds]):
            ds_hops[ds] = h
    writes = {job: {x[0] for x in targets} for job, targets in cols.job_writes.items()}
    return _answer(conn, root[0], root_ns, root_name, root[1], depth, more, ds_hops,
                   {x: h for x, h in cols.hops.items() if x != root}, cols.direct,
                   {job: h + 1 for job, h in cols.job_from.items()}, cols.job_direct, writes)


def _answer(conn: Connection, root_id: int, root_ns: str, root_name: str, column: str | None, depth: int | None,
            more: bool, ds_hops: dict[int, int], col_hops: dict[Col, int], direct: set[Col], job_hops: dict[int, int],
            job_direct: set[int] | None, writes: dict[int, set[int]]) -> dict[str, Any]:
    """The walk's findings with names, owners, completeness and materialized tables, sorted by hops."""
    names = _names(conn, {root_id, *ds_hops, *(x[0] for x in col_hops)})
    jobs = _jobs(conn, job_hops)
    tables = _materialized(conn, jobs)
    # sorted as tuples, then made dicts: a key function per item costs more than the sort at 100k datasets
    datasets = [{"id": d, "namespace": ns, "name": name, "hops": h} for h, name, ns, d in
                sorted((h, names[d][1], names[d][0], d) for d, h in ds_hops.items())]
    columns = [{"dataset_id": x[0], "namespace": names[x[0]][0], "name": names[x[0]][1], "field": x[1], "hops": h,
                "type": "DIRECT" if x in direct else "INDIRECT"} for x, h in col_hops.items()]
    columns.sort(key=lambda x: (x["hops"], x["namespace"], x["name"], x["field"]))
    out_jobs = []
    for job_id, h in job_hops.items():
        job = jobs[job_id]
        item = {"id": job_id, "job": job["job"], "hops": h, "owners": job["owners"],
                "last_run_id": job["last_run_id"], "last_status": job["last_status"],
                "lineage_complete": job["lineage_complete"], "incomplete_reason": job["incomplete_reason"],
                "materialized_table": tables.get(job_id), "workflow_id": job["workflow_id"]}
        if job_direct is not None:
            item["type"] = "DIRECT" if job_id in job_direct else "INDIRECT"
        out_jobs.append(item)
    out_jobs.sort(key=lambda x: (x["hops"], x["job"]))
    materialized = [{"table": x["materialized_table"], "job": x["job"], "workflow_id": x["workflow_id"],
                     "hops": x["hops"], "datasets": sorted(f"{names[d][0]} {names[d][1]}"
                                                           for d in writes.get(x["id"], ()) if d in names)}
                    for x in out_jobs if x["materialized_table"] is not None]
    return {"root": {"id": root_id, "namespace": root_ns, "name": root_name}, "column": column, "depth": depth,
            "more": more, "datasets": datasets, "columns": columns, "jobs": out_jobs,
            "materialized_tables": materialized,
            "incomplete_jobs": [x["job"] for x in out_jobs if not x["lineage_complete"]]}


# -- rendering ---------------------------------------------------------------------------------------------------

#: the CSV's columns: one row per job, dataset and column of the answer
CSV_COLUMNS = ["kind", "hops", "type", "namespace", "name", "field", "job", "owners", "lineage_complete",
               "materialized_table", "workflow_id"]


def csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer as rows of ``CSV_COLUMNS`` (DataHub's impact export is one row per entity, likewise)."""
    rows: list[dict[str, Any]] = []
    for j in result["jobs"]:
        rows.append({"kind": "job", "hops": j["hops"], "type": j.get("type", ""), "namespace": "", "name": "",
                     "field": "", "job": j["job"], "owners": ",".join(j["owners"]),
                     "lineage_complete": "yes" if j["lineage_complete"] else "no",
                     "materialized_table": j["materialized_table"] or "", "workflow_id": j["workflow_id"] or ""})
    for d in result["datasets"]:
        rows.append({"kind": "dataset", "hops": d["hops"], "type": "", "namespace": d["namespace"],
                     "name": d["name"], "field": "", "job": "", "owners": "", "lineage_complete": "",
                     "materialized_table": "", "workflow_id": ""})
    for c in result["columns"]:
        rows.append({"kind": "column", "hops": c["hops"], "type": c["type"], "namespace": c["namespace"],
                     "name": c["name"], "field": c["field"], "job": "", "owners": "", "lineage_complete": "",
                     "materialized_table": "", "workflow_id": ""})
    return rows


def render_text(result: dict[str, Any]) -> list[str]:
    """The answer for people: jobs (owners, DIRECT/INDIRECT, incomplete lineage), materialized tables, datasets
    and columns, each with its hops."""
    root = result["root"]
    what = f"{root['namespace']} {root['name']}" + (f" column {result['column']}" if result["column"] else "")
    lines = [f"impact of {what}: {len(result['jobs'])} jobs, {len(result['datasets'])} datasets, "
             f"{len(result['columns'])} columns"]
    lines.append("jobs:")
    for j in result["jobs"]:
        extra = [f"owners {', '.join(j['owners'])}" if j["owners"] else "no owner tag"]
        if "type" in j:
            extra.insert(0, j["type"])
        if j["materialized_table"]:
            extra.append(f"refreshes {j['materialized_table']}")
        if not j["lineage_complete"]:
            extra.append("lineage INCOMPLETE: may read more than shown"
                         + (f" ({j['incomplete_reason']})" if j["incomplete_reason"] else ""))
        lines.append(f"  {j['hops']}  {j['job']}  ({'; '.join(extra)})")
    if result["materialized_tables"]:
        lines.append("materialized tables:")
        lines += [f"  {t['hops']}  {t['table']}  (workflow {t['workflow_id']}, job {t['job']})"
                  for t in result["materialized_tables"]]
    lines.append("datasets:")
    lines += [f"  {d['hops']}  {d['namespace']} {d['name']}" for d in result["datasets"]]
    if result["columns"]:
        lines.append("columns:")
        lines += [f"  {c['hops']}  {c['namespace']} {c['name']} {c['field']}  {c['type']}" for c in result["columns"]]
    if result["incomplete_jobs"]:
        lines.append(f"incomplete lineage: {', '.join(result['incomplete_jobs'])} may read more than shown")
    if result["more"]:
        lines.append(f"(stopped at depth {result['depth']}; more lies beyond: --depth N or --depth all)")
    return lines
