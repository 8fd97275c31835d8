"""A human summary of a DataHub proposals file: flows, jobs, runs and column lineage (for the demo and docs)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

__all__ = ["summarize", "summarize_file"]


def summarize(records: list[dict[str, Any]]) -> list[str]:
    """Lines naming the DataFlows, DataJobs (with their column lineage) and DataProcessInstances (last run event)."""
    latest, runs = _upserted(records)
    lines = [f"DataFlow {urn} ({body['name']})" for (urn, aspect), body in sorted(latest.items())
             if aspect == "dataFlowInfo"]
    for (urn, aspect), body in sorted(latest.items()):
        if aspect == "dataJobInputOutput":
            lines += _job_lines(urn, body)
    lines += [_run_line(urn, events, latest) for urn, events in sorted(runs.items())]
    return lines


def _upserted(records: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], dict[str, Any]],
                                                      dict[str, list[dict[str, Any]]]]:
    """The last upserted JSON aspect per (URN, aspect name), and every run event per URN (a timeseries aspect:
    each one is a point, not a replacement)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        body = (r.get("aspect") or {}).get("json")
        if r.get("changeType") != "UPSERT" or not isinstance(body, dict):
            continue
        if r["aspectName"] == "dataProcessInstanceRunEvent":
            runs.setdefault(r["entityUrn"], []).append(body)
        else:
            latest[(r["entityUrn"], r["aspectName"])] = body
    return latest, runs


def _job_lines(urn: str, io: dict[str, Any]) -> list[str]:
    """A DataJob's datasets in and out, then a line per fine-grained lineage."""
    ins = ", ".join(e["destinationUrn"] for e in io.get("inputDatasetEdges") or [])
    outs = ", ".join(e["destinationUrn"] for e in io.get("outputDatasetEdges") or [])
    return [f"DataJob {urn}\n    in:  {ins or '-'}\n    out: {outs or '-'}",
            *(_lineage_line(f) for f in io.get("fineGrainedLineages") or [])]


def _lineage_line(fgl: dict[str, Any]) -> str:
    """A fine-grained lineage: its output columns, the columns they come from, and how."""
    down = ", ".join(_field(d) for d in fgl.get("downstreams") or [])
    ups = ", ".join(_field(u) for u in fgl.get("upstreams") or [])
    return f"    column {down} <- {ups} [{fgl.get('transformOperation')}]"


def _run_line(urn: str, events: list[dict[str, Any]], latest: dict[tuple[str, str], dict[str, Any]]) -> str:
    """A DataProcessInstance: its name, its template and its last run event."""
    last = max(events, key=lambda e: e["timestampMillis"])
    result = (last.get("result") or {}).get("type", "")
    props = latest.get((urn, "dataProcessInstanceProperties"), {})
    parent = latest.get((urn, "dataProcessInstanceRelationships"), {}).get("parentTemplate", "?")
    return f"DataProcessInstance {props.get('name', urn)} of {parent}: {last['status']} {result}".rstrip()


def _field(urn: str) -> str:
    # urn:li:schemaField:(urn:li:dataset:(urn:li:dataPlatform:file,/data/x,PROD),amount) -> /data/x.amount
    inner, _, field = urn[len("urn:li:schemaField:("):-1].rpartition(",")
    name = inner.split(",")[1] if inner.count(",") >= 2 else inner
    return f"{name}.{field}"


def summarize_file(path: str | pathlib.Path) -> str:
    return "\n".join(summarize(json.loads(pathlib.Path(path).read_text())))


if __name__ == "__main__":  # python -m lineagewire.consumers.datahub.summary FILE
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m lineagewire.consumers.datahub.summary PROPOSALS.json")
    print(summarize_file(sys.argv[1]))
