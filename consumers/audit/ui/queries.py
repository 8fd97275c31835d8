"""What the UI's pages ask the registry: pure reads over ``registry_model``, as dicts for the templates.

Kept apart from ``registry_query`` (the CLI's and REST API's answers) because the pages ask other
questions: one page of jobs with their last run, a sparkline and failures; a dataset's schema history;
the lineage neighbourhood of a dataset or job in both directions at once, with jobs as nodes.
Every query is bounded (a page, a depth, ``IN`` lists in chunks) so that a page answers in milliseconds
on a registry of 100k runs (``python -m bench.ui``).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .. import registry_model as m
from ..registry_producer import producer_info
from ..registry_query import NotFoundError, dataset_lifecycle, run_diff

__all__ = [
    "PAGE_SIZE",
    "dataset_page",
    "graph",
    "job_page",
    "job_status",
    "jobs_page",
    "last_successful_write",
    "promised_datasets",
    "run_page",
    "run_status",
    "search",
]

#: rows per page of the jobs and runs tables
PAGE_SIZE = 50
#: durations in a job's sparkline
SPARK_RUNS = 20
#: most nodes a graph answer holds; a wider neighbourhood is cut and marked ``more``
MAX_GRAPH_NODES = 2000
_CHUNK = 500
_SORTS = {"namespace", "job", "status", "start", "duration"}


def utc(value: Any) -> dt.datetime | None:
    """A stored time as an aware UTC datetime (SQLite hands them back without their zone)."""
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _chunks(ids: Iterable[Any]) -> Iterable[list[Any]]:
    items = sorted(ids)
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


def _since(conn: Connection, when: dt.datetime) -> dt.datetime:
    # Stored in UTC; SQLite keeps no zone, so compare UTC with UTC.
    return when.replace(tzinfo=None) if conn.dialect.name == "sqlite" else when


def _newest_first(conn: Connection) -> list[Any]:
    """A job's runs newest first, in the order of the index ``ix_runs_job_created`` read backwards.

    SQLite sorts NULL first, so DESC already puts a run without a creation time last; saying NULLS LAST
    there would stop it from using the index. PostgreSQL sorts NULL last, so it is said.
    """
    r = m.runs.c
    if conn.dialect.name == "sqlite":
        return [r.created_at.desc(), r.run_id.desc()]
    return [r.created_at.desc().nulls_last(), r.run_id.desc()]


def _last_run_id(conn: Connection, job_id: Any) -> Any:
    r = m.runs.c
    return sa.select(r.run_id).where(r.job_id == job_id).order_by(*_newest_first(conn)).limit(1).scalar_subquery()


def _job_row(conn: Connection, job_id: int) -> Any:
    j = m.jobs.c
    row = conn.execute(sa.select(j.id, j.namespace, j.name, j.first_seen, j.last_seen).where(j.id == job_id)).first()
    if row is None:
        raise NotFoundError(f"job id {job_id} is not in the registry; expected the id of a job on the jobs page")
    return row


def _tags(spec_json: str | None) -> dict[str, str]:
    if not spec_json:
        return {}
    return dict(json.loads(spec_json).get("tags") or {})


#: parsed tags of spec rows: a spec row never changes (it is one snapshot, by hash), so they are kept
_TAGS: dict[tuple[str, int], dict[str, str]] = {}
_TAGS_MAX = 200_000


def _spec_tags(conn: Connection, spec_ids: list[int]) -> dict[int, dict[str, str]]:
    url = str(conn.engine.url)
    missing = [i for i in spec_ids if (url, i) not in _TAGS]
    if len(_TAGS) + len(missing) > _TAGS_MAX:
        _TAGS.clear()
    s = m.specs.c
    for part in _chunks(missing):
        for row in conn.execute(sa.select(s.id, s.spec_json).where(s.id.in_(part))):
            _TAGS[(url, row.id)] = _tags(row.spec_json)
    return {i: _TAGS[(url, i)] for i in spec_ids}


def jobs_page(conn: Connection, *, text: str = "", namespace: str = "", status: str = "", tag: str = "",
              sort: str = "job", desc: bool = False, page: int = 1, now: dt.datetime | None = None,
              page_size: int = PAGE_SIZE) -> dict[str, Any]:
    """One page of jobs with their last run, filtered and sorted; sparkline and 24 h failures per job."""
    now = now or dt.datetime.now(dt.UTC)
    j = m.jobs.c
    last = m.runs.alias("last")
    spec = m.specs.alias("spec")
    query = (sa.select(j.id, j.namespace, j.name, last.c.run_id, last.c.status, last.c.started_at,
                       last.c.created_at, last.c.duration_ms, last.c.ended_at, last.c.producer,
                       last.c.producer_version, spec.c.spec_json)
             .select_from(m.jobs.outerjoin(last, last.c.run_id == _last_run_id(conn, j.id))
                          .outerjoin(spec, spec.c.id == last.c.spec_id)))
    jobs_wanted = _jobs_wanted(text, namespace)
    query = query.where(*jobs_wanted)
    if status:
        query = query.where(last.c.status.is_(None) if status == "NONE" else last.c.status == status)
    if tag:
        query = query.where(last.c.spec_id.in_(_tagged_specs(conn, tag)))
    order = _jobs_order(last, sort, desc)
    if status or tag:
        total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
    else:  # the last run does not change the count: count jobs without looking for it
        total = conn.execute(sa.select(sa.func.count()).select_from(m.jobs).where(*jobs_wanted)).scalar_one()
    rows = conn.execute(query.order_by(*order).limit(page_size).offset((page - 1) * page_size)).fetchall()
    ids = [row.id for row in rows]
    failures = _failures_since(conn, ids, now - dt.timedelta(hours=24)) if ids else {}
    sparks = _recent_durations(conn, ids)
    jobs = [_job_item(row, sparks[row.id], failures.get(row.id, 0)) for row in rows]
    namespaces = list(conn.execute(sa.select(j.namespace).distinct().order_by(j.namespace)).scalars())
    return {"jobs": jobs, "total": total, "page": page, "pages": max(1, -(-total // page_size)),
            "namespaces": namespaces}


def _jobs_wanted(text: str, namespace: str) -> list[sa.ColumnElement[bool]]:
    """The conditions on a job itself of the jobs page's filters (its name or namespace containing ``text``, its
    namespace): the count needs no more when no filter is on the last run."""
    j = m.jobs.c
    wanted = []
    if text:
        wanted.append(sa.or_(j.name.contains(text, autoescape=True), j.namespace.contains(text, autoescape=True)))
    if namespace:
        wanted.append(j.namespace == namespace)
    return wanted


def _jobs_order(last: Any, sort: str, desc: bool) -> list[Any]:
    """The jobs page's order: by ``sort`` (of ``_SORTS``; the job's name otherwise), empty values last, then by
    namespace and name. ``last`` is the joined last run."""
    j = m.jobs.c
    columns = {"namespace": j.namespace, "job": j.name, "status": last.c.status,
               "start": sa.func.coalesce(last.c.started_at, last.c.created_at), "duration": last.c.duration_ms}
    col = columns[sort if sort in _SORTS else "job"]
    return [col.desc().nulls_last() if desc else col.asc().nulls_last(), j.namespace, j.name]


def _job_item(row: Any, sparkline: list[Any], failures: int) -> dict[str, Any]:
    """A job of the jobs page: its last run, the durations of its recent runs, its failures in 24 h and its tags."""
    return {"id": row.id, "namespace": row.namespace, "name": row.name, "last_run": row.run_id,
            "status": row.status, "start": utc(row.started_at or row.created_at), "duration_ms": row.duration_ms,
            "sparkline": sparkline, "failures_24h": failures, "tags": _tags(row.spec_json),
            "producer": producer_info(row.producer, row.producer_version)}


def _tagged_specs(conn: Connection, tag: str) -> list[int]:
    """The ids of the specs that have ``tag`` (``key`` or ``key=value``): narrowed in SQL on the JSON text,
    then checked on the parsed tags."""
    key, value = (part.strip() for part in [*tag.split("=", 1), ""][:2])
    text_of = json.dumps(key) + (": " + json.dumps(value) if value else "")  # as the store writes the spec
    s = m.specs.c
    candidates = list(conn.execute(sa.select(s.id).where(s.spec_json.contains(text_of, autoescape=True))).scalars())
    tags = _spec_tags(conn, candidates)
    return [i for i in candidates if key in tags[i] and (not value or tags[i][key] == value)]


def _failures_since(conn: Connection, job_ids: list[int], since: dt.datetime) -> dict[int, int]:
    """job id -> its runs that failed since ``since`` (jobs without any are left out)."""
    r = m.runs.c
    return dict(conn.execute(
        sa.select(r.job_id, sa.func.count()).where(r.job_id.in_(job_ids), r.status == "FAILED",
                                                   r.ended_at >= _since(conn, since))
        .group_by(r.job_id)).fetchall())


def _recent_durations(conn: Connection, job_ids: list[int]) -> dict[int, list[Any]]:
    """job id -> the durations of its last ``SPARK_RUNS`` runs, oldest first: every job's in one query."""
    sparks: dict[int, list[Any]] = {i: [] for i in job_ids}
    if not job_ids:
        return sparks
    r = m.runs.c
    rank = sa.func.row_number().over(partition_by=r.job_id, order_by=_newest_first(conn)).label("rank")
    recent = sa.select(r.job_id, r.duration_ms, rank).where(r.job_id.in_(job_ids)).subquery()
    for job_id, duration in conn.execute(sa.select(recent.c.job_id, recent.c.duration_ms)
                                         .where(recent.c.rank <= SPARK_RUNS)
                                         .order_by(recent.c.job_id, recent.c.rank.desc())):
        sparks[job_id].append(duration)
    return sparks


def job_status(conn: Connection, job_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Each job's last run (for the live update of the jobs page)."""
    j = m.jobs.c
    last = m.runs.alias("last")
    out = {}
    for part in _chunks(job_ids):
        for row in conn.execute(sa.select(j.id, last.c.run_id, last.c.status, last.c.started_at, last.c.created_at,
                                          last.c.duration_ms)
                                .select_from(m.jobs.join(last, last.c.run_id == _last_run_id(conn, j.id)))
                                .where(j.id.in_(part))):
            out[row.id] = {"run_id": row.run_id, "status": row.status,
                           "start": _iso(utc(row.started_at or row.created_at)), "duration_ms": row.duration_ms}
    return out


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def run_status(conn: Connection, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each run's status, times and duration (for the live update of pages showing runs)."""
    r = m.runs.c
    out = {}
    for part in _chunks(run_ids):
        for row in conn.execute(sa.select(r.run_id, r.status, r.started_at, r.ended_at, r.duration_ms)
                                .where(r.run_id.in_(part))):
            out[row.run_id] = {"status": row.status, "started_at": _iso(utc(row.started_at)),
                               "ended_at": _iso(utc(row.ended_at)), "duration_ms": row.duration_ms}
    return out


def _run_row(row: Any) -> dict[str, Any]:
    return {"run_id": row.run_id, "status": row.status, "lifecycle_state": row.lifecycle_state,
            "created_at": utc(row.created_at), "started_at": utc(row.started_at), "ended_at": utc(row.ended_at),
            "duration_ms": row.duration_ms, "restarts": row.restarts, "error_class": row.error_class,
            "error_message": row.error_message, "workflow_id": row.workflow_id, "nominal_time": utc(row.nominal_time),
            "parent_run_id": row.parent_run_id, "producer": producer_info(row.producer, row.producer_version)}


def job_page(conn: Connection, job_id: int, *, page: int = 1, page_size: int = PAGE_SIZE) -> dict[str, Any]:
    """A job: its runs (newest first, paged, with attempts), the newest spec and the diff of its last change."""
    job = _job_row(conn, job_id)
    r, s = m.runs.c, m.specs.c
    total = conn.execute(sa.select(sa.func.count()).where(r.job_id == job_id)).scalar_one()
    rows = conn.execute(sa.select(m.runs).where(r.job_id == job_id).order_by(*_newest_first(conn))
                        .limit(page_size).offset((page - 1) * page_size)).fetchall()
    runs = [_run_row(row) for row in rows]
    _number_attempts(conn, job_id, runs)
    specs = conn.execute(sa.select(s.id, s.spec_json, s.first_seen, s.first_run_id).where(s.job_id == job_id)
                         .order_by(s.first_seen.desc(), s.id.desc()).limit(2)).fetchall()
    diff = _spec_diff(specs[1], specs[0]) if len(specs) == 2 else None
    workflows = sorted({x["workflow_id"] for x in runs if x["workflow_id"]})
    return {"id": job.id, "namespace": job.namespace, "name": job.name, "first_seen": utc(job.first_seen),
            "last_seen": utc(job.last_seen), "runs": runs, "total": total, "page": page,
            "pages": max(1, -(-total // page_size)),
            "spec": specs[0].spec_json if specs else None, "spec_since": utc(specs[0].first_seen) if specs else None,
            "spec_diff": diff, "workflows": workflows}


def _number_attempts(conn: Connection, job_id: int, runs: list[dict[str, Any]]) -> None:
    """Sets each run's ``attempt``: a refresh's runs of one nominal time count up; any other run is attempt 1."""
    r = m.runs.c
    nominal = {(x["workflow_id"], x["nominal_time"]) for x in runs if x["workflow_id"]}
    attempts: dict[tuple[Any, Any], list[str]] = {}
    for wf, nt in nominal:
        attempts[(wf, nt)] = list(conn.execute(
            sa.select(r.run_id).where(r.job_id == job_id, r.workflow_id == wf,
                                      r.nominal_time.is_(None) if nt is None else r.nominal_time == _since(conn, nt))
            .order_by(r.created_at.nulls_last(), r.run_id)).scalars())
    for x in runs:
        ids = attempts.get((x["workflow_id"], x["nominal_time"])) if x["workflow_id"] else None
        x["attempt"] = ids.index(x["run_id"]) + 1 if ids and x["run_id"] in ids else 1


def _spec_diff(before: Any, after: Any) -> str:
    """A unified diff between two specs of a job (rows with ``spec_json`` and ``first_run_id``)."""
    return "".join(difflib.unified_diff(before.spec_json.splitlines(keepends=True),
                                        after.spec_json.splitlines(keepends=True),
                                        fromfile=f"spec of run {before.first_run_id}",
                                        tofile=f"spec of run {after.first_run_id}"))


def _datasets_by_id(conn: Connection, ids: Iterable[int]) -> dict[int, Any]:
    d = m.datasets.c
    out: dict[int, Any] = {}
    for part in _chunks(set(ids)):
        out.update({row.id: row for row in conn.execute(sa.select(d.id, d.namespace, d.name).where(d.id.in_(part)))})
    return out


def run_page(conn: Connection, run_id: str) -> dict[str, Any]:
    """A run: what changed since its job's previous successful run, transitions (with error stacks), actions from
    its events, inputs and outputs."""
    row = conn.execute(sa.select(m.runs, m.jobs.c.namespace, m.jobs.c.name)
                       .join(m.jobs, m.jobs.c.id == m.runs.c.job_id).where(m.runs.c.run_id == run_id)).first()
    if row is None:
        raise NotFoundError(f"run {run_id!r} is not in the registry; expected a run id from a job's page")
    out = {"job_id": row.job_id, "namespace": row.namespace, "job": row.name, **_run_row(row)}
    t, e = m.transitions.c, m.run_events.c
    out["transitions"] = [
        {"sequence": x.sequence, "time": utc(x.transition_time), "old_status": x.old_status,
         "new_status": x.new_status, "lifecycle_state": x.lifecycle_state, "restarts": x.restarts,
         "duration_ms": x.duration_ms, "error_class": x.error_class, "error_message": x.error_message,
         "error_stack": x.error_stack}
        for x in conn.execute(sa.select(m.transitions).where(t.run_id == run_id)
                              .order_by(t.transition_time, t.sequence))]
    # in the order they happened: an ingested run's events may have come out of order
    events = conn.execute(sa.select(e.event_id, e.kind, e.sequence, e.event_time, e.body).where(e.run_id == run_id)
                          .order_by(e.event_time, e.sequence)).fetchall()
    out["events"] = [{"event_id": x.event_id, "kind": x.kind, "sequence": x.sequence, "time": utc(x.event_time)}
                     for x in events]
    names = {(d.namespace, d.name): d.id for d in conn.execute(
        sa.select(m.datasets.c.id, m.datasets.c.namespace, m.datasets.c.name)
        .join(m.run_datasets, m.run_datasets.c.dataset_id == m.datasets.c.id)
        .where(m.run_datasets.c.run_id == run_id))}
    out["actions"] = [_action_item(x.event_id, json.loads(x.body), names) for x in events
                      if x.kind == "ActionLineageEvent"]
    out["inputs"], out["outputs"] = _run_datasets(conn, run_id)
    out["diff"] = run_diff(conn, run_id)  # the row stored when the run ended; computed for a run still going
    return out


def _run_datasets(conn: Connection, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The datasets a run read, and those it wrote (with the operation), by namespace and name."""
    rd, d = m.run_datasets.c, m.datasets.c
    io = conn.execute(sa.select(rd.direction, rd.operation, d.id, d.namespace, d.name)
                      .join(m.datasets, d.id == rd.dataset_id).where(rd.run_id == run_id)
                      .order_by(d.namespace, d.name)).fetchall()
    return ([{"id": x.id, "namespace": x.namespace, "name": x.name} for x in io if x.direction == "in"],
            [{"id": x.id, "namespace": x.namespace, "name": x.name, "operation": x.operation}
             for x in io if x.direction == "out"])


def _action_item(event_id: str, ev: dict[str, Any], names: dict[tuple[str, str], int]) -> dict[str, Any]:
    """An action of the run page, from its ActionLineageEvent ``ev``: its datasets with their registry ids
    (``names``: by namespace and name) and its column lineage."""
    return {
        "event_id": event_id, "name": ev["action_name"], "action_id": ev["action_id"],
        "status": ev["action_status"], "duration_ms": ev.get("duration_ms"), "sql": ev.get("sql"),
        "plan_node": ev.get("plan_node"), "lineage_complete": ev["lineage_complete"],
        "incomplete_reason": ev.get("incomplete_reason"), "part": ev.get("part"), "parts": ev.get("parts"),
        "inputs": [{"namespace": d["namespace"], "name": d["name"], "id": names.get((d["namespace"], d["name"]))}
                   for d in ev["inputs"]],
        "outputs": [{"namespace": d["namespace"], "name": d["name"], "operation": d.get("operation"),
                     "id": names.get((d["namespace"], d["name"]))} for d in ev["outputs"]],
        "columns": [{"sink": f"{c['name']} {c['field']}", "field": c["field"], "inputs": [
            {"source": f"{i['name']} {i['field']}",
             "transformations": ", ".join(f"{tr['type']}/{tr['subtype']}" for tr in i.get("transformations") or [])}
            for i in c["inputs"]]} for c in ev["column_lineage"]],
        "error": ev.get("error")}


def event_body(conn: Connection, event_id: str) -> dict[str, Any]:
    """One stored event as JSON; NotFoundError names the id."""
    body = conn.execute(sa.select(m.run_events.c.body).where(m.run_events.c.event_id == event_id)).scalar()
    if body is None:
        raise NotFoundError(f"event {event_id!r} is not in the registry; expected an event id from a run's page")
    return dict(json.loads(body))


def _schema_diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, list[str]]:
    old = {f["name"]: f["type"] for f in before}
    new = {f["name"]: f["type"] for f in after}
    return {"added": [f"{n} {t}" for n, t in new.items() if n not in old],
            "removed": [f"{n} {t}" for n, t in old.items() if n not in new],
            "retyped": [f"{n} {old[n]} → {t}" for n, t in new.items() if n in old and old[n] != t]}


def dataset_page(conn: Connection, dataset_id: int) -> dict[str, Any]:
    """A dataset: names and aliases, schema with history, versions, producers and consumers, columns."""
    d, a = m.datasets.c, m.dataset_aliases.c
    row = conn.execute(sa.select(m.datasets).where(d.id == dataset_id)).first()
    if row is None:
        raise NotFoundError(f"dataset id {dataset_id} is not in the registry; expected the id of a dataset "
                            "(see the search page)")
    aliases = [{"namespace": x.namespace, "name": x.name, "type": x.type}
               for x in conn.execute(sa.select(a.namespace, a.name, a.type).where(a.dataset_id == dataset_id)
                                     .order_by(a.namespace, a.name))]
    lifecycle = dataset_lifecycle(conn, dataset_id)
    states = _states(conn, dataset_id, lifecycle["previous_names"])
    versions = [{"version": x.version, "run_id": x.run_id, "direction": x.direction, "seen_at": utc(x.seen_at)}
                for x in states if x.version is not None]
    schema, history = _schema_history(states, {p["id"]: p["name"] for p in lifecycle["previous_names"]})
    r = m.runs.c
    rd, j = m.run_datasets.c, m.jobs.c
    io = {}
    for direction in ("out", "in"):
        io[direction] = [{"job_id": x.id, "namespace": x.namespace, "name": x.name, "runs": x.runs,
                          "last_seen": utc(x.last_seen)}
                         for x in conn.execute(
                             sa.select(j.id, j.namespace, j.name, sa.func.count().label("runs"),
                                       sa.func.max(rd.seen_at).label("last_seen"))
                             .select_from(m.run_datasets.join(m.runs, r.run_id == rd.run_id)
                                          .join(m.jobs, j.id == r.job_id))
                             .where(rd.dataset_id == dataset_id, rd.direction == direction)
                             .group_by(j.id, j.namespace, j.name).order_by(j.namespace, j.name))]
    c = m.column_edges.c
    columns = {f["name"] for f in schema}
    columns.update(conn.execute(sa.select(c.sink_field).where(c.sink_id == dataset_id).distinct()).scalars())
    columns.update(conn.execute(sa.select(c.source_field).where(c.source_id == dataset_id).distinct()).scalars())
    return {"id": row.id, "namespace": row.namespace, "name": row.name, "format": row.format,
            "first_seen": utc(row.first_seen), "last_seen": utc(row.last_seen), "aliases": aliases,
            "schema": schema, "schema_history": list(reversed(history)), "versions": list(reversed(versions)),
            "producers": io["out"], "consumers": io["in"], "columns": sorted(columns), "lifecycle": lifecycle,
            "changes": list(reversed(lifecycle["changes"]))}


def last_successful_write(conn: Connection, dataset_id: int) -> dict[str, Any] | None:
    """The dataset's last write by a run that ended FINISHED (a failed run's overwrite is nothing to read as
    fresh), as the alerting service's freshness promises count it: ``{"at", "run_id", "job", "job_id"}``, the
    time of that run's last action that wrote it (its end when no action names it); None when there is none."""
    rd, r, j = m.run_datasets.c, m.runs.c, m.jobs.c
    row = conn.execute(sa.select(rd.run_id, rd.seen_at, r.ended_at, j.id, j.namespace, j.name)
                       .select_from(m.run_datasets.join(m.runs, r.run_id == rd.run_id).join(m.jobs, j.id == r.job_id))
                       .where(rd.dataset_id == dataset_id, rd.direction == "out", r.status == "FINISHED")
                       .order_by(rd.seen_at.desc()).limit(1)).first()
    if row is None:
        return None
    ds = conn.execute(sa.select(m.datasets.c.namespace, m.datasets.c.name)
                      .where(m.datasets.c.id == dataset_id)).one()
    e = m.run_events.c
    at = None
    for when, body in conn.execute(sa.select(e.event_time, e.body).where(e.run_id == row.run_id,
                                                                          e.kind == "ActionLineageEvent")
                                   .order_by(e.event_time.desc())):
        if any((o["namespace"], o["name"]) == (ds.namespace, ds.name) for o in json.loads(body)["outputs"]):
            at = when
            break
    return {"at": utc(at or row.ended_at or row.seen_at), "run_id": row.run_id,
            "job": f"{row.namespace}/{row.name}", "job_id": row.id}


#: datasets a freshness promise's name is looked for among (a table name without its database may match many)
_PROMISED_MAX = 20


def promised_datasets(conn: Connection, promise: Any) -> list[dict[str, Any]]:
    """The registry's datasets a freshness promise (``lineagewire.freshness.Promise``) names, as its ``matches``
    decides: by URI (namespace and name), by path (the name, in any namespace) or by table name (a catalog-table
    alias or the name, ``orders`` matching ``sales.orders``); ``{"id", "namespace", "name"}``, at most
    ``_PROMISED_MAX``."""
    from lineagewire.freshness import dataset_id  # only with promises: it needs croniter

    d, a = m.datasets.c, m.dataset_aliases.c
    if promise.form == "uri":
        ns, name = dataset_id(promise.dataset)
        where = sa.and_(d.namespace == ns, d.name == name)
    elif promise.form == "path":
        where = d.name == (promise.dataset.rstrip("/") or "/")
    else:
        text = promise.dataset.lower()
        named = sa.or_(sa.func.lower(a.name) == text, sa.func.lower(a.name).endswith("." + text, autoescape=True))
        where = sa.or_(d.id.in_(sa.select(a.dataset_id).where(named)), sa.func.lower(d.name) == text,
                       sa.func.lower(d.name).endswith("." + text, autoescape=True))
    rows = conn.execute(sa.select(d.id, d.namespace, d.name).where(where).order_by(d.namespace, d.name)
                        .limit(_PROMISED_MAX)).fetchall()
    aliases: dict[int, list[str]] = {}
    for part in _chunks({x.id for x in rows}):
        for x in conn.execute(sa.select(a.dataset_id, a.name).where(a.dataset_id.in_(part))):
            aliases.setdefault(x.dataset_id, []).append(x.name)
    return [{"id": x.id, "namespace": x.namespace, "name": x.name} for x in rows
            if promise.matches(x.namespace, x.name, aliases.get(x.id, []))]


def _states(conn: Connection, dataset_id: int, previous_names: list[dict[str, Any]]) -> list[Any]:
    """The schema and version states of a dataset, and of the names it had before, each up to its rename, oldest
    first: a renamed table's schema history goes on from its old name's."""
    st = m.dataset_states.c
    until = {p["id"]: dt.datetime.fromisoformat(p["renamed_at"]) for p in previous_names}
    rows = conn.execute(sa.select(st.dataset_id, st.run_id, st.direction, st.fields_json, st.version, st.seen_at)
                        .where(st.dataset_id.in_([dataset_id, *until]))).fetchall()
    kept = [x for x in rows if x.dataset_id == dataset_id or (utc(x.seen_at) or until[x.dataset_id]) <=
            until[x.dataset_id]]
    return sorted(kept, key=lambda x: (utc(x.seen_at) or dt.datetime.min.replace(tzinfo=dt.UTC), x.run_id))


def _schema_history(states: Sequence[Any], earlier: dict[int, str] | None = None
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The last schema of a dataset's ``states`` (oldest first), and its history: the first schema, then each
    change (fields added, removed, retyped); ``earlier``: the names it had before by dataset id, each state of
    one of them marked with that name."""
    history = []
    previous: list[dict[str, Any]] | None = None
    for x in states:
        if not x.fields_json:
            continue
        fields = json.loads(x.fields_json)
        under = earlier.get(x.dataset_id) if earlier else None
        if previous is None:
            history.append({"run_id": x.run_id, "seen_at": utc(x.seen_at), "added": [f"{f['name']} {f['type']}"
                                                                                   for f in fields],
                            "removed": [], "retyped": [], "first": True, "earlier_name": under})
        else:
            change = _schema_diff(previous, fields)
            if any(change.values()):
                history.append({"run_id": x.run_id, "seen_at": utc(x.seen_at), **change, "first": False,
                                "earlier_name": under})
        previous = fields
    return previous or [], history


def job_last_status(conn: Connection, job_ids: Iterable[int]) -> dict[int, str | None]:
    j = m.jobs.c
    last = m.runs.alias("last")
    out: dict[int, str | None] = {}
    for part in _chunks(set(job_ids)):
        out.update({row.id: row.status for row in conn.execute(
            sa.select(j.id, last.c.status)
            .select_from(m.jobs.outerjoin(last, last.c.run_id == _last_run_id(conn, j.id))).where(j.id.in_(part)))})
    return out


def graph(conn: Connection, *, dataset_id: int | None = None, job_id: int | None = None, column: str | None = None,
          depth: int = 2, max_nodes: int = MAX_GRAPH_NODES) -> dict[str, Any]:
    """The lineage neighbourhood of a dataset (or of one of its columns) or of a job, ``depth`` hops each way.

    Datasets and jobs are nodes (a job sits between what it read and what it wrote); in the column view
    the nodes are columns and each edge carries its transformation. A node where the walk stopped while
    edges lead on has ``more``. One query per direction and level, on the edge tables alone.
    """
    if column is not None and dataset_id is not None:
        return _column_graph(conn, dataset_id, column, depth, max_nodes)
    ds_depth: dict[int, int] = {}
    edges: set[tuple[int, int, int]] = set()  # (source dataset, sink dataset, job)
    root, fronts = _walk_start(conn, dataset_id, job_id, ds_depth, edges)
    more = _walk_datasets(conn, fronts, ds_depth, edges, depth, max_nodes)
    names = _datasets_by_id(conn, ds_depth)
    nodes = [{"id": f"d{i}", "kind": "dataset", "namespace": names[i].namespace, "label": names[i].name,
              "url": f"/ui/datasets/{i}", "depth": ds_depth[i], "more": i in more} for i in sorted(ds_depth)]
    nodes += _job_nodes(conn, {x[2] for x in edges})
    out_edges = sorted({(f"d{s}", f"j{jb}") for s, _, jb in edges} | {(f"j{jb}", f"d{t}") for _, t, jb in edges})
    return {"root": root, "column": None, "depth": depth, "nodes": nodes,
            "edges": [{"source": a, "target": b} for a, b in out_edges], "more": bool(more)}


def _job_nodes(conn: Connection, job_ids: set[int]) -> list[dict[str, Any]]:
    """A graph node per job of ``job_ids``, with its name and the status of its last run."""
    if not job_ids:
        return []
    statuses = job_last_status(conn, job_ids)
    jn = {row.id: row for row in conn.execute(sa.select(m.jobs.c.id, m.jobs.c.namespace, m.jobs.c.name)
                                              .where(m.jobs.c.id.in_(sorted(job_ids))))}
    return [{"id": f"j{i}", "kind": "job", "namespace": jn[i].namespace, "label": jn[i].name,
             "url": f"/ui/jobs/{i}", "status": statuses.get(i), "more": False} for i in sorted(job_ids)]


def _walk_start(conn: Connection, dataset_id: int | None, job_id: int | None, ds_depth: dict[int, int],
                edges: set[tuple[int, int, int]]) -> tuple[str, dict[str, set[int]]]:
    """The graph's root node and where the walk starts each way: the dataset; or the datasets the job wrote
    (down) and read (up), at depth 1, with the job's edges."""
    if dataset_id is not None:
        _check_dataset(conn, dataset_id)
        ds_depth[dataset_id] = 0
        return f"d{dataset_id}", {"down": {dataset_id}, "up": {dataset_id}}
    if job_id is None:
        raise NotFoundError("a graph needs a dataset or a job; expected ?dataset=ID or ?job=ID")
    _job_row(conn, job_id)
    e = m.dataset_edges.c
    rows = conn.execute(sa.select(e.source_id, e.sink_id, e.job_id).where(e.job_id == job_id)).fetchall()
    edges.update((x[0], x[1], x[2]) for x in rows)
    fronts = {"down": {x[1] for x in rows}, "up": {x[0] for x in rows}}
    for ds in fronts["down"] | fronts["up"]:
        ds_depth[ds] = 1
    return f"j{job_id}", fronts


def _walk_datasets(conn: Connection, fronts: dict[str, set[int]], ds_depth: dict[int, int],
                   edges: set[tuple[int, int, int]], depth: int, max_nodes: int) -> set[int]:
    """Walk the dataset edges from ``fronts`` down and up to ``depth`` (stopping past ``max_nodes``), adding
    to ``ds_depth`` and ``edges``; return the datasets where the walk stopped while edges lead on."""
    e = m.dataset_edges.c
    more: set[int] = set()
    for direction, here, there in (("down", e.source_id, e.sink_id), ("up", e.sink_id, e.source_id)):
        frontier = fronts[direction]
        level = min((ds_depth[x] for x in frontier), default=0)
        while frontier and level < depth:
            level += 1
            found: set[int] = set()
            for part in _chunks(frontier):
                for x in conn.execute(sa.select(here, there, e.job_id).where(here.in_(part))):
                    src, dst = (x[0], x[1]) if direction == "down" else (x[1], x[0])
                    edges.add((src, dst, x[2]))
                    if x[1] not in ds_depth:
                        ds_depth[x[1]] = level
                        found.add(x[1])
            frontier = found
            if len(ds_depth) > max_nodes:
                break
        for part in _chunks(frontier):
            more.update(conn.execute(sa.select(here).where(here.in_(part)).distinct()).scalars())
    return more


def _check_dataset(conn: Connection, dataset_id: int) -> None:
    if not _datasets_by_id(conn, [dataset_id]):
        raise NotFoundError(f"dataset id {dataset_id} is not in the registry; expected the id of a dataset")


def _column_graph(conn: Connection, dataset_id: int, column: str, depth: int, max_nodes: int) -> dict[str, Any]:
    _check_dataset(conn, dataset_id)
    root = (dataset_id, column)
    seen, edges, more = _walk_columns(conn, root, depth, max_nodes)
    names = _datasets_by_id(conn, {n[0] for n in seen})

    def nid(n: tuple[int, str]) -> str:
        return f"c{n[0]}:{n[1]}"

    def kind(kinds: set[str]) -> str:
        kinds.discard("")
        # an edge with any DIRECT transformation (or none recorded: the value flows as it is) is DIRECT
        return "INDIRECT" if kinds and all(k.startswith("INDIRECT") for k in kinds) else "DIRECT"

    nodes = [{"id": nid(n), "kind": "column", "namespace": names[n[0]].namespace, "label": n[1],
              "dataset": names[n[0]].name, "url": f"/ui/datasets/{n[0]}?column={quote(n[1], safe='')}", "depth": dep,
              "more": n in more} for n, dep in sorted(seen.items(), key=lambda kv: (kv[1], kv[0]))]
    return {"root": nid(root), "column": column, "depth": depth, "nodes": nodes, "more": bool(more),
            "edges": [{"source": nid(a), "target": nid(b), "type": kind(set(k)),
                       "transformation": ", ".join(sorted(k - {""}))} for (a, b), k in sorted(edges.items())]}


def _walk_columns(conn: Connection, root: tuple[int, str], depth: int, max_nodes: int
                  ) -> tuple[dict[tuple[int, str], int], dict[tuple[tuple[int, str], tuple[int, str]], set[str]],
                             set[tuple[int, str]]]:
    """Walk the column edges from ``root`` (dataset id, column) down and up to ``depth`` (stopping past
    ``max_nodes``): each column reached with its depth, each edge with its transformations, and the columns
    where the walk stopped while edges lead on."""
    c = m.column_edges.c
    seen = {root: 0}
    edges: dict[tuple[tuple[int, str], tuple[int, str]], set[str]] = {}
    more: set[tuple[int, str]] = set()
    for here, here_f, there, there_f, down in ((c.source_id, c.source_field, c.sink_id, c.sink_field, True),
                                               (c.sink_id, c.sink_field, c.source_id, c.source_field, False)):
        frontier = {root}
        level = 0
        while frontier and level < depth and len(seen) <= max_nodes:
            level += 1
            found = set()
            for part in _chunks({n[0] for n in frontier}):
                for x in conn.execute(sa.select(here, here_f, there, there_f, c.transformation).where(here.in_(part))):
                    a, b = (x[0], x[1]), (x[2], x[3])
                    if a not in frontier:
                        continue
                    edges.setdefault((a, b) if down else (b, a), set()).update((x[4] or "").split(","))
                    if b not in seen:
                        seen[b] = level
                        found.add(b)
            frontier = found
        for part in _chunks({n[0] for n in frontier}):
            more.update((x[0], x[1]) for x in conn.execute(sa.select(here, here_f).where(here.in_(part)))
                        if (x[0], x[1]) in frontier)
    return seen, edges, more


def search(conn: Connection, text: str, limit: int = 50) -> dict[str, Any]:
    """Jobs, datasets (path, URI, table name via aliases) and columns whose name contains ``text``."""
    if not text:
        return {"jobs": [], "datasets": [], "columns": []}
    j, d, a, c, st = m.jobs.c, m.datasets.c, m.dataset_aliases.c, m.column_edges.c, m.dataset_states.c
    jobs = [{"id": x.id, "namespace": x.namespace, "name": x.name} for x in conn.execute(
        sa.select(j.id, j.namespace, j.name).where(sa.or_(j.name.contains(text, autoescape=True),
                                                          j.namespace.contains(text, autoescape=True)))
        .order_by(j.namespace, j.name).limit(limit))]
    uri = sa.func.concat(d.namespace, d.name) if conn.dialect.name == "postgresql" else d.namespace + d.name
    datasets = [{"id": x.id, "namespace": x.namespace, "name": x.name} for x in conn.execute(
        sa.select(d.id, d.namespace, d.name).where(sa.or_(
            d.name.contains(text, autoescape=True), uri.contains(text, autoescape=True),
            d.id.in_(sa.select(a.dataset_id).where(a.name.contains(text, autoescape=True)))))
        .order_by(d.namespace, d.name).limit(limit))]
    found: set[tuple[int, str]] = set()
    for col_id, col_f in ((c.sink_id, c.sink_field), (c.source_id, c.source_field)):
        found.update((x[0], x[1]) for x in conn.execute(
            sa.select(col_id, col_f).where(col_f.contains(text, autoescape=True)).distinct().limit(limit)))
    for x in conn.execute(sa.select(st.dataset_id, st.fields_json)
                          .where(st.fields_json.contains(json.dumps(text)[1:-1], autoescape=True)).limit(limit)):
        found.update((x.dataset_id, f["name"]) for f in json.loads(x.fields_json) if text.lower() in f["name"].lower())
    names = _datasets_by_id(conn, {f[0] for f in found})
    columns = [{"dataset_id": i, "namespace": names[i].namespace, "dataset": names[i].name, "field": f}
               for i, f in sorted(found)[:limit] if i in names]
    return {"jobs": jobs, "datasets": datasets, "columns": columns}
