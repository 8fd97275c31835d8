"""``duration_anomaly``: a FINISHED run far slower than the job's own history.

Baseline: the median and the median absolute deviation (MAD) of the last
``runs`` successful durations (no verdict until that many exist). A run is
anomalous when ``(d - median) / (1.4826 * MAD) > threshold`` and it is also at
least ``min_ratio`` times the median (so a job with very steady runs does not
alert on a few seconds). The job's next normal run clears it.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from pydantic import Field

from lineagewire.consumers.alerting.model import Signal

from . import register
from .base import STATUS_EVENT, Rule, RuleParams

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Observation


class DurationAnomalyParams(RuleParams):
    runs: int = Field(10, ge=3, le=100, description="K: successful runs in the baseline")
    threshold: float = Field(3.0, gt=0, description="robust z-score above which a run is anomalous")
    min_ratio: float = Field(1.5, ge=1.0, description="and at least this many times the median")


def robust_score(value: float, history: list[int]) -> tuple[float, float, float]:
    """(score, median, MAD) of ``value`` against ``history``; the MAD is floored at 1% of the median (and 1 ms)
    so a perfectly steady history still gives a finite score."""
    med = statistics.median(history)
    mad = statistics.median(abs(x - med) for x in history)
    scale = 1.4826 * max(mad, 0.01 * med, 1.0)
    return (value - med) / scale, med, mad


@register
class DurationAnomalyRule(Rule):
    kind = "duration_anomaly"
    Params = DurationAnomalyParams
    event_kinds = frozenset({STATUS_EVENT})
    statuses = frozenset({"FINISHED"})

    def evaluate(self, obs: Observation) -> list[Signal]:
        p = self.params
        if obs.duration_ms is None or len(obs.history) < p.runs:
            return []
        history = obs.history[-p.runs:]
        score, med, mad = robust_score(obs.duration_ms, history)
        labels = self.alert_labels(obs.namespace, obs.job, obs.tags)
        if score > p.threshold and obs.duration_ms >= p.min_ratio * med:
            return [self.fire(labels, obs.at, summary=f"{obs.namespace}/{obs.job} took {obs.duration_ms / 1000:.1f}s,"
                              f" median {med / 1000:.1f}s over the last {p.runs} runs (score {score:.1f})",
                              duration_ms=str(obs.duration_ms), median_ms=str(int(med)), mad_ms=str(int(mad)),
                              score=f"{score:.2f}", run_id=obs.event["header"]["run_id"],
                              run=obs.event["header"]["run_id"])]
        return [self.clear(labels, obs.at)]
