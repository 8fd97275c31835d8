"""The alerting service: a ``Handler`` on the shared consumer runtime.

Per event: the ``RuleEngine`` turns it into signals; the ``Dispatcher``
opens, refreshes or resolves alerts and says which group notifications are
due; one database transaction stores the alert changes, the notifications
(as outbox rows) and the rules' facts; then the ``Outbox`` delivers. On the
runtime's clock (``tick``, every second, also on a quiet topic) it evaluates
the time-based rules, re-reads silences, sends what group_wait/group_interval
held back, re-sends firing alerts to Alertmanager, and retries the outbox.

Facts are saved with every alert change and at least every second; offsets
are committed only up to what is saved (``durable_offsets``), so a restart
replays the rest and rebuilds exactly the same facts.

With a ``CatchUp`` (``consume alerting`` passes one), a new group reads the
history already on the topic silently and then notifies the alerts still
open, once (see catchup.py).

Several instances of one group share one database, and each alert state
change is notified once whichever of them sees it: signals are buffered and
applied in the transaction that saves them (``AlertStore.locked``), to the
groups as the database has them under their row locks, never to what this
instance remembered; the clock re-reads the live alerts, then decides the
groups that look due under their locks, skipping those another instance is
deciding. The outbox worker sends only rows it claimed (outbox.py). When
partitions are assigned, the rules' facts are read again, since the previous
owner of those partitions saved newer ones.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from lineagewire.consumers.runtime.base import Handler

from .catchup import CatchUp, CatchUpPlan, partition_key
from .channels import Channel
from .config import AlertingConfig
from .dispatch import Alert, Dispatcher
from .engine import RuleEngine
from .facts import Facts
from .model import labels_match
from .outbox import Outbox, OutboxWorker
from .store import CATCHUP_POS, DEFAULT_URL, AlertStore, Silence

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["AlertingHandler"]


def _utc(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


class AlertingHandler(Handler):
    """Alerts from job events; see the module docstring.

    ``channels``: channel objects to use instead of building them from ``config`` (tests);
    ``clock``: epoch seconds now (tests drive group_wait and deadlines with it);
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
        self.facts_interval = facts_interval
        self.silences_interval = silences_interval
        self._channels = channels
        self._transport = transport
        self.store: AlertStore | None = None
        self.channels: dict[str, Channel] = {}
        r = config.route
        self.dispatcher = Dispatcher(group_by=r.group_by, group_wait=r.group_wait, group_interval=r.group_interval,
                                     repeat_interval=r.repeat_interval)
        self.engine = RuleEngine(config.build_rules(), Facts())
        self.outbox: Outbox | None = None
        self.worker: OutboxWorker | None = None
        self.silences: list[Silence] = []
        self._silences_at = 0.0
        self._facts_at = 0.0
        self._resent_at: dict[str, float] = {}
        self._handled: dict[tuple[str, int], int] = {}
        self._durable: dict[tuple[str, int], int] = {}
        #: signals not yet applied, with when they came: they are applied in the transaction that saves them
        self._signals: list[tuple[Any, dt.datetime]] = []
        self._unsaved_facts: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._pruned_at = 0.0
        self.catch_up = catch_up
        self.plan: CatchUpPlan | None = None  # None: not known yet (no event handled, no record in the database)
        self._started = clock()
        self._positions_saved: dict[str, int] = {}
        self._caught_up_checked = 0.0
        #: this instance, as the owner of the outbox rows it claims
        self.instance = f"{uuid.uuid4().hex[:12]}"
        #: assigned partitions whose facts are still to be read (``on_assign``): nothing is saved until they are
        self._reload_pending: set[str] = set()

    # -- Handler hooks -------------------------------------------------------------------------------

    def open(self) -> None:
        self.store = AlertStore(self.database)
        alerts, groups, facts = self.store.load()
        self.engine.facts.load(facts)
        self.dispatcher.load(alerts, groups)
        if self.catch_up is not None and (held := self.store.catchup(self.catch_up.group)) is not None:
            self.plan = CatchUpPlan.from_json(held)
        self.channels = self._channels if self._channels is not None else \
            self.config.build_channels(self._transport)
        self.outbox = Outbox(self.store, self.channels, owner=self.instance, lease=self.config.claim_lease)
        self.worker = OutboxWorker(self.outbox, lambda: _utc(self.clock())).start()
        self._reload_silences(self.clock())
        log.info("alerting: %d rules, %d channels (%s), %d open alerts, database %s", len(self.engine.rules),
                 len(self.channels), ", ".join(sorted(self.channels)) or "none", len(alerts),
                 self.store.engine.url.render_as_string(hide_password=True))

    def handle(self, record: Record) -> int:
        assert record.event is not None
        if self.catch_up is not None and self.plan is None:
            self._plan_catch_up()
        if self._reload_pending:
            self._reload()  # a failure is the runtime's to retry: no event is folded into facts not read yet
        now = _utc(self.clock())
        signals = self.engine.process(record.event, partition_key(record.topic, record.partition))
        self._signals.extend((s, now) for s in signals)
        self._handled[(record.topic, record.partition)] = record.offset + 1
        return 0

    def batch_done(self) -> int:
        return self._apply([], self.clock(), tick=False)

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until the outbox worker has delivered what was due when this was called (tests)."""
        return self.worker.settle(timeout) if self.worker is not None else True

    def tick(self, now: float) -> int:
        now = self.clock()
        when = _utc(now)
        if now - self._silences_at >= self.silences_interval:
            self._reload_silences(now)
        if self.catching_up and now - self._caught_up_checked >= 1.0:
            self._check_caught_up(now)
        # The clock's rules wait for the end of history: a run whose end is still to be read is not stuck.
        signals = [] if self.catching_up else self._still_owned(self.engine.check(when))
        flush = now - self._facts_at >= self.facts_interval
        if now - self._pruned_at > 3600:
            self.engine.facts.prune(when)
            assert self.store is not None
            self.store.prune_outbox(when - dt.timedelta(days=7))
            self._pruned_at = now
        n = self._apply(signals, now, flush_facts=flush)
        self._resend(now)
        assert self.worker is not None
        self.worker.wake()  # retries of rows whose channel was down
        return n

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        return dict(self._durable)

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
                self._reload_pending -= gone

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
        self._reload_pending |= new
        self._reload()

    def _still_owned(self, signals: list[Any]) -> list[Any]:
        """``signals`` of the clock's rules, less those on a run or refresh another instance took over: a refresh
        read from its command here whose runs' events another instance reads (the database's row says their
        partition) ends there. Such a fact is forgotten here. Reads the database only when something fires."""
        facts = self.engine.facts
        firing = [s for s in signals if s.firing and (s.run_id or s.refresh_id)]
        if facts.owned is None or not firing:
            return signals
        assert self.store is not None
        keys = {("run", s.run_id) if s.run_id else ("refresh", s.refresh_id) for s in firing}
        theirs = {k for k, p in self.store.fact_partitions(keys).items() if p is not None and p not in facts.owned}
        for kind, key in theirs:
            facts.forget(kind, key)
        return [s for s in signals if not ((s.run_id and ("run", s.run_id) in theirs)
                                           or (s.refresh_id and ("refresh", s.refresh_id) in theirs))]

    def _reload(self) -> None:
        assert self.store is not None
        pending = set(self._reload_pending)
        rows = self.store.facts(pending)
        self.engine.facts.reload(rows, pending)
        self._reload_pending -= pending

    def close(self) -> None:
        try:
            if self.store is not None and self.worker is not None:  # else open() failed before the worker
                self._apply([], self.clock(), flush_facts=True)
        finally:
            if self.worker is not None:
                self.worker.stop()  # after a last delivery round; what is left waits in the outbox

            for ch in self.channels.values():
                try:
                    ch.close()
                except Exception as exc:  # noqa: BLE001 - closing must not hide the shutdown
                    log.warning("closing channel %s failed: %s", ch.name, exc)
            if self.store is not None:
                self.store.close()

    # -- a new group's catch-up (catchup.py) ---------------------------------------------------------------

    @property
    def catching_up(self) -> bool:
        return self.plan is not None and not self.plan.done

    def _plan_catch_up(self) -> None:
        assert self.catch_up is not None and self.store is not None
        held = self.store.catchup(self.catch_up.group)
        if held is None:
            held = self.store.start_catchup(self.catch_up.group, self.catch_up.plan(_utc(self._started)).to_json())
        self.plan = CatchUpPlan.from_json(held)

    def _check_caught_up(self, now: float) -> None:
        """Done when every partition of the plan was saved up to its end, by this instance or another."""
        assert self.catch_up is not None and self.store is not None and self.plan is not None
        self._caught_up_checked = now
        held = self.store.catchup(self.catch_up.group)
        if held is None or not held["done"]:  # else another instance saw the end (and cleared the positions)
            saved = self.store.catchup_positions(self.catch_up.group)
            for (topic, partition), pos in self._durable.items():
                key = partition_key(topic, partition)
                saved[key] = max(saved.get(key, 0), pos)
            if any(saved.get(key, 0) < end for key, end in self.plan.ends.items()):
                return
            self.store.finish_catchup(self.catch_up.group, self.plan.to_json())
        self.plan.done = True
        still = sum(1 for a in self.dispatcher.alerts.values() if a.state == "firing" and not a.notified)
        log.info("alerting: caught up with the history of group %s; notifying the %d alert(s) still open",
                 self.catch_up.group, still)

    def _catch_up_positions(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """Rows saving how far this instance read each partition of the plan (other instances read them)."""
        if not self.catching_up or self.catch_up is None or self.plan is None:
            return []
        out: list[tuple[str, str, dict[str, Any] | None]] = []
        for (topic, partition), pos in self._handled.items():
            key = partition_key(topic, partition)
            if key in self.plan.ends and self._positions_saved.get(key) != pos:
                self._positions_saved[key] = pos
                out.append((CATCHUP_POS, f"{self.catch_up.group}\x1f{key}", {"pos": pos}))
        return out

    # -- internals -----------------------------------------------------------------------------------

    def _reload_silences(self, now: float) -> None:
        assert self.store is not None
        self.silences = self.store.silences(_utc(now))
        self._silences_at = now

    def muter(self, now: dt.datetime) -> Callable[[Alert], bool]:
        """Is an alert muted at ``now``: silenced, or inhibited by a firing alert (Alertmanager's inhibit_rules)?

        The firing sources are indexed once per call of the returned function's life (one dispatch round),
        so muting costs a look-up per alert, not a scan of every open alert.
        """
        index: dict[tuple[int, tuple[str | None, ...]], set[str]] | None = None
        rules = self.config.inhibit_rules
        # While a new group reads history, alerts that began before its start (or --notify-since) wait.
        held_before = self.plan.since if self.catching_up and self.plan is not None else None

        def build() -> dict[tuple[int, tuple[str | None, ...]], set[str]]:
            out: dict[tuple[int, tuple[str | None, ...]], set[str]] = {}
            for src in self.dispatcher.alerts.values():
                if src.state != "firing":
                    continue
                for i, rule in enumerate(rules):
                    if labels_match(rule.source, src.labels):
                        out.setdefault((i, tuple(src.labels.get(k) for k in rule.equal)), set()).add(src.fingerprint)
            return out

        def muted(alert: Alert) -> bool:
            nonlocal index
            if held_before is not None and alert.starts_at < held_before:
                return True
            if any(s.mutes(alert.labels, now) for s in self.silences):
                return True
            for i, rule in enumerate(rules):
                if not labels_match(rule.target, alert.labels):
                    continue
                if index is None:
                    index = build()
                sources = index.get((i, tuple(alert.labels.get(k) for k in rule.equal)))
                if sources and (len(sources) > 1 or alert.fingerprint not in sources):
                    return True
            return False

        return muted

    def _apply(self, signals: list[Any], now: float, *, flush_facts: bool = False, tick: bool = True) -> int:
        """Apply the buffered signals and ``signals``, queue the notifications now due and store it all in one
        transaction, then wake the outbox worker; how many outbox rows were written.

        The groups the signals touch are locked and read afresh first (another instance may have changed them);
        ``tick``: the live alerts are re-read, and the groups that look due are decided too (under their locks;
        a group another instance is deciding is skipped: it decides it)."""
        assert self.store is not None and self.worker is not None
        if self._reload_pending:
            self._reload()  # never save facts over what the previous owner of a partition saved
        when = _utc(now)
        self._signals.extend((s, when) for s in signals)
        must = {self.dispatcher.key_of(s) for s, _ in self._signals}
        create = {g.key: g for g in (self.dispatcher.group_of(s) for s, _ in self._signals if s.firing)}
        may: set[str] = set()
        if tick:
            self.dispatcher.replace(*self.store.live())
            may = self.dispatcher.due_keys(when, self.muter(when)) - must
        for kind, key, value in self.engine.facts.dump_dirty():
            self._unsaved_facts[(kind, key)] = value
        positions = self._catch_up_positions()
        if not (must or may or flush_facts or positions or self._unsaved_facts):
            return 0
        facts = [(k, key, v) for (k, key), v in self._unsaved_facts.items()] + positions
        # On a database error nothing is kept from this attempt but the buffered signals and facts: the runtime
        # retries, and the next attempt reads the groups again.
        self.dispatcher.changed_alerts.clear()
        self.dispatcher.changed_groups.clear()
        try:
            with self.store.locked(must, may, create.values()) as held:
                self.dispatcher.refresh(held.keys | must, held.groups, held.alerts)
                outgoing = []
                for s, came in self._signals:  # as they came: a failure and its fix in one batch are both told
                    if self.dispatcher.apply(s, came) is not None:
                        outgoing += self.dispatcher.due(came, self.muter(came), keys=[self.dispatcher.key_of(s)])
                outgoing += self.dispatcher.due(when, self.muter(when), keys=sorted(held.keys | must))
                rows = [(ch, o.notification.to_json()) for o in outgoing for ch in o.channels]
                held.write(self.dispatcher.changed_alerts.values(), self.dispatcher.changed_groups.values(), rows,
                           facts, when)
        except Exception:
            self._positions_saved.clear()  # the positions are written again by the next attempt
            raise
        self.dispatcher.changed_alerts.clear()
        self.dispatcher.changed_groups.clear()
        self._signals, self._unsaved_facts = [], {}
        self._durable = dict(self._handled)
        self._facts_at = now
        if rows:
            self.worker.wake()
        return len(rows)

    def _resend(self, now: float) -> None:
        for name, ch in self.channels.items():
            interval = ch.resend_interval
            if interval is None or now - self._resent_at.get(name, 0.0) < interval:
                continue
            self._resent_at[name] = now
            n = self.dispatcher.firing_for(name, _utc(now), self.muter(_utc(now)))
            if n is not None and self.worker is not None:
                self.worker.send(name, n)  # on the worker's thread, like every use of a channel
