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
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from lineagewire.consumers.runtime.base import Handler

from .channels import Channel
from .config import AlertingConfig
from .dispatch import Alert, Dispatcher
from .engine import RuleEngine
from .facts import Facts
from .model import labels_match
from .outbox import Outbox, OutboxWorker
from .store import DEFAULT_URL, AlertStore, Silence

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["AlertingHandler"]


def _utc(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


class AlertingHandler(Handler):
    """Alerts from job events; see the module docstring.

    ``channels``: channel objects to use instead of building them from ``config`` (tests);
    ``clock``: epoch seconds now (tests drive group_wait and deadlines with it).
    """

    name: ClassVar[str] = "alerting"
    tick_interval: ClassVar[float | None] = 1.0

    def __init__(self, config: AlertingConfig, *, database: str | None = None,
                 channels: dict[str, Channel] | None = None, clock: Callable[[], float] = time.time,
                 facts_interval: float = 1.0, silences_interval: float = 2.0, transport: Any = None) -> None:
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
        self._unsaved_rows: list[tuple[str, dict[str, Any]]] = []
        self._unsaved_facts: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._pruned_at = 0.0

    # -- Handler hooks -------------------------------------------------------------------------------

    def open(self) -> None:
        self.store = AlertStore(self.database)
        alerts, groups, facts = self.store.load()
        self.engine.facts.load(facts)
        self.dispatcher.load(alerts, groups)
        self.channels = self._channels if self._channels is not None else \
            self.config.build_channels(self._transport)
        self.outbox = Outbox(self.store, self.channels)
        self.worker = OutboxWorker(self.outbox, lambda: _utc(self.clock())).start()
        self._reload_silences(self.clock())
        log.info("alerting: %d rules, %d channels (%s), %d open alerts, database %s", len(self.engine.rules),
                 len(self.channels), ", ".join(sorted(self.channels)) or "none", len(alerts),
                 self.store.engine.url.render_as_string(hide_password=True))

    def handle(self, record: Record) -> int:
        assert record.event is not None
        signals = self.engine.process(record.event)
        self._handled[(record.topic, record.partition)] = record.offset + 1
        return self._apply(signals, self.clock(), tick=False, save=False)

    def batch_done(self) -> int:
        self._apply([], self.clock(), tick=False)
        return 0

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until the outbox worker has delivered what was due when this was called (tests)."""
        return self.worker.settle(timeout) if self.worker is not None else True

    def tick(self, now: float) -> int:
        now = self.clock()
        when = _utc(now)
        if now - self._silences_at >= self.silences_interval:
            self._reload_silences(now)
        signals = self.engine.check(when)
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
        self._apply([], self.clock(), flush_facts=True)

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

    def _apply(self, signals: list[Any], now: float, *, flush_facts: bool = False, tick: bool = True,
               save: bool = True) -> int:
        """Apply signals, queue the notifications now due and (``save``) store what is queued in one
        transaction, then wake the outbox worker."""
        assert self.store is not None and self.worker is not None
        when = _utc(now)
        for s in signals:
            self.dispatcher.apply(s, when)
        outgoing = self.dispatcher.due(when, self.muter(when), everything=tick)
        new_rows = [(ch, o.notification.to_json()) for o in outgoing for ch in o.channels]
        self._unsaved_rows.extend(new_rows)
        alerts, groups = list(self.dispatcher.changed_alerts.values()), list(self.dispatcher.changed_groups.values())
        if save and (alerts or groups or self._unsaved_rows or flush_facts):
            saved_rows = bool(self._unsaved_rows)
            for kind, key, value in self.engine.facts.dump_dirty():
                self._unsaved_facts[(kind, key)] = value
            facts = [(k, key, v) for (k, key), v in self._unsaved_facts.items()]
            # On a database error the changes stay queued here; the runtime retries and the next call saves them.
            self.store.save(alerts, groups, self._unsaved_rows, facts, when)
            self.dispatcher.changed_alerts.clear()
            self.dispatcher.changed_groups.clear()
            self._unsaved_rows, self._unsaved_facts = [], {}
            self._durable = dict(self._handled)
            self._facts_at = now
            if saved_rows:
                self.worker.wake()
        return len(new_rows)

    def _resend(self, now: float) -> None:
        for name, ch in self.channels.items():
            interval = ch.resend_interval
            if interval is None or now - self._resent_at.get(name, 0.0) < interval:
                continue
            self._resent_at[name] = now
            n = self.dispatcher.firing_for(name, _utc(now), self.muter(_utc(now)))
            if n is not None and self.worker is not None:
                self.worker.send(name, n)  # on the worker's thread, like every use of a channel
