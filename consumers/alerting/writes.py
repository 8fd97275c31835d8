"""Each dataset's writes, for freshness promises (``dataset_stale``): when it was last written by a run that
succeeded, by which run and job, and which runs are writing it now.

A write counts once its run ends FINISHED: an action's output (or a sink a
JobCreatedEvent declares) is pending with its run until then, and dropped if
the run FAILED or was CANCELED, since a failed run's overwrite left no data
anyone should read as fresh. A write that comes after its run's FINISHED (a
slow lineage extraction) counts at once. The write time is the action's
event time (for a declared sink: the run's end).

``Writes.ended`` returns the datasets a run made fresh (``FreshWrite``), each
with what its promise alert was (``fired``: the labels each rule fired with
for the window the write closes), so the rule clears exactly that alert; the
engine records those labels with ``flag``. Pure and bounded: one state per
dataset, at most ``MAX_WRITERS`` writer jobs each.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_WRITERS", "FreshWrite", "WriteState", "Writes", "never_key"]

#: writer jobs remembered per dataset (the latest ones): enough to walk lineage upstream through them
MAX_WRITERS = 5

JobKey = tuple[str, str]


def _t(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def _s(when: dt.datetime | None) -> str | None:
    return when.isoformat() if when else None


def never_key(promise_dataset: str) -> str:
    """The key the flags of a "never written" alert are kept under (no dataset state exists for it yet)."""
    return "promise:" + promise_dataset


@dataclass
class WriteState:
    """One dataset (``namespace/name``) and its writes."""

    dataset: str
    namespace: str
    name: str
    #: its catalog-table names (the symlinks the emitter reported)
    tables: tuple[str, ...] = ()
    last_success: dt.datetime | None = None
    last_run: str | None = None
    #: the job of the last successful write
    last_job: JobKey | None = None
    #: jobs seen writing it, the latest last
    writers: list[JobKey] = field(default_factory=list)
    #: run id -> time of its latest write of the dataset, for runs not ended yet
    pending: dict[str, dt.datetime] = field(default_factory=dict)
    #: the partition of its writer's events: with several instances, its owner checks and saves it
    partition: str | None = None

    @property
    def label(self) -> str:
        """How people know it: its first table name, else its name."""
        return self.tables[0] if self.tables else self.name

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "namespace": self.namespace, "name": self.name, "tables": list(self.tables),
                "last_success": _s(self.last_success), "last_run": self.last_run,
                "last_job": list(self.last_job) if self.last_job else None,
                "writers": [list(w) for w in self.writers],
                "pending": {r: _s(t) for r, t in self.pending.items()}, "partition": self.partition}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> WriteState:
        last_job = d.get("last_job")
        return cls(d["dataset"], d["namespace"], d["name"], tuple(d.get("tables") or ()), _t(d.get("last_success")),
                   d.get("last_run"), (last_job[0], last_job[1]) if last_job else None,
                   [(w[0], w[1]) for w in d.get("writers") or []],
                   {r: t for r, s in (d.get("pending") or {}).items() if (t := _t(s)) is not None},
                   d.get("partition"))


@dataclass(frozen=True)
class FreshWrite:
    """A successful write that ended a window: the dataset, its previous successful write (None: the first one),
    and the labels each rule's alert of the closed window fired with."""

    state: WriteState
    previous: dt.datetime | None
    fired: dict[str, dict[str, str]]


class Writes:
    """The write states of datasets, folded from action outputs and run ends; see the module docstring."""

    def __init__(self) -> None:
        self.states: dict[str, WriteState] = {}
        #: dataset key, or ``never_key(promise)`` -> rule name -> the labels it fired with for the current window
        self.fired: dict[str, dict[str, dict[str, str]]] = {}
        self._by_run: dict[str, set[str]] = {}
        #: keys changed since the last save: ("write", dataset) or ("fired", key)
        self.dirty: set[tuple[str, str]] = set()
        #: the partitions whose datasets this instance checks (None: all); the others are kept for walking lineage
        self.owned: set[str] | None = None

    def checks(self, st: WriteState) -> bool:
        """Does this instance check the promise of ``st``: do its partitions hold its writer's events?"""
        return self.owned is None or st.partition is None or st.partition in self.owned

    def shared(self, owned: set[str] | None) -> Writes:
        """The same states and flags, checked only for ``owned`` partitions (what the clock's rules look at)."""
        out = Writes()
        out.states, out.fired, out.owned = self.states, self.fired, owned
        return out

    def wrote(self, ds: dict[str, Any], job: JobKey, run_id: str, at: dt.datetime, *, finished: bool,
              partition: str | None) -> FreshWrite | None:
        """Run ``run_id`` of ``job`` wrote output ``ds`` at ``at``; ``finished``: the run already ended FINISHED
        (the write counts at once, and is returned as fresh)."""
        key = f"{ds['namespace']}/{ds['name']}"
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = WriteState(key, ds["namespace"], ds["name"])
        names = tuple(dict.fromkeys([*(s["name"] for s in ds.get("symlinks") or []), *st.tables]))
        st.tables = names
        if job in st.writers:
            st.writers.remove(job)
        st.writers = [*st.writers, job][-MAX_WRITERS:]
        if partition is not None:
            st.partition = partition
        self.dirty.add(("write", key))
        if finished:
            return self._succeeded(st, run_id, job, at)
        st.pending[run_id] = max(at, st.pending.get(run_id, at))
        self._by_run.setdefault(run_id, set()).add(key)
        return None

    def ended(self, run_id: str, job: JobKey, status: str) -> list[FreshWrite]:
        """Run ``run_id`` ended with ``status``: its pending writes count (FINISHED) or are dropped."""
        out = []
        for key in sorted(self._by_run.pop(run_id, set())):
            st = self.states.get(key)
            if st is None or run_id not in st.pending:
                continue
            at = st.pending.pop(run_id)
            self.dirty.add(("write", key))
            if status == "FINISHED":
                out.append(self._succeeded(st, run_id, job, at))
        return out

    def _succeeded(self, st: WriteState, run_id: str, job: JobKey, at: dt.datetime) -> FreshWrite:
        previous = st.last_success
        if previous is not None and at < previous:
            # a late event of an older write: the dataset is no fresher, and what fired on it stays fired
            return FreshWrite(st, previous, {})
        st.last_success, st.last_run, st.last_job = at, run_id, job
        fired = self.fired.pop(st.dataset, {})
        if fired:
            self.dirty.add(("fired", st.dataset))
        return FreshWrite(st, previous, fired)

    def prune(self, before: dt.datetime) -> None:
        """Forget pending writes from before ``before``: their run's end was never seen (its events were lost)."""
        for run_id in list(self._by_run):
            for key in list(self._by_run[run_id]):
                st = self.states.get(key)
                if st is None or st.pending.get(run_id, before) < before:
                    self._by_run[run_id].discard(key)
                    if st is not None:
                        del st.pending[run_id]
                        self.dirty.add(("write", key))
            if not self._by_run[run_id]:
                del self._by_run[run_id]

    def flag(self, key: str, rule: str, labels: dict[str, str]) -> None:
        """Rule ``rule`` fired for the current window of ``key`` with ``labels`` (a dataset, or ``never_key``)."""
        self.fired.setdefault(key, {})[rule] = dict(labels)
        self.dirty.add(("fired", key))

    def unflag(self, key: str, rule: str) -> None:
        """Forget that ``rule`` fired for ``key``: its alert cleared."""
        held = self.fired.get(key)
        if held is None or rule not in held:
            return
        del held[rule]
        if not held:
            del self.fired[key]
        self.dirty.add(("fired", key))

    def has_fired(self, key: str, rule: str) -> bool:
        return rule in self.fired.get(key, {})

    # -- persistence --------------------------------------------------------------------------------

    def row(self, kind: str, key: str) -> dict[str, Any] | None:
        """The JSON of fact ``kind`` ("write" or "fired") ``key``; None: deleted."""
        if kind == "write":
            st = self.states.get(key)
            return st.to_json() if st is not None else None
        fired = self.fired.get(key)
        if not fired:
            return None
        st = self.states.get(key)
        return {"key": key, "rules": fired, "partition": st.partition if st is not None else None}

    def load_row(self, kind: str, doc: dict[str, Any]) -> None:
        if kind == "write":
            st = WriteState.from_json(doc)
            self.states[st.dataset] = st
            for run_id in st.pending:
                self._by_run.setdefault(run_id, set()).add(st.dataset)
        else:
            self.fired[doc["key"]] = {r: dict(labels) for r, labels in doc["rules"].items()}

    def drop(self, partitions: set[str]) -> None:
        """Forget the datasets whose writers' events come from ``partitions`` (their new owner has them)."""
        for key in [k for k, s in self.states.items() if s.partition in partitions]:
            st = self.states.pop(key)
            for run_id in st.pending:
                self._by_run.get(run_id, set()).discard(key)
            self.fired.pop(key, None)
            self.dirty.discard(("write", key))
            self.dirty.discard(("fired", key))
