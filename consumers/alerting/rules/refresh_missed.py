"""``refresh_missed``: a materialized-table refresh that will not deliver on time.

Fires when a refresh run FAILED on its last attempt (``max_attempts``, the
scheduler's own limit, 3 by default), or when a scheduled refresh is not
COMPLETED by its deadline: the RefreshCommand's ``deadline`` when it has one,
else its nominal time plus ``deadline`` (checked on the clock, so a refresh
whose runner never started, or that the scheduler abandoned, is caught too).
The status is read from the runs' job events (``header.schedule``) and the
commands on the refresh-commands topic, never from the scheduler's database.
The table's next COMPLETED refresh clears it.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from lineagewire.consumers.alerting.model import Signal, iso, parse_duration

from . import register
from .base import STATUS_EVENT, Rule, RuleParams

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Facts, Observation, RefreshState


class RefreshMissedParams(RuleParams):
    deadline: float = 3600.0
    max_attempts: int = Field(3, ge=1)

    @field_validator("deadline", mode="before")
    @classmethod
    def _seconds(cls, v: object) -> float:
        return parse_duration(v)


@register
class RefreshMissedRule(Rule):
    kind = "refresh_missed"
    Params = RefreshMissedParams
    event_kinds = frozenset({STATUS_EVENT})
    statuses = frozenset({"FAILED", "FINISHED"})
    timer = True

    def _labels(self, rs: RefreshState, tags: dict[str, str]) -> dict[str, str]:
        return self.alert_labels(rs.namespace, rs.job, tags, table=rs.table)

    def _fire(self, rs: RefreshState, tags: dict[str, str], at: dt.datetime, why: str) -> Signal:
        return self.fire(self._labels(rs, tags), at, summary=f"refresh of {rs.table} for {iso(rs.nominal_time)} "
                         f"missed: {why}", table=rs.table, nominal_time=iso(rs.nominal_time),
                         command_id=rs.command_id, attempt=str(rs.attempt), error=rs.error, refresh=rs.command_id)

    def due(self, rs: RefreshState) -> dt.datetime:
        return rs.deadline or rs.nominal_time + dt.timedelta(seconds=self.params.deadline)

    def evaluate(self, obs: Observation) -> list[Signal]:
        rs = obs.refresh
        if rs is None:
            return []
        if obs.new_status == "FINISHED":
            return [self.clear(self._labels(rs, obs.tags), obs.at)]
        if obs.new_status == "FAILED" and rs.status == "FAILED" and rs.attempt >= self.params.max_attempts:
            return [self._fire(rs, obs.tags, obs.at, f"FAILED on attempt {rs.attempt} of "
                               f"{self.params.max_attempts}, no retry left")]
        return []

    def check(self, now: dt.datetime, facts: Facts) -> list[Signal]:
        out = []
        for rs in facts.refreshes.values():
            if rs.status in ("COMPLETED", "CANCELED") or self.name in rs.flags or now <= self.due(rs):
                continue
            js = facts.jobs.get((rs.namespace, rs.job))
            tags = {**(js.tags if js else {}), "table": rs.table}
            if self.matches(rs.namespace, rs.job, tags):
                out.append(self._fire(rs, tags, now, f"not COMPLETED by {iso(self.due(rs))} (status {rs.status})"))
        return out
