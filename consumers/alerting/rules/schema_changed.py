"""``schema_changed``: an output dataset's schema differs from the one its previous run wrote (columns
added, removed, retyped); a later run writing the same schema again clears it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineagewire.consumers.alerting.model import Signal

from . import register
from .base import Rule

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Observation


@register
class SchemaChangedRule(Rule):
    kind = "schema_changed"
    event_kinds = frozenset({"ActionLineageEvent"})

    def evaluate(self, obs: Observation) -> list[Signal]:
        out = []
        run_id = obs.event["header"]["run_id"]
        for change in obs.schema_changes:
            labels = self.alert_labels(obs.namespace, obs.job, obs.tags, dataset=change.dataset)
            out.append(self.fire(labels, obs.at, summary=f"{obs.namespace}/{obs.job} changed the schema of "
                                 f"{change.dataset}: {change.describe()}", changes=change.describe(),
                                 added=", ".join(change.added), removed=", ".join(change.removed),
                                 retyped=", ".join(change.retyped), run_id=run_id, run=run_id))
        for dataset in obs.unchanged_outputs:
            out.append(self.clear(self.alert_labels(obs.namespace, obs.job, obs.tags, dataset=dataset), obs.at))
        return out
