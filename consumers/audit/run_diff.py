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
- rows and bytes written to each output both runs wrote, where Spark counted them (the outputs' ``row_count``
  and ``byte_count``, summed over the run's succeeded actions), with the ratio. Counts differ from run to run
  too: they are always reported, and make a run ``changed`` only when one is ``unusual``: a ratio below
  ``UNUSUAL_BELOW`` or above ``UNUSUAL_ABOVE`` (the output shrank to less than half or more than doubled), or
  one run wrote nothing where the other wrote something.

What is not: what differs on every run (run ids, times, ``application_id``, the emitter's
``spark.lineagewire.run_id``, a dataset's ``partition_values`` and ``properties`` such as the table
version written).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LIFECYCLE_CHANGES", "UNUSUAL_ABOVE", "UNUSUAL_BELOW", "RunSnapshot", "compare", "render_text", "snapshot",
           "unified_spec_diff"]

#: the lifecycle changes a diff reports; ALTER shows as the schema change it made, OVERWRITE is every write's
LIFECYCLE_CHANGES = ("CREATE", "DROP", "RENAME", "TRUNCATE")
#: spec fields that differ on every run of a job
_PER_RUN_SPEC = frozenset({"application_id"})
#: conf keys that differ on every run of a job
_PER_RUN_CONF = frozenset({"spark.lineagewire.run_id"})
#: a count of rows or bytes written is unusual, and the run changed, when it is below this times the previous run's
UNUSUAL_BELOW = 0.5
#: ... or above this times the previous run's
UNUSUAL_ABOVE = 2.0

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
    #: output -> (rows, bytes) its succeeded actions wrote, summed over those Spark counted (None: none counted)
    written: Mapping[DatasetKey, tuple[int | None, int | None]] = field(default_factory=dict)


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
    written = _Written()
    for ev in events:
        said = _event_lineage(ev)
        if said is None:
            continue
        ins, outs, cols, reason = said
        inputs.update((d["namespace"], d["name"]) for d in ins)
        _merge_outputs(outputs, outs)
        _merge_column_lineage(lineage, cols)
        written.add(ev, outs)
        if reason is not None:
            incomplete.append(reason)
    return RunSnapshot(run_id=run_id, job=job, status=status, duration_ms=duration_ms, spec=spec,
                       inputs=frozenset(inputs), outputs=outputs,
                       column_lineage={k: frozenset(v) for k, v in lineage.items()},
                       lifecycle=_lifecycle_keys(changes), incomplete=tuple(incomplete), written=written.counts)


class _Written:
    """Rows and bytes a run's actions wrote, per output: each action once (the parts of a split action repeat its
    outputs), only actions that succeeded (a failed write's metrics count what it did not commit)."""

    def __init__(self) -> None:
        self.counts: dict[DatasetKey, tuple[int | None, int | None]] = {}
        self._actions: set[Any] = set()

    def add(self, ev: Mapping[str, Any], outs: Iterable[Mapping[str, Any]]) -> None:
        if ev.get("action_status") != "SUCCEEDED" or ev.get("action_id") in self._actions:
            return
        self._actions.add(ev.get("action_id"))
        for d in outs:
            rows, size = d.get("row_count"), d.get("byte_count")
            if rows is None and size is None:
                continue
            key = (d["namespace"], d["name"])
            was_rows, was_size = self.counts.get(key, (None, None))
            self.counts[key] = (_plus(was_rows, rows), _plus(was_size, size))


def _plus(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


_EventLineage = tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], list[Mapping[str, Any]], str | None]


def _event_lineage(ev: Mapping[str, Any]) -> _EventLineage | None:
    """What one event says of its run's lineage: the datasets read, those written, the column lineage, and why
    that lineage is incomplete (None: it is complete). None: an event that carries no lineage."""
    kind = ev["header"]["schema_name"].rsplit(".", 1)[-1]
    if kind == "JobCreatedEvent":
        lin = ev.get("lineage") or {}
        return _listed(lin, "sources"), _listed(lin, "sinks"), _listed(lin, "column_lineage"), None
    if kind != "ActionLineageEvent":
        return None
    reason = None
    if not ev.get("lineage_complete", True):
        reason = f"action {ev.get('action_id')}: {ev.get('incomplete_reason') or 'no reason given'}"
    return _listed(ev, "inputs"), _listed(ev, "outputs"), _listed(ev, "column_lineage"), reason


def _listed(record: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """``record[key]``, where a missing or null list is an empty one."""
    return record.get(key) or []


def _merge_outputs(outputs: dict[DatasetKey, list[dict[str, Any]] | None], outs: Iterable[Mapping[str, Any]]) -> None:
    """Adds the datasets an event wrote: the last fields a schema said win, and a write that said no schema
    leaves the fields an earlier one said."""
    for d in outs:
        key = (d["namespace"], d["name"])
        if d.get("fields") or key not in outputs:
            outputs[key] = list(d["fields"]) if d.get("fields") else outputs.get(key)


def _merge_column_lineage(lineage: dict[ColumnKey, set[ColumnKey]], cols: Iterable[Mapping[str, Any]]) -> None:
    """Adds an event's column lineage: a column's sources are those of every action that wrote it."""
    for c in cols:
        sources = lineage.setdefault((c["namespace"], c["name"], c["field"]), set())
        sources.update((i["namespace"], i["name"], i["field"]) for i in c.get("inputs") or [])


def _lifecycle_keys(changes: Iterable[Mapping[str, Any]]) -> frozenset[tuple[str, str, str, str | None, str | None]]:
    """The run's lifecycle changes a diff reports, as comparable tuples."""
    return frozenset((c["change"], c["namespace"], c["name"],
                      (c.get("previous") or {}).get("namespace"), (c.get("previous") or {}).get("name"))
                     for c in changes if c["change"] in LIFECYCLE_CHANGES)


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


def _only_in(these: Mapping[str, tuple[str, bool]], those: Mapping[str, tuple[str, bool]]) -> list[dict[str, Any]]:
    """The fields of ``these`` that ``those`` does not have, with their type and nullability."""
    return [{"field": p, "type": t, "nullable": n} for p, (t, n) in these.items() if p not in those]


def _differing(old: Mapping[str, tuple[str, bool]], new: Mapping[str, tuple[str, bool]], part: int
               ) -> list[dict[str, Any]]:
    """The fields of both whose type (``part`` 0) or nullability (``part`` 1) changed."""
    return [{"field": p, "before": old[p][part], "after": v[part]} for p, v in new.items()
            if p in old and old[p][part] != v[part]]


def _schema_change(key: DatasetKey, before: list[dict[str, Any]] | None,
                   after: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    if before is None or after is None:  # a run that said no schema is no evidence of a change
        return None
    old, new = _flat(before), _flat(after)
    change = {"added": _only_in(new, old), "removed": _only_in(old, new),
              "retyped": _differing(old, new, 0), "nullability": _differing(old, new, 1)}
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


def _unusual(before: int | None, after: int | None) -> bool:
    """Whether a count of what was written moved out of the usual: see the module's docstring."""
    if before is None or after is None:
        return False
    if before == 0 or after == 0:
        return (before == 0) != (after == 0)
    return not UNUSUAL_BELOW <= after / before <= UNUSUAL_ABOVE


def _written(before: RunSnapshot, after: RunSnapshot) -> list[dict[str, Any]]:
    """Rows and bytes written to each output of both runs that Spark counted in either, with the ratios."""
    out = []
    both = before.outputs.keys() & after.outputs.keys()
    for key in sorted(k for k in both if k in before.written or k in after.written):
        (rows_was, size_was), (rows, size) = before.written.get(key, (None, None)), after.written.get(key, (None, None))
        out.append({**_ds(key),
                    "rows": {"before": rows_was, "after": rows, "ratio": _ratio(rows_was, rows)},
                    "bytes": {"before": size_was, "after": size, "ratio": _ratio(size_was, size)},
                    "unusual": _unusual(rows_was, rows) or _unusual(size_was, size)})
    return out


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
                           "duration": {"before_ms": None, "after_ms": run.duration_ms, "ratio": None},
                           "written": []}
    if previous is None:
        return out
    out["against"], out["against_status"] = previous.run_id, previous.status
    if previous.incomplete:
        out["lineage_complete"] = False
        out["incomplete"][previous.run_id] = list(previous.incomplete)
    out["inputs"] = _added_removed(run.inputs, previous.inputs)
    out["outputs"] = _added_removed(run.outputs.keys(), previous.outputs.keys())
    schemas = [s for k in sorted(run.outputs.keys() & previous.outputs.keys())
               if (s := _schema_change(k, previous.outputs[k], run.outputs[k])) is not None]
    out["schemas"] = schemas
    gone = {(s["namespace"], s["name"], f["field"]) for s in schemas for f in s["added"] + s["removed"]}
    out["column_lineage"] = _lineage_changes(previous, run, gone)
    out["spec"] = _spec_change(previous, run)
    out["lifecycle"] = _lifecycle(run.lifecycle - previous.lifecycle)
    out["duration"] = {"before_ms": previous.duration_ms, "after_ms": run.duration_ms,
                       "ratio": _ratio(previous.duration_ms, run.duration_ms)}
    out["written"] = _written(previous, run)
    out["changed"] = _anything_but_duration(out)
    return out


def _added_removed(now: AbstractSet[DatasetKey], was: AbstractSet[DatasetKey]) -> dict[str, list[dict[str, str]]]:
    return {"added": [_ds(k) for k in sorted(now - was)], "removed": [_ds(k) for k in sorted(was - now)]}


def _anything_but_duration(diff: Mapping[str, Any]) -> bool:
    """Whether a diff says the run changed: durations and counts written differ on every run, so alone they do not
    count, unless a count is unusual."""
    return bool(any(diff[what][how] for what in ("inputs", "outputs") for how in ("added", "removed"))
                or diff["schemas"] or diff["column_lineage"] or diff["spec"] or diff["lifecycle"]
                or any(w["unusual"] for w in diff["written"]))


def _name(d: Mapping[str, Any]) -> str:
    return f"{d['namespace']} {d['name']}"


def render_text(diff: Mapping[str, Any]) -> list[str]:
    """The diff as lines for people (``lineagewire runs diff``)."""
    head = f"run {diff['run_id']} of {diff['job']} ({diff['status'] or 'no status'})"
    if diff["against"] is None:
        return [head, f"no previous successful run of {diff['job']} to compare with"]
    lines = [f"{head} against run {diff['against']} ({diff['against_status'] or 'no status'})"]
    lines += _incomplete_lines(diff)
    lines += _dataset_lines(diff)
    for s in diff["schemas"]:
        lines += _schema_lines(s)
    lines += _column_lineage_lines(diff["column_lineage"])
    if diff["spec"]:
        lines += [f"spec: {ch['key']}: {ch['before']!r} -> {ch['after']!r}" for ch in diff["spec"]["changed"]]
    lines += _lifecycle_lines(diff["lifecycle"])
    lines += _written_lines(diff.get("written") or [])  # absent from diffs stored before counts were compared
    if not diff["changed"]:
        lines.append(f"nothing changed since run {diff['against']}")
    dur = diff["duration"]
    if dur["ratio"] is not None:
        lines.append(f"duration: {dur['after_ms']} ms against {dur['before_ms']} ms ({dur['ratio']}x)")
    return lines


def _written_lines(written: Iterable[Mapping[str, Any]]) -> list[str]:
    """The unusual counts of rows or bytes written, as changes: the usual ones, which move on every run, are in the
    JSON (``--format json``, REST) only, as the text leaves out what does not change the run."""
    lines = []
    for w in written:
        for what in ("rows", "bytes"):
            c = w[what]
            if _unusual(c["before"], c["after"]):
                ratio = f" ({c['ratio']}x)" if c["ratio"] is not None else ""
                lines.append(f"{what} written to {_name(w)}: {c['after']} against {c['before']}{ratio} - unusual")
    return lines


def _incomplete_lines(diff: Mapping[str, Any]) -> list[str]:
    """A warning per run whose lineage was incomplete."""
    if diff["lineage_complete"]:
        return []
    return [f"lineage incomplete in run {run_id} ({'; '.join(reasons)}): this diff may miss changes"
            for run_id, reasons in diff["incomplete"].items()]


def _dataset_lines(diff: Mapping[str, Any]) -> list[str]:
    """The datasets read and written that were added or removed."""
    return [f"{what[:-1]} {how}: {_name(d)}" for what in ("inputs", "outputs") for how in ("added", "removed")
            for d in diff[what][how]]


def _schema_lines(s: Mapping[str, Any]) -> list[str]:
    """One output's schema change, a line per column."""
    lines = [f"schema of {_name(s)}: column added: {f['field']} {f['type']}" for f in s["added"]]
    lines += [f"schema of {_name(s)}: column removed: {f['field']} {f['type']}" for f in s["removed"]]
    lines += [f"schema of {_name(s)}: column retyped: {f['field']} {f['before']} -> {f['after']}" for f in s["retyped"]]
    for f in s["nullability"]:
        now, was = ("nullable" if f[k] else "not null" for k in ("after", "before"))
        lines.append(f"schema of {_name(s)}: column {f['field']} {now} (was {was})")
    return lines


def _column_lineage_lines(changes: Iterable[Mapping[str, Any]]) -> list[str]:
    lines = []
    for c in changes:
        moves = [f"+{_name(s)} {s['field']}" for s in c["added"]] + [f"-{_name(s)} {s['field']}" for s in c["removed"]]
        lines.append(f"column lineage of {_name(c)} {c['field']}: {', '.join(moves)}")
    return lines


def _lifecycle_lines(changes: Iterable[Mapping[str, Any]]) -> list[str]:
    lines = []
    for ch in changes:
        was = f" (was {_name(ch['previous'])})" if ch["previous"] else ""
        lines.append(f"lifecycle: {ch['change']} {_name(ch)}{was}")
    return lines
