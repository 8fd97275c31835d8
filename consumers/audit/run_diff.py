"""Run diff (issue 40.1): what changed between a run and its job's previous successful run.

Pure: plain data in (``snapshot`` of a run's events, spec and lifecycle changes), a JSON-ready dict out
(``compare``). No database here; ``registry_query`` reads what a snapshot needs, and ``registry_store``
stores the diff with the run when the run ends, so that reading it is one row.

What is compared:

- the datasets the run read and wrote, by OpenLineage namespace and name (added, removed);
- each output's schema, nested fields as dotted paths (``customer.name``): columns added, removed,
  retyped, and nullability;
- column lineage: an output column, in both runs, whose source columns changed;
- the spec: every field, ``conf`` and ``tags`` key by key, plus the unified diff the registry's job
  history shows;
- lifecycle changes (CREATE, DROP, RENAME, TRUNCATE) this run made that the previous one did not make;
- the duration, as a ratio. It is reported, but alone it does not make a run ``changed``: durations
  differ on every run.

What is not: what differs on every run (run ids, times, ``application_id``, the emitter's
``spark.lineagewire.run_id``, a dataset's ``partition_values`` and ``properties`` such as the table
version written). Rows and bytes written are not compared: the contract carries no such counts.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LIFECYCLE_CHANGES", "RunSnapshot", "compare", "render_text", "snapshot", "unified_spec_diff"]

#: the lifecycle changes a diff reports; ALTER shows as the schema change it made, OVERWRITE is every write's
LIFECYCLE_CHANGES = ("CREATE", "DROP", "RENAME", "TRUNCATE")
#: spec fields that differ on every run of a job
_PER_RUN_SPEC = frozenset({"application_id"})
#: conf keys that differ on every run of a job
_PER_RUN_CONF = frozenset({"spark.lineagewire.run_id"})

DatasetKey = tuple[str, str]
ColumnKey = tuple[str, str, str]


@dataclass(frozen=True)
class RunSnapshot:
    """What a diff compares of one run."""

    run_id: str
    job: str
    status: str | None = None
    duration_ms: int | None = None
    spec: Mapping[str, Any] | None = None
    inputs: frozenset[DatasetKey] = frozenset()
    #: output -> its fields as the run's last action writing it (with a schema) saw them; None: no schema said
    outputs: Mapping[DatasetKey, list[dict[str, Any]] | None] = field(default_factory=dict)
    #: output column -> the source columns it comes from
    column_lineage: Mapping[ColumnKey, frozenset[ColumnKey]] = field(default_factory=dict)
    #: (change, namespace, name, previous namespace or None, previous name or None)
    lifecycle: frozenset[tuple[str, str, str, str | None, str | None]] = frozenset()
    #: why the lineage is incomplete, one per incomplete action (``[]``: complete)
    incomplete: tuple[str, ...] = ()


def snapshot(run_id: str, job: str, events: Iterable[Mapping[str, Any]], *, status: str | None = None,
             duration_ms: int | None = None, spec: Mapping[str, Any] | None = None,
             changes: Iterable[Mapping[str, Any]] = ()) -> RunSnapshot:
    """A run's snapshot from its events (as stored, in sequence order): JobCreatedEvents' lineage and
    ActionLineageEvents; ``changes``: its lifecycle changes, ``{change, namespace, name, previous}`` with
    ``previous`` None or ``{namespace, name}``."""
    inputs: set[DatasetKey] = set()
    outputs: dict[DatasetKey, list[dict[str, Any]] | None] = {}
    lineage: dict[ColumnKey, set[ColumnKey]] = {}
    incomplete: list[str] = []
    for ev in events:
        kind = ev["header"]["schema_name"].rsplit(".", 1)[-1]
        if kind == "JobCreatedEvent":
            lin = ev.get("lineage") or {}
            ins, outs, cols = lin.get("sources") or [], lin.get("sinks") or [], lin.get("column_lineage") or []
        elif kind == "ActionLineageEvent":
            ins, outs, cols = ev.get("inputs") or [], ev.get("outputs") or [], ev.get("column_lineage") or []
            if not ev.get("lineage_complete", True):
                incomplete.append(f"action {ev.get('action_id')}: {ev.get('incomplete_reason') or 'no reason given'}")
        else:
            continue
        inputs.update((d["namespace"], d["name"]) for d in ins)
        for d in outs:
            key = (d["namespace"], d["name"])
            if d.get("fields") or key not in outputs:
                outputs[key] = list(d["fields"]) if d.get("fields") else outputs.get(key)
        for c in cols:
            sources = lineage.setdefault((c["namespace"], c["name"], c["field"]), set())
            sources.update((i["namespace"], i["name"], i["field"]) for i in c.get("inputs") or [])
    life = frozenset((c["change"], c["namespace"], c["name"],
                      (c.get("previous") or {}).get("namespace"), (c.get("previous") or {}).get("name"))
                     for c in changes if c["change"] in LIFECYCLE_CHANGES)
    return RunSnapshot(run_id=run_id, job=job, status=status, duration_ms=duration_ms, spec=spec,
                       inputs=frozenset(inputs), outputs=outputs,
                       column_lineage={k: frozenset(v) for k, v in lineage.items()}, lifecycle=life,
                       incomplete=tuple(incomplete))


def _ds(key: DatasetKey) -> dict[str, str]:
    return {"namespace": key[0], "name": key[1]}


def _col(key: ColumnKey) -> dict[str, str]:
    return {"namespace": key[0], "name": key[1], "field": key[2]}


def _flat(fields: list[dict[str, Any]] | None, prefix: str = "") -> dict[str, tuple[str, bool]]:
    """path -> (type, nullable) of every field, nested ones as ``parent.child``."""
    out: dict[str, tuple[str, bool]] = {}
    for f in fields or []:
        path = f"{prefix}{f['name']}"
        out[path] = (str(f.get("type")), bool(f.get("nullable", True)))
        if f.get("fields"):
            out.update(_flat(f["fields"], f"{path}."))
    return out


def _schema_change(key: DatasetKey, before: list[dict[str, Any]] | None,
                   after: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    if before is None or after is None:  # a run that said no schema is no evidence of a change
        return None
    old, new = _flat(before), _flat(after)
    change = {
        "added": [{"field": p, "type": t, "nullable": n} for p, (t, n) in new.items() if p not in old],
        "removed": [{"field": p, "type": t, "nullable": n} for p, (t, n) in old.items() if p not in new],
        "retyped": [{"field": p, "before": old[p][0], "after": t} for p, (t, _) in new.items()
                    if p in old and old[p][0] != t],
        "nullability": [{"field": p, "before": old[p][1], "after": n} for p, (_, n) in new.items()
                        if p in old and old[p][1] != n],
    }
    return {**_ds(key), **change} if any(change.values()) else None


def _normal_spec(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """The spec without what differs on every run."""
    out = {k: v for k, v in (spec or {}).items() if k not in _PER_RUN_SPEC}
    if isinstance(out.get("conf"), Mapping):
        out["conf"] = {k: v for k, v in out["conf"].items() if k not in _PER_RUN_CONF}
    return out


def _spec_items(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``field`` -> value, ``conf.KEY`` and ``tags.KEY`` key by key."""
    out: dict[str, Any] = {}
    for k, v in spec.items():
        if isinstance(v, Mapping):
            out.update({f"{k}.{sub}": x for sub, x in v.items()})
        else:
            out[k] = v
    return out


def unified_spec_diff(before: str, after: str, fromfile: str, tofile: str) -> str:
    """The unified diff of two specs' JSON texts, as the registry's job history shows it."""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=fromfile, tofile=tofile))


def _spec_change(before: RunSnapshot, after: RunSnapshot) -> dict[str, Any] | None:
    if before.spec is None or after.spec is None:  # a run without a JobCreatedEvent said nothing of its spec
        return None
    old, new = _normal_spec(before.spec), _normal_spec(after.spec)
    if old == new:
        return None
    a, b = _spec_items(old), _spec_items(new)
    changed = [{"key": k, "before": a.get(k), "after": b.get(k)} for k in sorted(a.keys() | b.keys())
               if a.get(k) != b.get(k) or (k in a) != (k in b)]
    text = unified_spec_diff(json.dumps(old, sort_keys=True, indent=1, default=str) + "\n",
                             json.dumps(new, sort_keys=True, indent=1, default=str) + "\n",
                             f"spec of run {before.run_id}", f"spec of run {after.run_id}")
    return {"changed": changed, "diff": text}


def _lineage_changes(before: RunSnapshot, after: RunSnapshot, schema_gone: set[ColumnKey]
                     ) -> list[dict[str, Any]]:
    """Output columns of both runs whose sources changed (a column added or removed is a schema change)."""
    out = []
    for key in sorted(before.column_lineage.keys() & after.column_lineage.keys()):
        if key in schema_gone:
            continue
        old, new = before.column_lineage[key], after.column_lineage[key]
        if old != new:
            out.append({**_col(key), "added": [_col(s) for s in sorted(new - old)],
                        "removed": [_col(s) for s in sorted(old - new)]})
    return out


def _lifecycle(items: Iterable[tuple[str, str, str, str | None, str | None]]) -> list[dict[str, Any]]:
    return [{"change": c, "namespace": ns, "name": name,
             "previous": {"namespace": pns, "name": pname} if pname is not None else None}
            for c, ns, name, pns, pname in sorted(items, key=lambda x: (x[1], x[2], x[0], x[3] or "", x[4] or ""))]


def _ratio(before: int | None, after: int | None) -> float | None:
    return round(after / before, 2) if before and after is not None else None


def compare(run: RunSnapshot, previous: RunSnapshot | None) -> dict[str, Any]:
    """The diff of ``run`` against ``previous`` (its job's previous successful run; None: there is none).

    ``changed`` is true when anything but the duration differs; ``lineage_complete`` says whether both runs'
    lineage was complete (``incomplete`` lists the actions that were not, per run): a diff over incomplete
    lineage may miss changes or report ones that are only gaps.
    """
    out: dict[str, Any] = {"run_id": run.run_id, "job": run.job, "status": run.status,
                           "against": None, "against_status": None, "changed": False,
                           "lineage_complete": not run.incomplete,
                           "incomplete": {run.run_id: list(run.incomplete)} if run.incomplete else {},
                           "inputs": {"added": [], "removed": []}, "outputs": {"added": [], "removed": []},
                           "schemas": [], "column_lineage": [], "spec": None, "lifecycle": [],
                           "duration": {"before_ms": None, "after_ms": run.duration_ms, "ratio": None}}
    if previous is None:
        return out
    out["against"], out["against_status"] = previous.run_id, previous.status
    if previous.incomplete:
        out["lineage_complete"] = False
        out["incomplete"][previous.run_id] = list(previous.incomplete)
    out["inputs"] = {"added": [_ds(k) for k in sorted(run.inputs - previous.inputs)],
                     "removed": [_ds(k) for k in sorted(previous.inputs - run.inputs)]}
    out["outputs"] = {"added": [_ds(k) for k in sorted(run.outputs.keys() - previous.outputs.keys())],
                      "removed": [_ds(k) for k in sorted(previous.outputs.keys() - run.outputs.keys())]}
    schemas = [s for k in sorted(run.outputs.keys() & previous.outputs.keys())
               if (s := _schema_change(k, previous.outputs[k], run.outputs[k])) is not None]
    out["schemas"] = schemas
    gone = {(s["namespace"], s["name"], f["field"]) for s in schemas for f in s["added"] + s["removed"]}
    out["column_lineage"] = _lineage_changes(previous, run, gone)
    out["spec"] = _spec_change(previous, run)
    out["lifecycle"] = _lifecycle(run.lifecycle - previous.lifecycle)
    out["duration"] = {"before_ms": previous.duration_ms, "after_ms": run.duration_ms,
                       "ratio": _ratio(previous.duration_ms, run.duration_ms)}
    out["changed"] = bool(out["inputs"]["added"] or out["inputs"]["removed"] or out["outputs"]["added"]
                          or out["outputs"]["removed"] or schemas or out["column_lineage"] or out["spec"]
                          or out["lifecycle"])
    return out


def _name(d: Mapping[str, Any]) -> str:
    return f"{d['namespace']} {d['name']}"


def render_text(diff: Mapping[str, Any]) -> list[str]:
    """The diff as lines for people (``lineagewire runs diff``)."""
    head = f"run {diff['run_id']} of {diff['job']} ({diff['status'] or 'no status'})"
    if diff["against"] is None:
        return [head, f"no previous successful run of {diff['job']} to compare with"]
    lines = [f"{head} against run {diff['against']} ({diff['against_status'] or 'no status'})"]
    if not diff["lineage_complete"]:
        for run_id, reasons in diff["incomplete"].items():
            lines.append(f"lineage incomplete in run {run_id} ({'; '.join(reasons)}): this diff may miss changes")
    for what in ("inputs", "outputs"):
        for how in ("added", "removed"):
            lines.extend(f"{what[:-1]} {how}: {_name(d)}" for d in diff[what][how])
    for s in diff["schemas"]:
        for f in s["added"]:
            lines.append(f"schema of {_name(s)}: column added: {f['field']} {f['type']}")
        for f in s["removed"]:
            lines.append(f"schema of {_name(s)}: column removed: {f['field']} {f['type']}")
        for f in s["retyped"]:
            lines.append(f"schema of {_name(s)}: column retyped: {f['field']} {f['before']} -> {f['after']}")
        for f in s["nullability"]:
            now, was = ("nullable" if f[k] else "not null" for k in ("after", "before"))
            lines.append(f"schema of {_name(s)}: column {f['field']} {now} (was {was})")
    for c in diff["column_lineage"]:
        moves = [f"+{_name(s)} {s['field']}" for s in c["added"]] + [f"-{_name(s)} {s['field']}" for s in c["removed"]]
        lines.append(f"column lineage of {_name(c)} {c['field']}: {', '.join(moves)}")
    if diff["spec"]:
        for ch in diff["spec"]["changed"]:
            lines.append(f"spec: {ch['key']}: {ch['before']!r} -> {ch['after']!r}")
    for ch in diff["lifecycle"]:
        was = f" (was {_name(ch['previous'])})" if ch["previous"] else ""
        lines.append(f"lifecycle: {ch['change']} {_name(ch)}{was}")
    if not diff["changed"]:
        lines.append(f"nothing changed since run {diff['against']}")
    dur = diff["duration"]
    if dur["ratio"] is not None:
        lines.append(f"duration: {dur['after_ms']} ms against {dur['before_ms']} ms ({dur['ratio']}x)")
    return lines
