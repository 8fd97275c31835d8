"""``lineage_incomplete``: the emitter said ``lineage_complete=false`` for an action (something was cut or
timed out); a later run of the job that finishes with complete lineage clears it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineagewire.consumers.alerting.model import Signal

from . import register
from .base import STATUS_EVENT, Rule

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Observation


@register
class LineageIncompleteRule(Rule):
    kind = "lineage_incomplete"
    event_kinds = frozenset({"ActionLineageEvent", STATUS_EVENT})
    statuses = frozenset({"FINISHED"})

    def evaluate(self, obs: Observation) -> list[Signal]:
        labels = self.alert_labels(obs.namespace, obs.job, obs.tags)
        if obs.kind == STATUS_EVENT:
            return self.clear_on_clean_finish(obs, labels)
        if obs.event.get("lineage_complete", True):
            return []
        run_id = obs.event["header"]["run_id"]
        reason = obs.event.get("incomplete_reason") or "no reason given"
        return [self.fire(labels, obs.at, summary=f"{obs.namespace}/{obs.job}: lineage of action "
                          f"{obs.event['action_name']} is incomplete: {reason}", action=obs.event["action_name"],
                          reason=reason, run_id=run_id, run=run_id)]
