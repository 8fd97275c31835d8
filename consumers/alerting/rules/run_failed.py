"""``run_failed``: a run ended FAILED; the job's next FINISHED run clears it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from lineagewire.consumers.alerting.model import Signal, gist

from . import register
from .base import STATUS_EVENT, Rule, RuleParams

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Observation


class RunFailedParams(RuleParams):
    stack_lines: int = Field(5, ge=0, description="how many first lines of the stack trace to include")


@register
class RunFailedRule(Rule):
    kind = "run_failed"
    Params = RunFailedParams
    event_kinds = frozenset({STATUS_EVENT})
    statuses = frozenset({"FAILED", "FINISHED"})

    def evaluate(self, obs: Observation) -> list[Signal]:
        labels = self.alert_labels(obs.namespace, obs.job, obs.tags)
        if obs.new_status == "FINISHED":
            return [self.clear(labels, obs.at)]
        err = obs.event.get("error") or {}
        stack = (err.get("stack_trace") or "").splitlines()[: self.params.stack_lines]
        message = err.get("message") or "no error message"
        cls = err.get("error_class") or "unknown error"
        run_id = obs.event["header"]["run_id"]
        return [self.fire(labels, obs.at, summary=f"{obs.namespace}/{obs.job} failed: {cls}: {gist(message)[:200]}",
                          error_class=cls, error_message=message, stack="\n".join(stack), run_id=run_id, run=run_id)]

