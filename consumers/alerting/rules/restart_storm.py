"""``restart_storm``: more than ``max_restarts`` restarts or failed attempts of a job within ``window``.
Clears once the window holds no more than ``max_restarts`` of them again (checked on events and the clock)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from lineagewire.consumers.alerting.model import Signal, parse_duration

from . import register
from .base import STATUS_EVENT, Rule, RuleParams

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Facts, JobState, Observation


class RestartStormParams(RuleParams):
    max_restarts: int = Field(3, ge=0)
    window: float = 3600.0

    @field_validator("window", mode="before")
    @classmethod
    def _seconds(cls, v: object) -> float:
        return parse_duration(v)


def _count(js: JobState, since: float) -> int:
    n = 0
    for t in reversed(js.restarts):
        if t < since:
            break
        n += 1
    return n


@register
class RestartStormRule(Rule):
    kind = "restart_storm"
    Params = RestartStormParams
    event_kinds = frozenset({STATUS_EVENT})
    statuses = frozenset({"RESTARTING", "FAILED", "RUNNING", "FINISHED"})
    timer = True

    def _verdict(self, js: JobState, at: dt.datetime) -> Signal:
        labels = self.alert_labels(js.namespace, js.job, js.tags)
        n = _count(js, at.timestamp() - self.params.window)
        if n > self.params.max_restarts:
            return self.fire(labels, at, summary=f"{js.namespace}/{js.job}: {n} restarts or failed attempts in "
                             f"{int(self.params.window)}s (limit {self.params.max_restarts})", restarts=str(n))
        return self.clear(labels, at)

    def evaluate(self, obs: Observation) -> list[Signal]:
        return [self._verdict(obs.job_state, obs.at)]

    def check(self, now: dt.datetime, facts: Facts) -> list[Signal]:
        # Only windows that are draining matter on the clock: a storm ends by time passing.
        since = now.timestamp() - self.params.window
        return [self._verdict(js, now) for js in facts.jobs.values()
                if js.restarts and js.restarts[-1] >= since - self.params.window
                and self.matches(js.namespace, js.job, js.tags)]
