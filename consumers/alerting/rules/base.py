"""The rule plugin: one kind of alert condition.

Contract
--------
A rule kind is a ``Rule`` subclass in its own module of this package,
decorated with ``@register``; the rules file names it by ``kind``. Outside
packages register kinds under the entry-point group ``lineagewire.alert_rules``.

* ``Params``: a pydantic model of the kind's own settings (``max_duration``,
  ``window``...); unknown keys are refused with the rule's name in the error.
* ``event_kinds``: which events ``evaluate`` wants (the engine hands it no
  others); ``statuses`` narrows JobStatusChangedEvents to those new statuses.
* ``evaluate(obs)`` looks at one ``Observation`` (the event plus what the
  facts knew before it) and returns ``Signal``s: firing, or cleared.
  It must not change the observation or the facts, keep no state of its own
  and do no I/O, so it is unit-tested with hand-made events and no database.
* ``check(now, facts)`` (``timer = True`` kinds only) is called on the
  service's clock, also when the topic is quiet, for conditions that are an
  absence of events (a run that never finished, a refresh that never came).
* ``promises``: the freshness promises of the file's ``datasets:`` section
  (``lineagewire.freshness``), given to every rule; ``dataset_stale`` checks them.
* Every signal of a rule carries ``alert_labels(...)``: alertname (the rule's
  name), kind, severity, namespace, job, the rule's own labels, the job tags
  named in ``copy_tags`` (``table`` by default) and what the kind adds. The
  labels make the fingerprint, so a firing and its later clearing must be
  built from the same labels.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from lineagewire.consumers.alerting.model import Signal, glob_match
from lineagewire.freshness import Promises

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Facts, Observation

__all__ = ["Match", "Rule", "RuleParams"]

STATUS_EVENT = "JobStatusChangedEvent"


class RuleParams(BaseModel):
    """Settings of a rule kind (none by default)."""

    model_config = ConfigDict(extra="forbid")


class Match(BaseModel):
    """Which jobs a rule watches: namespace and job name globs, and tags (``{tag: glob}``, all must match)."""

    model_config = ConfigDict(extra="forbid")

    namespace: str | list[str] = "*"
    job: str | list[str] = "*"
    tags: dict[str, str] = {}

    def matches(self, namespace: str, job: str, tags: dict[str, str]) -> bool:
        if not glob_match(self.namespace, namespace) or not glob_match(self.job, job):
            return False
        return all(k in tags and glob_match(v, tags[k]) for k, v in self.tags.items())


class Rule:
    """Base class of rule kinds; see the module docstring for the contract."""

    kind: ClassVar[str] = ""
    Params: ClassVar[type[RuleParams]] = RuleParams
    event_kinds: ClassVar[frozenset[str]] = frozenset()
    #: for JobStatusChangedEvents: only these new statuses (None: all)
    statuses: ClassVar[frozenset[str] | None] = None
    timer: ClassVar[bool] = False

    def __init__(self, name: str, *, match: Match | None = None, severity: str = "warning",
                 labels: dict[str, str] | None = None, channels: tuple[str, ...] = (),
                 copy_tags: tuple[str, ...] = ("table",), params: RuleParams | None = None,
                 promises: Promises | None = None) -> None:
        self.name = name
        self.match = match or Match()
        self.severity = severity
        self.labels = dict(labels or {})
        self.channels = tuple(channels)
        self.copy_tags = tuple(copy_tags)
        self.params: Any = params if params is not None else self.Params()
        self.promises = promises if promises is not None else Promises()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def matches(self, namespace: str, job: str, tags: dict[str, str]) -> bool:
        return self.match.matches(namespace, job, tags)

    def evaluate(self, obs: Observation) -> Iterable[Signal]:
        """Signals for one observed event (see the contract)."""
        return ()

    def check(self, now: dt.datetime, facts: Facts) -> Iterable[Signal]:
        """Signals of a time-based condition at ``now`` (``timer`` kinds)."""
        return ()

    # -- helpers for kinds --------------------------------------------------------------------------

    def alert_labels(self, namespace: str, job: str, tags: dict[str, str], **extra: str) -> dict[str, str]:
        labels = {"alertname": self.name, "kind": self.kind, "severity": self.severity, "namespace": namespace,
                  "job": job}
        for tag in self.copy_tags:
            if tag in tags:
                labels[tag] = tags[tag]
        labels.update(self.labels)
        labels.update(extra)
        return labels

    def fire(self, labels: dict[str, str], at: dt.datetime, *, run: str | None = None, refresh: str | None = None,
             **annotations: str | None) -> Signal:
        """A firing signal; ``run``/``refresh``: the run or refresh it is about (flagged by the engine)."""
        return Signal(self.name, labels, True, at, {k: v for k, v in annotations.items() if v is not None},
                      self.channels, run_id=run, refresh_id=refresh)

    def clear(self, labels: dict[str, str], at: dt.datetime) -> Signal:
        return Signal(self.name, labels, False, at, {}, self.channels)

    def clear_on_clean_finish(self, obs: Observation, labels: dict[str, str]) -> list[Signal]:
        """For conditions that are events (a bad transition, a changed schema): a later run of the job that
        finishes without this rule firing on it clears the alert."""
        run = obs.run
        if obs.new_status == "FINISHED" and run is not None and self.name not in run.flags:
            return [self.clear(labels, obs.at)]
        return []
