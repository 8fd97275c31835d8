"""One page per root cause: alerts that follow from one upstream failure, grouped into an incident by lineage.

Alertmanager's inhibition is the model, with lineage deciding what mutes what
instead of equal labels:

* A firing ``run_failed`` or ``breaking_change`` alert of a job that other
  jobs read (through datasets, up to ``depth`` hops) opens an incident: its
  own notification is the incident's page, and lists the jobs it affects.
* A later ``run_failed``, ``refresh_missed``, ``run_stuck``,
  ``breaking_change``, ``dataset_stale`` or ``refresh_held`` alert of a job
  downstream of one of the incident's failures, starting within ``window``
  after it, is attached to the incident: it is muted while the incident is
  open (kept, shown, not paged). An alert that names its upstream jobs itself
  (``upstream_jobs``: a held refresh names the input's failed writer, a stale
  dataset the failing writers it found upstream) counts those as one hop up,
  whatever lineage has been seen.
* When the root alert resolves, the incident resolves; attached alerts still
  firing are no longer muted, so they page on their own.

"Downstream": the alert's job reads a dataset written by the failed job, or by
a job that reads one, and so on, up to ``depth`` hops. The root is the most
upstream failure: of the open incidents an alert could join, the one with a
failure farthest upstream of it. An alert is decided once, before its first
notification: one that was paged stays paged.

Pure: the lineage is asked through ``Lineage`` (the store answers it inside the
service's transaction; ``EdgeGraph`` in memory for tests), the clock is passed in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from lineagewire.schemas import kind_of

__all__ = [
    "DOWNSTREAM_KINDS", "ROOT_KINDS", "Edge", "EdgeGraph", "Incident", "IncidentBook", "Lineage", "Member",
    "choose", "edges_of", "hops",
]

#: (namespace, job)
JobKey = tuple[str, str]

#: alert kinds whose alert can be the root cause of an incident: a run failed, or broke its output
ROOT_KINDS = frozenset({"run_failed", "breaking_change"})
#: alert kinds that can follow from an upstream failure and be attached to its incident
DOWNSTREAM_KINDS = frozenset({"run_failed", "refresh_missed", "run_stuck", "breaking_change", "dataset_stale",
                              "refresh_held"})
#: jobs listed by name in an incident's page (then a count)
MAX_AFFECTS = 20


@dataclass(frozen=True)
class Edge:
    """A job read (``writes=False``) or wrote a dataset ("ns/name")."""

    job: JobKey
    dataset: str
    writes: bool


def edges_of(event: dict[str, Any]) -> list[Edge]:
    """The job-level lineage edges of one ActionLineageEvent (none for other events)."""
    if kind_of(event) != "ActionLineageEvent":
        return []
    h = event["header"]
    job = (h["job_namespace"], h["job_name"])
    out = [Edge(job, f"{d['namespace']}/{d['name']}", False) for d in event.get("inputs") or []]
    out += [Edge(job, f"{d['namespace']}/{d['name']}", True) for d in event.get("outputs") or []]
    return out


class Lineage(Protocol):
    def upstream(self, jobs: set[JobKey]) -> set[JobKey]:
        """The jobs that write a dataset one of ``jobs`` reads."""

    def downstream(self, jobs: set[JobKey]) -> set[JobKey]:
        """The jobs that read a dataset one of ``jobs`` writes."""


@dataclass
class EdgeGraph:
    """Lineage edges in memory."""

    edges: set[Edge] = field(default_factory=set)

    def add(self, *edges: Edge) -> EdgeGraph:
        self.edges.update(edges)
        return self

    def _step(self, jobs: set[JobKey], start_writes: bool) -> set[JobKey]:
        via = {e.dataset for e in self.edges if e.job in jobs and e.writes == start_writes}
        return {e.job for e in self.edges if e.dataset in via and e.writes != start_writes}

    def upstream(self, jobs: set[JobKey]) -> set[JobKey]:
        return self._step(jobs, False)

    def downstream(self, jobs: set[JobKey]) -> set[JobKey]:
        return self._step(jobs, True)


def hops(start: JobKey, step: Callable[[set[JobKey]], set[JobKey]], depth: int) -> dict[JobKey, int]:
    """Each job reached from ``start`` by ``step`` (``Lineage.upstream`` or ``.downstream``) within ``depth``
    steps, with the fewest steps it takes; ``start`` itself is left out (a job reading its own output is no
    other job)."""
    seen: dict[JobKey, int] = {}
    frontier = {start}
    for n in range(1, depth + 1):
        frontier = step(frontier) - set(seen) - {start}
        if not frontier:
            break
        for job in frontier:
            seen[job] = n
    return seen


@dataclass(frozen=True)
class Member:
    """An alert attached to an incident (or its root): which job failed, and when."""

    fingerprint: str
    job: JobKey
    starts_at: dt.datetime
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Incident:
    id: str
    root: Member
    started_at: dt.datetime
    #: the jobs downstream of the root by lineage when it opened (what its page lists)
    affects: list[JobKey] = field(default_factory=list)
    members: dict[str, Member] = field(default_factory=dict)
    state: str = "open"  # open | resolved
    resolved_at: dt.datetime | None = None

    @property
    def failures(self) -> list[Member]:
        return [self.root, *self.members.values()]

    def annotations(self) -> dict[str, str]:
        """What the root alert's notification says of the incident."""
        names = [f"{ns}/{job}" for ns, job in self.affects[:MAX_AFFECTS]]
        if len(self.affects) > MAX_AFFECTS:
            names.append(f"... and {len(self.affects) - MAX_AFFECTS} more")
        return {"incident": self.id, "affects": ", ".join(names), "affects_count": str(len(self.affects))}


def incident_id(root_fingerprint: str, started_at: dt.datetime) -> str:
    """The same root alert episode is the same incident, whichever instance opens it."""
    text = f"{root_fingerprint}\x1f{started_at.astimezone(dt.UTC).isoformat()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def choose(job: JobKey, at: dt.datetime, incidents: Iterable[Incident], upstream: dict[JobKey, int],
           window: dt.timedelta) -> Incident | None:
    """The open incident an alert of ``job`` starting ``at`` follows from, or None.

    ``upstream``: the jobs upstream of ``job`` with their distance in hops (``hops``). An incident qualifies when
    one of its failures is of an upstream job and ``at`` is within ``window`` after that failure began. Of
    several, the root is the most upstream: the one with a failure farthest upstream, then the earliest, then
    the smallest id (every instance chooses the same)."""
    def farthest(inc: Incident) -> int:
        """Hops to the incident's failure farthest upstream of ``job`` that it may follow from; 0: none."""
        return max((upstream.get(f.job, 0) for f in inc.failures
                    if f.job != job and f.starts_at <= at <= f.starts_at + window), default=0)

    found = [(-far, inc.started_at, inc.id, inc) for inc in incidents
             if inc.state == "open" and (far := farthest(inc)) > 0]
    return min(found, key=lambda k: k[:3])[3] if found else None


@dataclass(frozen=True)
class Candidate:
    """An alert the book is asked about (a firing alert not notified yet, or a root that resolved)."""

    fingerprint: str
    kind: str
    job: JobKey
    starts_at: dt.datetime
    labels: dict[str, str]
    firing: bool
    notified: bool
    #: jobs the alert itself names as its upstream (one hop up, in addition to lineage)
    upstream: tuple[JobKey, ...] = ()


class IncidentBook:
    """The open incidents as the database has them, and the decisions taken on them in one transaction.

    ``decide`` attaches an alert to an incident or opens one with it as root; ``resolve`` ends an incident whose
    root resolved; ``changed`` are the incidents to write. ``muted(fingerprint)``: attached to an open one."""

    def __init__(self, incidents: Iterable[Incident], lineage: Lineage, *, window: float, depth: int) -> None:
        self.open = {i.id: i for i in incidents if i.state == "open"}
        self.lineage = lineage
        self.window = dt.timedelta(seconds=window)
        self.depth = depth
        self.changed: dict[str, Incident] = {}
        #: (incident id, member) attached in this transaction
        self.attached: list[tuple[str, Member]] = []
        self._index()

    def _index(self) -> None:
        self.by_member = {fp: i for i in self.open.values() for fp in i.members}
        self.by_root = {i.root.fingerprint: i for i in self.open.values()}

    def muted(self, fingerprint: str) -> bool:
        return fingerprint in self.by_member

    def root_of(self, fingerprint: str) -> Incident | None:
        return self.by_root.get(fingerprint)

    def decide(self, c: Candidate, now: dt.datetime) -> Incident | None:
        """Attach ``c`` (firing, not notified yet) to the incident it follows from, else open one with it as
        root if its job has downstream jobs; the incident, or None when it takes part in none."""
        if not self._undecided(c):
            return self.by_member.get(c.fingerprint) or self.by_root.get(c.fingerprint)
        own = self.by_root.get(c.fingerprint)
        found = self._attach(c, own) if c.kind in DOWNSTREAM_KINDS else None
        if found is not None:
            return found
        return own if own is not None or c.kind not in ROOT_KINDS else self._open(c)

    def _undecided(self, c: Candidate) -> bool:
        """Is ``c`` still to be decided: firing, never told, attached to nothing?"""
        return c.firing and not c.notified and c.fingerprint not in self.by_member

    def _attach(self, c: Candidate, own: Incident | None) -> Incident | None:
        """Attach ``c`` to the incident it follows from, if any (merging the one opened for it alone)."""
        if own is not None and own.members:  # an incident with something attached keeps its root
            return None
        others = [i for i in self.open.values() if i is not own]
        if not others:
            return None
        upstream = {**dict.fromkeys(c.upstream, 1), **hops(c.job, self.lineage.upstream, self.depth)}
        found = choose(c.job, c.starts_at, others, upstream, self.window)
        if found is None:
            return None
        if own is not None:  # opened for it before its upstream was known: merged into the upstream one
            self._drop(own)
        member = Member(c.fingerprint, c.job, c.starts_at, dict(c.labels))
        found.members[c.fingerprint] = member
        self.attached.append((found.id, member))
        self.changed[found.id] = found
        self._index()
        return found

    def _open(self, c: Candidate) -> Incident | None:
        """A new incident with ``c`` as its root, if its job has downstream jobs."""
        affects = hops(c.job, self.lineage.downstream, self.depth)
        if not affects:
            return None  # nothing reads what it writes: an alert as before
        inc = Incident(incident_id(c.fingerprint, c.starts_at), Member(c.fingerprint, c.job, c.starts_at,
                                                                       dict(c.labels)),
                       c.starts_at, sorted(affects, key=lambda j: (affects[j], j)))
        self.open[inc.id] = self.changed[inc.id] = inc
        self._index()
        return inc

    def _drop(self, inc: Incident) -> None:
        del self.open[inc.id]
        inc.state, inc.resolved_at = "merged", inc.started_at
        self.changed[inc.id] = inc

    def resolve(self, root_fingerprint: str, at: dt.datetime) -> Incident | None:
        """The root alert resolved: so does its incident (its attached alerts are muted no more)."""
        inc = self.by_root.get(root_fingerprint)
        if inc is None:
            return None
        del self.open[inc.id]
        inc.state, inc.resolved_at = "resolved", at
        self.changed[inc.id] = inc
        self._index()
        return inc
