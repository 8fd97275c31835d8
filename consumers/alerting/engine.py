"""Rule evaluation: events and the clock in, signals out. Pure: no database, no network.

The engine folds each event into ``Facts`` once, then runs only the rules
that can care: rules are indexed by event kind and status, and the rules
matching a job (namespace, name, tags) are cached per job, so 200 rules cost
a dictionary look-up per event, not 200 glob matches (see bench/alerting).
A firing signal flags its run or refresh in the facts, which is how a later
clean run knows it may clear the alert.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from .facts import Facts
from .model import Signal
from .rules import Rule

__all__ = ["RuleEngine"]

_STATUS = "JobStatusChangedEvent"


class RuleEngine:
    """Evaluates ``rules`` against events (``process``) and the clock (``check``)."""

    def __init__(self, rules: Iterable[Rule], facts: Facts | None = None) -> None:
        self.rules = list(rules)
        names = [r.name for r in self.rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"rule names must be unique; repeated: {', '.join(dupes)}")
        self.facts = facts or Facts()
        self.timer_rules = [r for r in self.rules if r.timer]
        self._by_kind: dict[tuple[str, str | None], list[Rule]] = {}
        self._cache: dict[tuple[Any, ...], tuple[Rule, ...]] = {}
        self._job_cache: dict[tuple[Any, ...], frozenset[str]] = {}

    def _candidates(self, kind: str, status: str | None) -> list[Rule]:
        key = (kind, status)
        found = self._by_kind.get(key)
        if found is None:
            found = self._by_kind[key] = [
                r for r in self.rules if kind in r.event_kinds
                and (kind != _STATUS or r.statuses is None or status in r.statuses)]
        return found

    def rules_for(self, kind: str, status: str | None, namespace: str, job: str,
                  tags: dict[str, str], tags_key: tuple[tuple[str, str], ...]) -> tuple[Rule, ...]:
        key = (kind, status, namespace, job, tags_key)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) > 100_000:  # many distinct jobs: start over rather than grow without bound
                self._cache.clear()
                self._job_cache.clear()
            # Glob-match each rule once per job (and tag set); per event kind it is then a set look-up.
            jkey = (namespace, job, tags_key)
            matching = self._job_cache.get(jkey)
            if matching is None:
                matching = self._job_cache[jkey] = frozenset(r.name for r in self.rules
                                                             if r.matches(namespace, job, tags))
            hit = self._cache[key] = tuple(r for r in self._candidates(kind, status) if r.name in matching)
        return hit

    def process(self, event: dict[str, Any], partition: str | None = None) -> list[Signal]:
        """Signals for one event (none for a redelivered one), read from ``partition`` ("topic[n]") if known."""
        obs = self.facts.observe(event, partition)
        if obs is None:
            return []
        status = obs.new_status
        js = obs.job_state
        signals: list[Signal] = []
        for rule in self.rules_for(obs.kind, status, obs.namespace, obs.job, js.tags, js.tags_key):
            signals.extend(rule.evaluate(obs))
        self._flag(signals)
        return signals

    def check(self, now: dt.datetime) -> list[Signal]:
        """Signals of the time-based rules at ``now``, over the facts of the partitions this instance owns."""
        signals: list[Signal] = []
        if self.facts.started is None:
            self.facts.started = now  # a promise of a dataset not written yet counts from the first look
        facts = self.facts.view() if self.timer_rules else self.facts
        for rule in self.timer_rules:
            signals.extend(rule.check(now, facts))
        self._flag(signals)
        return signals

    def _flag(self, signals: list[Signal]) -> None:
        for s in signals:
            if s.dataset is not None:
                self._flag_dataset(s)
            if not s.firing:
                continue
            if s.run_id is not None and (run := self.facts.runs.get(s.run_id)) is not None:
                run.flags.add(s.rule)
                self.facts.mark_dirty("run", s.run_id)
            if s.refresh_id is not None and (rs := self.facts.refreshes.get(s.refresh_id)) is not None:
                rs.flags.add(s.rule)
                self.facts.mark_dirty("refresh", s.refresh_id)

    def _flag_dataset(self, s: Signal) -> None:
        """A freshness window's alert: kept with the dataset's writes while it fires, forgotten when it clears."""
        assert s.dataset is not None
        if s.firing:
            self.facts.writes.flag(s.dataset, s.rule, s.labels)
        else:
            self.facts.writes.unflag(s.dataset, s.rule)
