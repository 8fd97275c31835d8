"""``run_stuck``: a run with no terminal status ``max_duration`` after it began, or (streaming queries)
no event at all for ``heartbeat``. Checked on the service's clock, so it fires on a quiet topic too;
the run's terminal status (or, for the heartbeat, its next event) clears it. An ingested OpenLineage run
with no status event at all (only OTHER events, or a JobEvent's or DatasetEvent's static lineage) has no
end to wait for and is never stuck."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from pydantic import field_validator

from lineagewire.consumers.alerting.model import Signal, parse_duration

from . import register
from .base import STATUS_EVENT, Rule, RuleParams

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Facts, Observation, RunState


class RunStuckParams(RuleParams):
    max_duration: float | None = 6 * 3600.0
    heartbeat: float | None = None

    @field_validator("max_duration", "heartbeat", mode="before")
    @classmethod
    def _seconds(cls, v: object) -> float | None:
        return None if v is None else parse_duration(v)


@register
class RunStuckRule(Rule):
    kind = "run_stuck"
    Params = RunStuckParams
    event_kinds = frozenset({STATUS_EVENT, "ActionLineageEvent"})
    timer = True

    def _labels(self, run: RunState, tags: dict[str, str]) -> dict[str, str]:
        return self.alert_labels(run.namespace, run.job, tags, run_id=run.run_id)

    def _reason(self, run: RunState, now: dt.datetime) -> str | None:
        p = self.params
        if p.max_duration is not None and (now - run.created).total_seconds() > p.max_duration:
            return f"no terminal status {int((now - run.created).total_seconds())}s after it began (limit " \
                   f"{int(p.max_duration)}s; last status {run.status})"
        if (p.heartbeat is not None and run.job_type == "STREAMING"
                and (now - run.last_seen).total_seconds() > p.heartbeat):
            return f"streaming query silent for {int((now - run.last_seen).total_seconds())}s (heartbeat " \
                   f"{int(p.heartbeat)}s)"
        return None

    def evaluate(self, obs: Observation) -> list[Signal]:
        run = obs.run
        if run is None:
            return []
        # An event of the run: it ended, or (heartbeat) it is alive again.
        if run.terminal or (self._reason(run, obs.at) is None and self.name in run.flags):
            return [self.clear(self._labels(run, obs.tags), obs.at)]
        return []

    def check(self, now: dt.datetime, facts: Facts) -> list[Signal]:
        out = []
        for run in facts.runs.values():
            if run.terminal or self.name in run.flags or not run.has_lifecycle:
                continue
            js = facts.jobs.get((run.namespace, run.job))
            tags = js.tags if js else {}
            if not self.matches(run.namespace, run.job, tags):
                continue
            reason = self._reason(run, now)
            if reason:
                out.append(self.fire(self._labels(run, tags), now, summary=f"{run.namespace}/{run.job} stuck: "
                                     f"{reason}", run_id=run.run_id, status=run.status or "unknown",
                                     run=run.run_id))
        return out
