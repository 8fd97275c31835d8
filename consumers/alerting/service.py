"""The alerting service: a ``Handler`` on the shared consumer runtime.

Per event: the ``RuleEngine`` turns it into signals, which wait in memory
(``Pending``, state.py). At the end of each poll batch (``batch_done``) and on
the runtime's clock (``tick``, every second, also on a quiet topic) the
handler saves: the ``Dispatcher`` opens, refreshes or resolves alerts and says
which group notifications are due, and one database transaction stores the
alert changes, the notifications (as outbox rows) and the rules' facts; then
the ``OutboxWorker`` delivers. A save is three steps: plan (which groups to
lock and what to write, or nothing to do), the transaction, and the
bookkeeping after it (``_apply``).

The clock also evaluates the time-based rules, re-reads silences, sends what
group_wait/group_interval held back, re-sends firing alerts to Alertmanager,
and retries the outbox.

Facts are saved with every alert change and at least every second; offsets
are committed only up to what is saved (``durable_offsets``), so a restart
replays the rest and rebuilds exactly the same facts.

With a ``CatchUp`` (``consume alerting`` passes one), a new group reads the
history already on the topic silently and then notifies the alerts still
open, once (see catchup.py).

Several instances of one group share one database, and each alert state
change is notified once whichever of them sees it: signals are applied in the
transaction that saves them (``AlertStore.locked``), to the groups as the
database has them under their row locks, never to what this instance
remembered; the clock re-reads the live alerts, then decides the groups that
look due under their locks, skipping those another instance is deciding. The
outbox worker sends only rows it claimed (outbox.py). When partitions are
assigned, the rules' facts are read again, since the previous owner of those
partitions saved newer ones.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from lineagewire.consumers.runtime.base import Handler
from lineagewire.freshness import Promise

from .catchup import CatchUp, CatchUpPlan, CatchUpProgress, partition_key
from .channels import Channel
from .config import AlertingConfig, InhibitRule
from .dispatch import Alert, Dispatcher, Group
from .engine import RuleEngine
from .facts import Facts
from .incidents import Candidate, EdgeGraph, IncidentBook, edges_of
from .model import Signal, labels_match
from .outbox import Outbox, OutboxWorker
from .state import Every, FactRow, Offsets, Pending, Timers
from .store import DEFAULT_URL, AlertStore, Silence, StoreLineage, read_incidents, write_edges, write_incidents
from .writes import WriteState

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["AlertingHandler"]


#: lineage edges older than this are forgotten (as the facts forget a dataset's readers)
EDGE_TTL = dt.timedelta(days=30)
#: an edge seen again is written again only this long after it was last written (its time matters by the day)
EDGE_REWRITE = dt.timedelta(hours=1)


def _utc(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


@dataclass
class _Opened:
    """What ``open`` acquires and ``close`` releases."""

    store: AlertStore
    channels: dict[str, Channel]
    worker: OutboxWorker


@dataclass
class _Save:
    """The plan of one save: the groups to lock (``must``: those the signals touch; ``may``: those the clock
    finds due, skipped if another instance holds them), the groups to create, and the fact rows to write."""

    must: set[str]
    may: set[str]
    create: list[Group]
    facts: list[FactRow]


class AlertingHandler(Handler):
    """Alerts from job events; see the module docstring.

    ``channels``: channel objects to use instead of building them from ``config`` (tests);
    ``clock``: epoch seconds now, the same clock as the runtime's ``tick(now)`` (tests drive group_wait and
    deadlines with it);
    ``catch_up``: a new group reads history silently (catchup.py); None: every alert is news (replay, tests).
    """

    name: ClassVar[str] = "alerting"
    tick_interval: ClassVar[float | None] = 1.0

    def __init__(self, config: AlertingConfig, *, database: str | None = None,
                 channels: dict[str, Channel] | None = None, clock: Callable[[], float] = time.time,
                 facts_interval: float = 1.0, silences_interval: float = 2.0, transport: Any = None,
                 catch_up: CatchUp | None = None) -> None:
        self.config = config
        self.database = database or config.database or DEFAULT_URL
        self.clock = clock
        #: this instance, as the owner of the outbox rows it claims
        self.instance = f"{uuid.uuid4().hex[:12]}"
        r = config.route
        self.dispatcher = Dispatcher(group_by=r.group_by, group_wait=r.group_wait, group_interval=r.group_interval,
                                     repeat_interval=r.repeat_interval)
        self.engine = RuleEngine(config.build_rules(), Facts())
        self.catch_up = CatchUpProgress(catch_up, _utc(clock())) if catch_up is not None else None
        self.pending = Pending()
        self.offsets = Offsets()
        self.timers = Timers(silences=Every(silences_interval), facts=Every(facts_interval))
        self.silences: list[Silence] = []
        #: rules whose alerts take part in incidents (incidents.py), and the open incidents as last read: decided
        #: in each save's transaction on what the database has then, re-read on the clock for muting
        self.incident_rules = config.incident_rules()
        self.incidents = IncidentBook([], EdgeGraph(), window=config.incidents.window, depth=config.incidents.depth)
        #: lineage edges written, with the time they were written with (an edge is read on every action)
        self.edges_written: dict[Any, dt.datetime] = {}
        self._build_channels: Callable[[], dict[str, Channel]] = (
            (lambda: channels) if channels is not None else (lambda: config.build_channels(transport)))
        self._opened: _Opened | None = None

    @property
    def store(self) -> AlertStore:
        return self._outputs().store

    @property
    def plan(self) -> CatchUpPlan | None:
        """The catch-up plan; None: no catch-up, or not known yet."""
        return self.catch_up.plan if self.catch_up is not None else None

    @property
    def catching_up(self) -> bool:
        return self.catch_up is not None and self.catch_up.active

    def _outputs(self) -> _Opened:
        if self._opened is None:
            raise RuntimeError("the alerting service was not opened: call open() before handing it events or "
                               "ticks (the runtime does)")
        return self._opened

    # -- Handler hooks -------------------------------------------------------------------------------

    def open(self) -> None:
        store = AlertStore(self.database)
        channels: dict[str, Channel] = {}
        try:
            alerts, groups, facts = store.load()
            self.engine.facts.load(facts)
            self.dispatcher.load(alerts, groups)
            if self.catch_up is not None:
                self.catch_up.load(store)
            channels = self._build_channels()
            self._reload_silences(store, self.clock())
        except BaseException:
            _close_channels(channels)
            store.close()
            raise
        outbox = Outbox(store, channels, owner=self.instance, lease=self.config.claim_lease)
        worker = OutboxWorker(outbox, lambda: _utc(self.clock())).start()
        self._opened = _Opened(store, channels, worker)
        log.info("alerting: %d rules, %d channels (%s), %d open alerts, database %s", len(self.engine.rules),
                 len(channels), ", ".join(sorted(channels)) or "none", len(alerts),
                 store.engine.url.render_as_string(hide_password=True))

    def _take_shared_facts(self, event: dict[str, Any]) -> None:
        """A dataset's writer and its readers usually sit on different instances (their jobs hash to different
        partitions): before a change is judged, read the readers and changes other instances saved for the
        datasets this event needs (``Facts.shared_keys``; one indexed read, only for such events)."""
        facts = self.engine.facts
        if facts.owned is None:
            return  # one instance sees every partition: it holds them all already
        needed = facts.shared_keys(event)
        if needed:
            facts.take_shared(self.store.shared_facts(needed))

    def handle(self, record: Record) -> int:
        if record.event is None:
            raise ValueError(f"{record.topic}[{record.partition}]@{record.offset}: no decoded event; expected one "
                             "(the alerting service does not take undecodable messages)")
        if self.catch_up is not None:
            self.catch_up.ensure_plan(self.store)
        if self.pending.reload:
            self._reload()  # a failure is the runtime's to retry: no event is folded into facts not read yet
        self._take_shared_facts(record.event)
        signals = self.engine.process(record.event, partition_key(record.topic, record.partition))
        self.pending.add(signals, _utc(self.clock()))
        if self.incident_rules:
            self._note_edges(record.event)
        self.offsets.handle(record.topic, record.partition, record.offset)
        return 0

    def batch_done(self) -> int:
        return self._apply([], self.clock(), tick=False)

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until the outbox worker has delivered what was due when this was called (tests)."""
        return self._opened.worker.settle(timeout) if self._opened is not None else True

    def tick(self, now: float) -> int:
        """The clock's work at ``now`` (epoch seconds, the runtime's wall clock; tests pass their ``clock``)."""
        opened = self._outputs()
        when = _utc(now)
        if self.timers.silences.due(now):
            self._reload_silences(opened.store, now)
        if self.catching_up and self.timers.catch_up.due(now):
            self._check_caught_up(opened.store, now)
        # The clock's rules wait for the end of history: a run whose end is still to be read is not stuck.
        signals = [] if self.catching_up else self._still_owned(opened.store, self.engine.check(when))
        signals = self._never_written(opened.store, signals)
        flush = self.timers.facts.due(now)
        if self.timers.prune.due(now):
            self.engine.facts.prune(when)
            opened.store.prune_outbox(when - dt.timedelta(days=7))
            opened.store.prune_incidents(when - EDGE_TTL)
            self.timers.prune.ran(now)
        n = self._apply(signals, now, flush_facts=flush)
        self._resend(opened, now)
        opened.worker.wake()  # retries of rows whose channel was down
        return n

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        return dict(self.offsets.durable)

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        """Save what is held, then forget the facts of ``partitions``: their next owner has them, and a copy kept
        here would be checked by the clock's rules (paging for runs that ended elsewhere) and saved over its."""
        facts = self.engine.facts
        gone = {partition_key(t, p) for t, p in partitions}
        try:
            self._apply([], self.clock(), tick=False, flush_facts=True)
        finally:
            if facts.owned is not None:
                facts.owned -= gone
                facts.drop(gone)
                self.pending.reload -= gone

    def on_assign(self, partitions: list[tuple[str, int]]) -> None:
        """The previous owner of ``partitions`` saved their facts (on revoke, or up to what it committed before it
        died): read them, so their runs, baselines and sequence numbers are the latest, and an old copy is never
        saved over newer ones. From the first assignment on, this instance checks and saves only the facts of the
        partitions it owns. A failed read is retried before the next event is handled or anything saved (the
        error goes the runtime's retry path): until it succeeds, no stale fact is checked or written."""
        facts = self.engine.facts
        new = {partition_key(t, p) for t, p in partitions}
        if facts.owned is None:
            facts.owned = set()
            held = ({r.partition for r in facts.runs.values()} | {j.partition for j in facts.jobs.values()}
                    | {r.partition for r in facts.refreshes.values()})
            facts.drop({p for p in held if p is not None} - new)
        facts.owned |= new
        self.pending.reload |= new
        self._reload()

    def close(self) -> None:
        opened = self._opened
        if opened is None:  # open() failed, and released what it had acquired
            return
        try:
            self._apply([], self.clock(), flush_facts=True)
        finally:
            opened.worker.stop()  # after a last delivery round; what is left waits in the outbox
            _close_channels(opened.channels)
            opened.store.close()

    # -- saving: plan, transaction, bookkeeping ----------------------------------------------------------

    def _apply(self, signals: list[Signal], now: float, *, flush_facts: bool = False, tick: bool = True) -> int:
        """Apply the pending signals and ``signals``, queue the notifications now due and store it all in one
        transaction, then wake the outbox worker; how many outbox rows were written.

        The groups the signals touch are locked and read afresh first (another instance may have changed them);
        ``tick``: the live alerts are re-read, and the groups that look due are decided too (under their locks;
        a group another instance is deciding is skipped: it decides it). On a database error nothing is kept
        from this attempt but the pending signals and facts: the runtime retries, and the next attempt reads the
        groups again."""
        opened = self._outputs()
        if self.pending.reload:
            self._reload()  # never save facts over what the previous owner of a partition saved
        when = _utc(now)
        self.pending.add(signals, when)
        save = self._plan(opened.store, when, tick=tick, flush_facts=flush_facts)
        if save is None:
            return 0
        try:
            rows = self._transact(opened.store, save, when)
        except Exception:
            if self.catch_up is not None:
                self.catch_up.save_failed()
            raise
        self._saved(now)
        if rows:
            opened.worker.wake()
        return rows

    def _plan(self, store: AlertStore, when: dt.datetime, *, tick: bool, flush_facts: bool) -> _Save | None:
        """What to lock and write at ``when``; None when there is nothing to save."""
        d = self.dispatcher
        signals = [s for s, _ in self.pending.signals]
        must = {d.key_of(s) for s in signals}
        may: set[str] = set()
        if tick:
            d.replace(*store.live())
            self._reread_incidents(store)
            may = d.due_keys(when, self.muter(when)) - must
        self.pending.add_facts(self.engine.facts.dump_dirty())
        positions = self.catch_up.positions(self.offsets.handled) if self.catch_up is not None else []
        save = _Save(must, may, _new_groups(d, signals), self.pending.fact_rows() + positions)
        return save if must or may or flush_facts or save.facts or self.pending.edges else None

    def _transact(self, store: AlertStore, save: _Save, when: dt.datetime) -> int:
        """Lock the groups of ``save``, apply the pending signals to them as the database has them, decide what is
        due and write it all; how many outbox rows were written."""
        d = self.dispatcher
        d.clear_changes()
        with store.locked(save.must, save.may, save.create) as held:
            keys = held.keys | save.must
            d.refresh(keys, held.groups, held.alerts)
            book = self._incident_book(held.conn, when)
            outgoing = []
            for s, came in self.pending.signals:  # as they came: a failure and its fix in one batch are both told
                if (a := d.apply(s, came)) is not None:
                    self._decide_incidents(book, [a], came)
                    outgoing += d.due(came, self.muter(came), keys=[d.key_of(s)])
            self._decide_incidents(book, self._members(keys), when)
            outgoing += d.due(when, self.muter(when), keys=sorted(keys))
            rows = [(ch, o.notification.to_json()) for o in outgoing for ch in o.channels]
            held.write(d.changed_alerts.values(), d.changed_groups.values(), rows, save.facts, when)
            if book is not None:
                write_incidents(held.conn, book.changed.values(), book.attached, when)
        return len(rows)

    # -- incidents (incidents.py) ----------------------------------------------------------------------

    def _reread_incidents(self, store: AlertStore) -> None:
        """The open incidents as the database has them now, for muting only (decisions are taken in the
        transaction that saves them)."""
        if self.incident_rules:
            cfg = self.config.incidents
            self.incidents = IncidentBook(store.incidents(), EdgeGraph(), window=cfg.window, depth=cfg.depth)

    def _members(self, keys: set[str]) -> list[Alert]:
        """The live alerts of groups ``keys``."""
        d = self.dispatcher
        return [d.alerts[fp] for k in keys if (g := d.groups.get(k)) is not None for fp in g.members
                if fp in d.alerts]

    def _note_edges(self, event: dict[str, Any]) -> None:
        """Keep the lineage edges of ``event`` to write with the next save, unless written lately."""
        edges = edges_of(event)
        if not edges:
            return
        when = _utc(self.clock())
        fresh = [e for e in edges if (w := self.edges_written.get(e)) is None or when - w >= EDGE_REWRITE]
        self.pending.add_edges(fresh, when)

    def _incident_book(self, conn: Any, when: dt.datetime) -> IncidentBook | None:
        """In a save's transaction: write the pending lineage edges (so this batch's lineage counts), then read the
        open incidents as the database has them now; None when incidents are off."""
        if not self.incident_rules:
            return None
        if self.pending.edges:
            write_edges(conn, self.pending.edges.items())
        cfg = self.config.incidents
        self.incidents = IncidentBook(read_incidents(conn), StoreLineage(conn, when - EDGE_TTL), window=cfg.window,
                                      depth=cfg.depth)
        return self.incidents

    def _decide_incidents(self, book: IncidentBook | None, alerts: list[Alert], now: dt.datetime) -> None:
        """An alert not told yet joins the incident of its upstream failure, or opens one; a root that resolved
        ends its incident. The root's notification says what the incident affects."""
        if book is None:
            return
        for a in sorted(alerts, key=lambda a: (a.starts_at, a.fingerprint)):
            if a.state != "firing":
                book.resolve(a.fingerprint, a.ends_at or now)
                continue
            if a.rule not in self.incident_rules:
                continue
            job = (a.labels.get("namespace", ""), a.labels.get("job", ""))
            inc = book.decide(Candidate(a.fingerprint, a.labels.get("kind", ""), job, a.starts_at, a.labels,
                                        firing=True, notified=a.notified, upstream=_upstream_jobs(a)), now)
            if inc is not None and inc.root.fingerprint == a.fingerprint:
                told = inc.annotations()
                if any(a.annotations.get(k) != v for k, v in told.items()):
                    a.annotations = {**a.annotations, **told}
                    self.dispatcher.changed_alerts[a.fingerprint] = a

    def _saved(self, now: float) -> None:
        """After a save: what was pending is in the database, and what was handled may be committed."""
        self.dispatcher.clear_changes()
        if len(self.edges_written) > 100_000:  # many jobs and datasets: start over rather than grow without bound
            self.edges_written.clear()
        self.edges_written.update(self.pending.edges)
        self.pending.saved()
        self.offsets.saved()
        self.timers.facts.ran(now)

    # -- the clock's work ----------------------------------------------------------------------------

    def _reload_silences(self, store: AlertStore, now: float) -> None:
        self.silences = store.silences(_utc(now))
        self.timers.silences.ran(now)

    def _check_caught_up(self, store: AlertStore, now: float) -> None:
        self.timers.catch_up.ran(now)
        if self.catch_up is not None and self.catch_up.finish_if_read(store, self.offsets.durable):
            still = sum(1 for a in self.dispatcher.alerts.values() if a.state == "firing" and not a.notified)
            log.info("alerting: caught up with the history of group %s; notifying the %d alert(s) still open",
                     self.catch_up.group, still)

    def _still_owned(self, store: AlertStore, signals: list[Signal]) -> list[Signal]:
        """``signals`` of the clock's rules, less those on a run or refresh another instance took over: a refresh
        read from its command here whose runs' events another instance reads (the database's row says their
        partition) ends there. Such a fact is forgotten here. Reads the database only when something fires."""
        facts = self.engine.facts
        keys = {k for s in signals if s.firing and (k := _fact_of(s)) is not None}
        if facts.owned is None or not keys:
            return signals
        theirs = {k for k, p in store.fact_partitions(keys).items() if p is not None and p not in facts.owned}
        for kind, key in theirs:
            facts.forget(kind, key)
        return [s for s in signals if not {("run", s.run_id), ("refresh", s.refresh_id)} & theirs]

    def _never_written(self, store: AlertStore, signals: list[Signal]) -> list[Signal]:
        """``signals`` less the "never written" ones of promises whose dataset another instance saw written (its
        writer's events are on a partition this one does not own). Those stay flagged here, so the database is
        read once per promise, and only when such an alert would fire with several instances."""
        facts = self.engine.facts
        never = [s for s in signals if _never(s)]
        if facts.owned is None or not never:
            return signals
        elsewhere = _written_elsewhere(never, self.config.datasets, store.written_datasets())
        for s in elsewhere:
            facts.writes.flag(s.dataset or "", s.rule, s.labels)
        gone = {id(s) for s in elsewhere}
        return [s for s in signals if id(s) not in gone]

    def _reload(self) -> None:
        pending = set(self.pending.reload)
        rows = self.store.facts(pending)
        self.engine.facts.reload(rows, pending)
        self.pending.reload -= pending

    def _resend(self, opened: _Opened, now: float) -> None:
        for name, ch in opened.channels.items():
            if ch.resend_interval is None:
                continue
            timer = self.timers.resend.setdefault(name, Every(ch.resend_interval))
            if not timer.due(now):
                continue
            timer.ran(now)
            n = self.dispatcher.firing_for(name, _utc(now), self.muter(_utc(now)))
            if n is not None:
                opened.worker.send(name, n)  # on the worker's thread, like every use of a channel

    def muter(self, now: dt.datetime) -> Callable[[Alert], bool]:
        """Is an alert muted at ``now``: silenced, or inhibited by a firing alert (Alertmanager's inhibit_rules)?

        The firing sources are indexed once per call of the returned function's life (one dispatch round),
        so muting costs a look-up per alert, not a scan of every open alert.
        """
        index: dict[tuple[int, tuple[str | None, ...]], set[str]] | None = None
        rules = self.config.inhibit_rules
        # While a new group reads history, alerts that began before its start (or --notify-since) wait.
        held_before = self.catch_up.held_before if self.catch_up is not None else None

        def muted(alert: Alert) -> bool:
            nonlocal index
            if held_before is not None and alert.starts_at < held_before:
                return True
            if any(s.mutes(alert.labels, now) for s in self.silences):
                return True
            if self.incidents.muted(alert.fingerprint):
                return True  # attached to the open incident of its upstream failure: that incident's page tells it
            for i, rule in enumerate(rules):
                if not labels_match(rule.target, alert.labels):
                    continue
                if index is None:
                    index = _inhibitors(rules, self.dispatcher.alerts.values())
                sources = index.get((i, tuple(alert.labels.get(k) for k in rule.equal)))
                if sources and (len(sources) > 1 or alert.fingerprint not in sources):
                    return True
            return False

        return muted


def _inhibitors(rules: list[InhibitRule], alerts: Any) -> dict[tuple[int, tuple[str | None, ...]], set[str]]:
    """(inhibit rule's index, its ``equal`` labels' values) -> the fingerprints of the firing alerts that are
    that rule's sources."""
    out: dict[tuple[int, tuple[str | None, ...]], set[str]] = {}
    for src in alerts:
        if src.state != "firing":
            continue
        for i, rule in enumerate(rules):
            if labels_match(rule.source, src.labels):
                out.setdefault((i, tuple(src.labels.get(k) for k in rule.equal)), set()).add(src.fingerprint)
    return out


def _new_groups(dispatcher: Dispatcher, signals: list[Signal]) -> list[Group]:
    """The groups the firing ``signals`` open, once each (the store inserts those without a row yet)."""
    return list({g.key: g for g in (dispatcher.group_of(s) for s in signals if s.firing)}.values())


def _never(s: Signal) -> bool:
    """Is ``s`` a firing "never written" promise alert (``writes.never_key``)?"""
    return s.firing and s.dataset is not None and s.dataset.startswith("promise:")


def _written_elsewhere(never: list[Signal], promises: list[Promise], rows: list[dict[str, Any]]) -> list[Signal]:
    """The "never written" signals of ``never`` whose promise matches a dataset of ``rows`` (saved write states)."""
    by_name = {p.dataset: p for p in promises}
    written = [WriteState.from_json(doc) for doc in rows]
    return [s for s in never if (p := by_name.get(s.labels.get("dataset", ""))) is not None
            and any(p.matches(w.namespace, w.name, w.tables) for w in written)]


def _upstream_jobs(alert: Alert) -> tuple[tuple[str, str], ...]:
    """The jobs an alert names as its upstream (``upstream_jobs``: a JSON list of [namespace, job])."""
    text = alert.annotations.get("upstream_jobs")
    if not text:
        return ()
    try:
        return tuple((str(ns), str(job)) for ns, job in json.loads(text))
    except (ValueError, TypeError):
        return ()  # an annotation from a template or an older version: lineage alone decides


def _fact_of(signal: Signal) -> tuple[str, str] | None:
    """The fact a signal of the clock's rules is about: its run, else its refresh, else none."""
    if signal.run_id:
        return "run", signal.run_id
    return ("refresh", signal.refresh_id) if signal.refresh_id else None


def _close_channels(channels: dict[str, Channel]) -> None:
    for ch in channels.values():
        try:
            ch.close()
        except Exception as exc:  # noqa: BLE001 - closing must not hide the shutdown
            log.warning("closing channel %s failed: %s", ch.name, exc)
