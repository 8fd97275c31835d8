"""What the alerting service keeps in memory between two saves, as a few named objects.

``AlertingHandler`` (service.py) saves in one transaction what it has
gathered since the last save; until then it holds:

* ``Pending``: the rules' signals not yet applied, the changed facts not yet
  written, and the newly assigned partitions whose facts are still to be read
  (nothing is saved until they are);
* ``Pending.edges``: the lineage edges read (a job read or wrote a dataset), for incidents.py;
* ``Offsets``: per partition, the next offset handed to ``handle`` and the
  next offset saved; the runtime commits only the latter;
* ``Timers``: when each periodic job (re-reading silences, saving facts,
  pruning, checking the catch-up, re-sending to a channel) last ran, on the
  service's clock.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from .incidents import Edge
from .model import Signal

__all__ = ["Every", "Offsets", "Pending", "Timers"]

#: one fact row to write: (kind, key, JSON or None to delete it)
FactRow = tuple[str, str, dict[str, Any] | None]


@dataclass
class Pending:
    """Gathered since the last save, and dropped only once it is saved."""

    #: signals with when they came: applied in the transaction that saves them, to the groups as the database
    #: has them then
    signals: list[tuple[Signal, dt.datetime]] = field(default_factory=list)
    #: facts changed since the last save, the last change of each
    facts: dict[tuple[str, str], dict[str, Any] | None] = field(default_factory=dict)
    #: assigned partitions ("topic[n]") whose facts are still to be read: no fact is saved over the previous
    #: owner's until they are
    reload: set[str] = field(default_factory=set)
    #: lineage edges read (a job read or wrote a dataset) not yet written, with when they were last seen
    edges: dict[Edge, dt.datetime] = field(default_factory=dict)

    def add(self, signals: list[Signal], when: dt.datetime) -> None:
        self.signals.extend((s, when) for s in signals)

    def add_facts(self, rows: list[FactRow]) -> None:
        for kind, key, value in rows:
            self.facts[(kind, key)] = value

    def add_edges(self, edges: list[Edge], when: dt.datetime) -> None:
        for e in edges:
            if e not in self.edges or self.edges[e] < when:
                self.edges[e] = when

    def fact_rows(self) -> list[FactRow]:
        return [(kind, key, value) for (kind, key), value in self.facts.items()]

    def saved(self) -> None:
        """The signals and facts were saved (the partitions to read stay until they are read)."""
        self.signals, self.facts, self.edges = [], {}, {}


@dataclass
class Offsets:
    """Per (topic, partition), the next offset handed to ``handle`` and the next one saved."""

    handled: dict[tuple[str, int], int] = field(default_factory=dict)
    durable: dict[tuple[str, int], int] = field(default_factory=dict)

    def handle(self, topic: str, partition: int, offset: int) -> None:
        self.handled[(topic, partition)] = offset + 1

    def saved(self) -> None:
        """Everything handled so far is in the database: its offsets may be committed."""
        self.durable = dict(self.handled)


@dataclass
class Every:
    """A job done every ``interval`` seconds of the service's clock; ``last``: when it last ran (0: never)."""

    interval: float
    last: float = 0.0

    def due(self, now: float) -> bool:
        return now - self.last >= self.interval

    def ran(self, now: float) -> None:
        self.last = now


@dataclass
class Timers:
    """The service's periodic jobs (epoch seconds of its clock)."""

    silences: Every
    facts: Every
    #: outbox rows delivered a week ago and long-finished runs are forgotten hourly
    prune: Every = field(default_factory=lambda: Every(3600.0))
    #: while history is read, the database is asked once a second whether every partition reached its end
    catch_up: Every = field(default_factory=lambda: Every(1.0))
    #: channel -> its re-sends of firing alerts (channels with a ``resend_interval``: Alertmanager)
    resend: dict[str, Every] = field(default_factory=dict)
