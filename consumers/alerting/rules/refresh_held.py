"""``refresh_held``: the scheduler held a table's refresh because an input is broken (issue 41.2).

Fires on a RefreshHeld event (refresh-commands topic, keyed by table): the
scheduler found an input whose writer's last run failed or is still running,
that got a breaking change to a column the table's query reads, or that is
staler than its promise. The alert names the table, the held refresh's
nominal time, and each reason with its input and upstream run; one alert per
table (its labels are the table's refresh job and ``table``), so the hold of
a later fire while the first is still held is the same alert.

The upstream runs' jobs are named in ``upstream_jobs``, so the alert joins
the incident of the upstream failure (the ``run_failed`` of the input's
writer) when there is one, instead of paging again.

The table's next RefreshCommand (the hold released on recovery, or a
``--force``) clears it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lineagewire.consumers.alerting.model import Signal, iso

from . import register
from .base import Rule

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Observation

__all__ = ["RefreshHeldRule"]

#: how each hold condition reads in a page
CONDITIONS = {"UPSTREAM_FAILED": "its writer's last run failed", "UPSTREAM_RUNNING": "its writer is still running",
              "BREAKING_CHANGE": "a breaking change to a column the query reads",
              "INPUT_STALE": "staler than its freshness promise"}


def reason_line(r: dict[str, Any]) -> str:
    """One reason as a line: input, condition, upstream run, detail."""
    ds = r.get("input") or {}
    run = r.get("upstream_run")
    by = f" (run {run['run_id']} of {run['job_namespace']}/{run['job_name']})" if run else " (never written)"
    detail = f": {r['detail']}" if r.get("detail") else ""
    condition = CONDITIONS.get(r.get("condition") or "", r.get("condition") or "OTHER")
    return f"{ds.get('name', '?')}: {condition}{by}{detail}"


@register
class RefreshHeldRule(Rule):
    kind = "refresh_held"
    event_kinds = frozenset({"RefreshHeld", "RefreshCommand"})

    def _labels(self, obs: Observation, table: str) -> dict[str, str]:
        return self.alert_labels(obs.namespace, obs.job, obs.tags, table=table)

    def evaluate(self, obs: Observation) -> list[Signal]:
        event = obs.event
        labels = self._labels(obs, event["table"])
        if obs.kind == "RefreshCommand":
            return [self.clear(labels, obs.at)]
        return [self.fire(labels, obs.at, **{k: v for k, v in held_annotations(event).items() if v and v != "[]"})]


def held_annotations(event: dict[str, Any]) -> dict[str, str | None]:
    """What a RefreshHeld event tells the page: the first reason in the summary, every reason a line, the upstream
    runs, and their jobs (``upstream_jobs``, which the incidents read)."""
    reasons = event.get("reasons") or []
    lines = [reason_line(r) for r in reasons] or ["no reason given"]
    nominal = iso(event.get("nominal_time"))
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    return {"summary": f"refresh of {event['table']} for {nominal} held: {lines[0]}{more}", "table": event["table"],
            "nominal_time": nominal, "command_id": event.get("command_id"), "workflow_id": event.get("workflow_id"),
            "held_since": iso(event.get("held_since")), "reasons": "\n".join(lines), **_upstream(reasons)}


def _upstream(reasons: list[dict[str, Any]]) -> dict[str, str | None]:
    """The conditions, the upstream runs and their jobs of a hold's reasons."""
    runs = [r["upstream_run"] for r in reasons if r.get("upstream_run")]
    jobs = sorted({(r["job_namespace"], r["job_name"]) for r in runs})
    return {"conditions": ", ".join(sorted({r.get("condition") or "OTHER" for r in reasons})),
            "upstream_runs": ", ".join(r["run_id"] for r in runs), "upstream_jobs": json.dumps([list(j) for j in jobs])}
