"""``dataset_stale``: a dataset's freshness promise is broken (issue 41.3).

The promises are the file's ``datasets:`` section (``lineagewire.freshness``):
``freshness: 1h`` for a dataset named by path, URI or table name, optionally
only inside ``business_hours``. A dataset's writes are tracked from the job
events (``writes.py``): a write counts once its run ends FINISHED.

Checked on the clock: the alert fires when now is past the last successful
write plus ``freshness`` (inside business hours), once per window: its labels
are the writer's job, the ``dataset`` and the ``window`` (the last successful
write it is stale since), so the next window is a new alert. It says what the
page needs to act on: the last successful write and its run, and the causes
found by walking lineage upstream (``depth`` hops): the dataset's own writer
that failed since, and the inputs of its writers (as their runs read them)
whose own writer failed, or that are stale by their own promise, so the page
says "stale because raw.events has not been written since 02:10 (job
ingest_events FAILED)". The failing upstream jobs are named in the
``upstream_jobs`` annotation, which attaches the alert to their incident.

A promise of a dataset no run has written yet (an unknown name, or a
dataset whose every write failed) fires as "never written" once its
freshness has passed since the service first looked (``window`` "never").

The next successful write of the dataset clears the alert.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import Field

from lineagewire.consumers.alerting.model import Signal, gist, iso
from lineagewire.consumers.alerting.writes import WriteState, never_key
from lineagewire.freshness import Promise

from . import register
from .base import STATUS_EVENT, Rule, RuleParams

if TYPE_CHECKING:
    from lineagewire.consumers.alerting.facts import Facts, JobState, Observation

__all__ = ["Cause", "DatasetStaleRule", "upstream_causes"]

JobKey = tuple[str, str]
#: a writer's latest run in one of these is failing its datasets
FAILING = frozenset({"FAILED", "CANCELED", "SUSPENDED"})
#: ... and in one of these is writing them now
BUSY = frozenset({"CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "FAILING", "RECONCILING"})


class DatasetStaleParams(RuleParams):
    depth: int = Field(3, ge=1, le=20, description="hops of lineage walked upstream for the cause (a hop: a "
                       "writer of the dataset and the inputs it reads)")
    max_causes: int = Field(5, ge=1, description="upstream causes named in the alert (then a count)")


@dataclass(frozen=True)
class Cause:
    """Why a dataset is stale: a dataset (the stale one itself, or an input upstream) and what is wrong with it."""

    dataset: str
    text: str
    #: the job whose run failed (or runs), if one is to blame
    job: JobKey | None = None
    run: str | None = None
    hops: int = 0


def when(at: dt.datetime | None) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "never"


def _gist(error: str | None) -> str:
    line = gist(error) if error else ""
    return f": {line[:160]}" if line else ""


def _failing_writer(facts: Facts, st: WriteState) -> tuple[JobKey, JobState] | None:
    """The latest writer of ``st`` whose latest run failed after the last successful write."""
    for job in reversed(st.writers):
        js = facts.jobs.get(job)
        if js is not None and js.last_status in FAILING and (
                st.last_success is None or (js.last_at is not None and js.last_at > st.last_success)):
            return job, js
    return None


def _busy_writer(facts: Facts, st: WriteState) -> tuple[JobKey, JobState] | None:
    for job in reversed(st.writers):
        js = facts.jobs.get(job)
        if js is not None and js.last_status in BUSY:
            return job, js
    return None


def own_cause(facts: Facts, st: WriteState) -> Cause | None:
    """The dataset's own writer failed (or is still running) since its last successful write."""
    found = _failing_writer(facts, st)
    if found is not None:
        (ns, job), js = found
        return Cause(st.label, f"its writer job {job} {js.last_status} at {when(js.last_at)}{_gist(js.last_error)}",
                     (ns, job), js.last_run)
    busy = _busy_writer(facts, st)
    if busy is not None:
        (ns, job), js = busy
        return Cause(st.label, f"its writer job {job} is {js.last_status} since {when(js.last_at)}", None,
                     js.last_run)
    return None


def input_cause(facts: Facts, u: WriteState, now: dt.datetime, promise: Promise | None, hops: int) -> Cause | None:
    """What is wrong with input ``u``, if anything: its writer failed since its last good write, or it is stale by
    its own promise."""
    since = f"has not been written since {when(u.last_success)}" if u.last_success else "has never been written"
    found = _failing_writer(facts, u)
    if found is not None:
        (ns, job), js = found
        return Cause(u.label, f"{u.label} {since} (job {job} {js.last_status}{_gist(js.last_error)})", (ns, job),
                     js.last_run, hops)
    if promise is not None and promise.stale(u.last_success, now, facts.started):
        busy = _busy_writer(facts, u)
        doing = f", job {busy[0][1]} {busy[1].last_status}" if busy is not None else ""
        return Cause(u.label, f"{u.label} {since} (promised {promise.describe()}{doing})", None, None, hops)
    return None


def upstream_causes(facts: Facts, st: WriteState, now: dt.datetime, depth: int,
                    promise_of: Callable[[WriteState], Promise | None] = lambda _: None) -> list[Cause]:
    """The causes of ``st`` being stale: its own writer's failure, then its writers' inputs that are failing or
    stale (``promise_of`` an input: its promise), hop by hop up to ``depth``, the nearest first."""
    out = [c for c in [own_cause(facts, st)] if c is not None]
    seen = {st.dataset}
    frontier = [st]
    for hop in range(1, depth + 1):
        frontier = _inputs(facts, frontier, seen)
        out += [c for u in frontier if (c := input_cause(facts, u, now, promise_of(u), hop)) is not None]
        if not frontier:
            break
    return out


def _inputs(facts: Facts, datasets: list[WriteState], seen: set[str]) -> list[WriteState]:
    """The inputs not ``seen`` yet of the writers of ``datasets`` (added to ``seen``), of those a job we saw
    writes (of a source no one writes, there is nothing to blame upstream)."""
    keys: set[str] = set()
    for s in datasets:
        for w in s.writers:
            keys |= facts.reads_of(w)
    keys -= seen
    seen |= keys
    return [u for key in sorted(keys) if (u := facts.writes.states.get(key)) is not None]


def _upstream(causes: list[Cause]) -> dict[str, str | None]:
    """The jobs to blame (``upstream_jobs``, which the incidents read) and their runs."""
    jobs = sorted({c.job for c in causes if c.job is not None})
    runs = [c.run for c in causes if c.run]
    return {"upstream_jobs": json.dumps([list(j) for j in jobs]) if jobs else None,
            "upstream_runs": ", ".join(runs) if runs else None}


@register
class DatasetStaleRule(Rule):
    kind = "dataset_stale"
    Params = DatasetStaleParams
    event_kinds = frozenset({STATUS_EVENT, "ActionLineageEvent"})
    statuses = frozenset({"FINISHED"})
    timer = True

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        #: dataset key -> its promise: the promises are fixed, so each dataset is matched once
        self._promise_of: dict[str, Promise | None] = {}

    def promise(self, st: WriteState) -> Promise | None:
        if st.dataset not in self._promise_of:
            if len(self._promise_of) > 100_000:
                self._promise_of.clear()
            self._promise_of[st.dataset] = self.promises.promise_for(st.namespace, st.name, st.tables)
        return self._promise_of[st.dataset]

    # -- clearing: a successful write -------------------------------------------------------------------

    def evaluate(self, obs: Observation) -> list[Signal]:
        out = []
        for fw in obs.fresh_writes:
            labels = fw.fired.get(self.name)
            if labels is not None:
                out.append(replace(self.clear(labels, obs.at), dataset=fw.state.dataset))
            p = self.promise(fw.state) if fw.previous is None else None
            if p is not None:  # the first write of a promised dataset: it is "never written" no more
                out.append(replace(self.clear(self._never_labels(p), obs.at), dataset=never_key(p.dataset)))
        return out

    # -- firing: on the clock ---------------------------------------------------------------------------

    def check(self, now: dt.datetime, facts: Facts) -> list[Signal]:
        if not len(self.promises):
            return []
        out: list[Signal] = []
        written: set[Promise] = set()
        unwritten: dict[Promise, WriteState] = {}
        writes = facts.writes
        for st in writes.states.values():
            p = self.promise(st)
            if p is None:
                continue
            if st.last_success is None:
                unwritten.setdefault(p, st)
                continue
            written.add(p)
            if writes.checks(st) and not writes.has_fired(st.dataset, self.name) and p.stale(st.last_success, now):
                out += self._stale(st, st.last_success, p, now, facts)
        return out + self._check_never(now, facts, written, unwritten)

    def _check_never(self, now: dt.datetime, facts: Facts, written: set[Promise],
                     unwritten: dict[Promise, WriteState]) -> list[Signal]:
        """The promises of datasets without a successful write whose freshness has passed since the first look."""
        out: list[Signal] = []
        for p in self.promises:
            if p not in written and not facts.writes.has_fired(never_key(p.dataset), self.name) \
                    and p.stale(None, now, facts.started):
                out += self._never(p, unwritten.get(p), now, facts)
        return out

    def _never_labels(self, p: Promise) -> dict[str, str]:
        return self.alert_labels("", "", {}, dataset=p.dataset, window="never")

    def _stale(self, st: WriteState, last: dt.datetime, p: Promise, now: dt.datetime, facts: Facts) -> list[Signal]:
        """The alert of ``st``, stale since its last successful write ``last``, if the rule watches its writer."""
        ns, job = st.last_job or (st.writers[-1] if st.writers else ("", ""))
        js = facts.jobs.get((ns, job))
        tags = js.tags if js is not None else {}
        if not self.matches(ns, job, tags):
            return []
        causes = upstream_causes(facts, st, now, self.params.depth, self.promise)
        labels = self.alert_labels(ns, job, tags, dataset=st.dataset, window=iso(last) or "never")
        head = f"{st.label} is stale: last written {when(last)} by run {st.last_run} of job {job}; promised " \
               f"{p.describe()}"
        return [replace(self.fire(labels, now, **self._annotations(head, p, causes), last_success=iso(last),
                                  last_run=st.last_run, writer=f"{ns}/{job}", due=iso(p.due(last))),
                        dataset=st.dataset)]

    def _never(self, p: Promise, st: WriteState | None, now: dt.datetime, facts: Facts) -> list[Signal]:
        """A promise of a dataset with no successful write: of a dataset no job wrote (no write state), or one
        whose every write failed (``st``, whose writers may be to blame)."""
        causes = upstream_causes(facts, st, now, self.params.depth, self.promise) if st is not None else []
        head = f"{p.dataset} has never been written; promised {p.describe()}"
        return [replace(self.fire(self._never_labels(p), now, **self._annotations(head, p, causes),
                                  last_success="never"), dataset=never_key(p.dataset))]

    def _annotations(self, head: str, p: Promise, causes: list[Cause]) -> dict[str, str | None]:
        out: dict[str, str | None] = {"summary": head, "promise": p.dataset, "freshness": f"{p.freshness:g}s",
                                      "owner": p.owner}
        if causes:
            shown = causes[: self.params.max_causes]
            more = len(causes) - len(shown)
            out["summary"] = f"{head}; stale because {shown[0].text}"
            out["causes"] = "\n".join([c.text for c in shown] + ([f"... and {more} more"] if more > 0 else []))
            out.update(_upstream(causes))
        return out
