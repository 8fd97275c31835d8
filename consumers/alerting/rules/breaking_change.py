"""``breaking_change``: a run changed a dataset in a way that breaks a job reading it.

A change is a column removed or retyped (a renamed column is removed under
its old name), or the dataset dropped, renamed or truncated, made final when
the writer run ends (a run that drops a table and creates it again changed
only its columns). Each reader of the dataset seen within ``window`` is
classified from its own column lineage (``breaking.classify``): breaking,
safe, or unknown when its lineage was incomplete. The alert fires once per
change with at least one breaking reader; its labels are the writer's job,
the ``dataset`` and the ``change``, so a re-run making the same change is the
same alert. It clears when a later write makes the dataset compatible again
(the columns are back with their types, the table is written again), or when
a FINISHED run of a broken reader leaves no reader broken (its lineage no
longer reads what the change took away).

Clears by a reader's run are evaluated for the rules that match the reader's
job, so a rule whose ``match`` names only some writers clears only when the
dataset is compatible again.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from lineagewire.consumers.alerting.breaking import Change, Classification, Reads, classify
from lineagewire.consumers.alerting.model import Signal, parse_duration
from lineagewire.schemas import TERMINAL_STATUSES

from . import register
from .base import STATUS_EVENT, Rule, RuleParams

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Observation


class BreakingChangeParams(RuleParams):
    window: float = Field(30 * 86400.0, description="readers are the jobs seen reading the dataset this long ago "
                          "at most (the facts keep 30 days)")
    owner_tags: list[str] = Field(["owner", "team"], description="the job tags that name a reader's owner, first "
                                  "found wins")
    max_listed: int = Field(20, ge=1, description="breaking and unknown readers named in the alert (then a count)")

    @field_validator("window", mode="before")
    @classmethod
    def _seconds(cls, v: object) -> float:
        return parse_duration(v, "window")


@register
class BreakingChangeRule(Rule):
    kind = "breaking_change"
    Params = BreakingChangeParams
    event_kinds = frozenset({"ActionLineageEvent", STATUS_EVENT})
    statuses = frozenset(TERMINAL_STATUSES)

    def _labels(self, change: Change) -> dict[str, str]:
        return self.alert_labels(change.writer_namespace, change.writer_job, change.writer_tags,
                                 dataset=change.dataset, change=change.ident)

    def _classify(self, change: Change, readers: list[Reads], at: dt.datetime) -> Classification:
        return classify(change, readers, since=at - dt.timedelta(seconds=self.params.window))

    def owner(self, reads: Reads) -> str | None:
        return next((reads.tags[t] for t in self.params.owner_tags if reads.tags.get(t)), None)

    def evaluate(self, obs: Observation) -> list[Signal]:
        out = []
        for change, readers in obs.impacts:
            found = self._classify(change, readers, obs.at)
            if found.breaking:
                out.append(self._fire(change, found, obs.at))
        for change, readers in obs.rechecks:
            if not self._classify(change, readers, obs.at).breaking:
                out.append(self.clear(self._labels(change), obs.at))
        out += [self.clear(self._labels(change), obs.at) for change in obs.restored]
        return out

    def _fire(self, change: Change, found: Classification, at: dt.datetime) -> Signal:
        n = self.params.max_listed
        broken = []
        for reads, what in found.breaking[:n]:
            owner = self.owner(reads)
            broken.append(f"{reads.namespace}/{reads.job} reads {', '.join(what)}"
                          + (f" (owner {owner})" if owner else " (no owner tag)"))
        if len(found.breaking) > n:
            broken.append(f"... and {len(found.breaking) - n} more")
        unknown = [f"{r.namespace}/{r.job}" for r in found.unknown[:n]]
        if len(found.unknown) > n:
            unknown.append(f"... and {len(found.unknown) - n} more")
        owners = sorted({o for r, _ in found.breaking if (o := self.owner(r))})
        writer = f"{change.writer_namespace}/{change.writer_job}"
        summary = (f"{writer} {change.describe()} on {change.dataset}: breaks {len(found.breaking)} reader(s), "
                   f"{len(found.safe)} safe" + (f", {len(found.unknown)} unknown" if found.unknown else ""))
        details = [f"writer run: {writer} run {change.writer_run}", f"change: {change.describe()}",
                   "breaking:", *(f"  {b}" for b in broken), f"safe: {len(found.safe)}"]
        if unknown:
            details += ["unknown (incomplete lineage):", *(f"  {u}" for u in unknown)]
        return self.fire(self._labels(change), at, summary=summary, details="\n".join(details),
                         dataset=change.dataset, change=change.describe(), writer_job=writer,
                         writer_run=change.writer_run, run_id=change.writer_run, breaking="\n".join(broken),
                         breaking_count=str(len(found.breaking)), safe_count=str(len(found.safe)),
                         unknown="\n".join(unknown), unknown_count=str(len(found.unknown)),
                         owners=", ".join(owners))
