"""``illegal_transition``: a status change Flink's JobStatus state machine (and Ververica's Job lifecycle)
forbids, an ``old_status`` that contradicts the run's last known status, or an event out of per-run
sequence order. A later run of the job that finishes cleanly clears it. Events ingested from OpenLineage are held
to what OpenLineage allows (``ingested_violation``): a repeated status or a late event is not a transition."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineagewire.consumers.alerting.model import Signal

from . import register
from .base import STATUS_EVENT, Rule

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Observation

_ENDS = {"FAILED", "CANCELED", "FINISHED"}
#: status -> the statuses it may change to (after org.apache.flink.api.common.JobStatus and the
#: ExecutionGraph's transitions; a reporter may skip FAILING/CANCELLING, so those ends are allowed directly)
ALLOWED: dict[str, frozenset[str]] = {
    "INITIALIZING": frozenset({"CREATED", "RUNNING", "FAILED", "CANCELED", "SUSPENDED"}),
    "CREATED": frozenset({"RUNNING", "FAILING", "CANCELLING", "SUSPENDED", "RECONCILING", *_ENDS}),
    "RUNNING": frozenset({"FAILING", "RESTARTING", "CANCELLING", "SUSPENDED", "RECONCILING", *_ENDS}),
    "FAILING": frozenset({"RESTARTING", "FAILED", "CANCELLING", "CANCELED", "SUSPENDED"}),
    "RESTARTING": frozenset({"CREATED", "RUNNING", "FAILED", "CANCELLING", "CANCELED", "SUSPENDED",
                             "RECONCILING"}),
    "CANCELLING": frozenset({"CANCELED", "FAILED", "SUSPENDED"}),
    "SUSPENDED": frozenset({"RECONCILING", "CREATED", "RUNNING", "INITIALIZING"}),
    "RECONCILING": frozenset({"RUNNING", "CREATED", "FAILING", "RESTARTING", "CANCELLING", "SUSPENDED", *_ENDS}),
    "UNKNOWN": frozenset({"INITIALIZING", "CREATED", "RUNNING", "FAILING", "RESTARTING", "CANCELLING",
                          "SUSPENDED", "RECONCILING", "UNKNOWN", *_ENDS}),
    # Globally terminal: a run changes no more.
    "FAILED": frozenset(), "CANCELED": frozenset(), "FINISHED": frozenset(),
}


def violation(previous: str | None, old: str | None, new: str) -> str | None:
    """Why ``previous``/``old`` -> ``new`` is illegal, or None."""
    if previous is not None and old is not None and old != previous:
        return f"the event says the run was {old}, but its last status was {previous}"
    src = previous if previous is not None else old
    if src is not None and new not in ALLOWED.get(src, frozenset()):
        return f"{src} -> {new} is not a legal transition" + (" (the run had ended)" if src in _ENDS else "")
    return None


def ingested_violation(obs: Observation) -> str | None:
    """Why an ingested OpenLineage status event is illegal, or None. OpenLineage producers repeat RUNNING (every
    event of a run may say it) and send events out of order (the facts order a run's events by event time, and a
    late status changes nothing), so neither is a transition; what is left is the state machine."""
    new = obs.event["new_status"]
    if obs.out_of_order or new == obs.previous_status:
        return None
    return violation(obs.previous_status, None, new)


@register
class IllegalTransitionRule(Rule):
    kind = "illegal_transition"
    event_kinds = frozenset({STATUS_EVENT})

    def evaluate(self, obs: Observation) -> list[Signal]:
        labels = self.alert_labels(obs.namespace, obs.job, obs.tags)
        h = obs.event["header"]
        run = obs.run
        why: str | None
        if obs.ingested:
            why = ingested_violation(obs)
        elif obs.out_of_order:
            why = f"event sequence {h['sequence']} arrived after {run.max_seq if run else '?'} (out of order)"
        else:
            why = violation(obs.previous_status, obs.event.get("old_status"), obs.event["new_status"])
        if why:
            return [self.fire(labels, obs.at, summary=f"{obs.namespace}/{obs.job} run {h['run_id']}: {why}",
                              run_id=h["run_id"], reason=why, run=h["run_id"])]
        return self.clear_on_clean_finish(obs, labels)
