"""A human summary of a DataHub proposals file: flows, jobs, runs and column lineage (for the demo and docs)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

__all__ = ["summarize", "summarize_file"]


def summarize(records: list[dict[str, Any]]) -> list[str]:
    """Lines naming the DataFlows, DataJobs (with their column lineage) and DataProcessInstances (last run event)."""
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
    lines = []
    for (urn, aspect), body in sorted(latest.items()):
        if aspect == "dataFlowInfo":
            lines.append(f"DataFlow {urn} ({body['name']})")
    for (urn, aspect), body in sorted(latest.items()):
        if aspect != "dataJobInputOutput":
            continue
        ins = ", ".join(e["destinationUrn"] for e in body.get("inputDatasetEdges") or [])
        outs = ", ".join(e["destinationUrn"] for e in body.get("outputDatasetEdges") or [])
        lines.append(f"DataJob {urn}\n    in:  {ins or '-'}\n    out: {outs or '-'}")
        for f in body.get("fineGrainedLineages") or []:
            down = ", ".join(_field(d) for d in f.get("downstreams") or [])
            ups = ", ".join(_field(u) for u in f.get("upstreams") or [])
            lines.append(f"    column {down} <- {ups} [{f.get('transformOperation')}]")
    for urn, events in sorted(runs.items()):
        last = max(events, key=lambda e: e["timestampMillis"])
        result = (last.get("result") or {}).get("type", "")
        props = latest.get((urn, "dataProcessInstanceProperties"), {})
        parent = latest.get((urn, "dataProcessInstanceRelationships"), {}).get("parentTemplate", "?")
        lines.append(f"DataProcessInstance {props.get('name', urn)} of {parent}: {last['status']} {result}".rstrip())
    return lines


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
