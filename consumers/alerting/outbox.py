"""Delivery from the outbox: every notification is a row until a channel took it.

A channel that fails is retried with exponential backoff (``initial`` * 2^n
seconds, capped at ``maximum``, plus jitter) for as long as it takes; rows
wait in the database meanwhile, so a down channel, or a service restart,
loses nothing, and the other channels go on. A refusal that will not change
(HTTP 400, SMTP 5xx) marks the row ``failed`` (kept, listed by
``lineagewire alerts outbox``) and is logged as an error.

Instances sharing the database share the outbox: a row is sent by the instance
that claimed it (``AlertStore.claim_outbox``) and marked delivered right after
the channel took it. A claim lasts ``lease`` seconds; one left by an instance
that died is taken over by another, which sends the row again: a notification
is lost by no kill, and repeated only by a kill between a channel taking it and
its mark (at most once per claim).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator

from .channels import Channel
from .exceptions import ChannelError
from .model import Notification
from .store import AlertStore

log = logging.getLogger(__name__)

__all__ = ["Outbox", "OutboxWorker"]


class Outbox:
    """Delivers due outbox rows of ``store`` through ``channels``."""

    def __init__(self, store: AlertStore, channels: dict[str, Channel], *, initial: float = 1.0,
                 maximum: float = 300.0, owner: str = "local", lease: float = 30.0) -> None:
        self.store = store
        self.channels = channels
        self.owner = owner
        self.lease = lease
        self.initial = initial
        self.maximum = maximum
        self._down_until: dict[str, dt.datetime] = {}
        self.delivered = 0
        self.failures = 0
        #: rows whose claim was taken over before this instance marked them
        self.lost = 0
        self.last_page = 0

    def backoff(self, attempts: int) -> float:
        return min(self.initial * 2 ** max(attempts - 1, 0), self.maximum) * (1 + 0.1 * random.random())

    @contextlib.contextmanager
    def _holding(self, row_id: int, claimed_at: dt.datetime) -> Iterator[None]:
        """Renew the claim of row ``row_id`` every third of the lease while the block (a send) runs: a channel's
        ``timeout`` bounds each phase of a send (connect, each read, each SMTP round trip), not the whole of it,
        so a live instance's slow send may outlast the lease; renewed, its claim is never taken over while the
        instance lives. Only an instance that died or froze for a whole lease loses it."""
        stop = threading.Event()
        started = time.monotonic()

        def renew() -> None:
            while not stop.wait(self.lease / 3):
                until = claimed_at + dt.timedelta(seconds=time.monotonic() - started + self.lease)
                try:
                    if not self.store.renew_claim(row_id, self.owner, until):
                        log.warning("outbox row %s: the claim of this instance (%s) was lost while sending",
                                    row_id, self.owner)
                        return
                except Exception as exc:  # noqa: BLE001 - the next renewal tries again, within the lease
                    log.warning("outbox row %s: renewing the claim failed: %s", row_id, exc)

        renewer = threading.Thread(target=renew, name="lineagewire-alerting-claim", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()

    def _lost(self, row_id: int) -> None:
        self.lost += 1
        log.warning("outbox row %s: this instance (%s) no longer held its claim when it marked it (it outlasted "
                    "claim_lease without renewing it: frozen, or the database unreachable); another instance took "
                    "the row over and may send it again", row_id, self.owner)

    def deliver(self, now: dt.datetime, limit: int = 200) -> int:
        """Claim and try due rows one by one (skipping channels known to be down), up to ``limit``; how many were
        delivered. Each row is marked delivered as soon as its channel took it: a kill before the mark makes the
        next claimant send it again, so the window is one send, not a batch."""
        sent = claimed = 0
        started = time.monotonic()
        while claimed < limit:
            # Each claim's lease counts from its own time, not the round's: a round of slow sends is long.
            now += dt.timedelta(seconds=time.monotonic() - started)
            started = time.monotonic()
            down = [ch for ch, until in self._down_until.items() if now < until]
            row = self.store.claim_outbox(self.owner, now, self.lease, skip=down)
            if row is None:
                break
            claimed += 1
            channel = self.channels.get(row.channel)
            attempts = row.attempts + 1
            try:
                if channel is None:
                    raise ChannelError(f"channel {row.channel!r} is not in the rules file (any more); the "
                                       "notification waits until it is")
                with self._holding(row.id, now):
                    channel.send(Notification.from_json(row.payload))
            except Exception as exc:  # noqa: BLE001 - whatever a channel raises, the row must stay
                self.failures += 1
                retryable = not isinstance(exc, ChannelError) or exc.retryable
                if not retryable:
                    log.error("outbox row %s: %s; not retried (see `lineagewire alerts outbox`)", row.id, exc)
                    if not self.store.mark_outbox(row.id, state="failed", attempts=attempts, now=now,
                                                  error=str(exc), owner=self.owner):
                        self._lost(row.id)
                    continue
                delay = self.backoff(attempts)
                retry_at = now + dt.timedelta(seconds=delay)
                self._down_until[row.channel] = retry_at
                log.warning("outbox row %s: %s; attempt %d failed, next in %.1fs", row.id, exc, attempts, delay)
                if not self.store.mark_outbox(row.id, state="pending", attempts=attempts, now=now,
                                              next_attempt_at=retry_at, error=str(exc), owner=self.owner):
                    self._lost(row.id)
                continue
            self._down_until.pop(row.channel, None)
            if not self.store.mark_delivered([(row.id, attempts)], now, owner=self.owner):
                self._lost(row.id)
            sent += 1
        self.last_page = claimed
        self.delivered += sent
        return sent


class OutboxWorker:
    """Runs ``Outbox.deliver`` on a thread of its own, so a slow or down channel, or the database writes of a
    batch, never hold up the consumer loop, and a new notification goes out as soon as it is saved.

    The consumer thread saves outbox rows, then calls ``wake()``; the worker delivers every due row (it also
    looks once a second). Only rows already in the database are sent, so an alert is durable before anyone is
    told and before its offset is committed. ``send(channel, notification)`` queues a send that is not an
    outbox row (a re-send of firing alerts to Alertmanager), so each channel is used from this thread only.
    ``settle()`` waits for a delivery round that started after the call (tests, shutdown).
    """

    def __init__(self, outbox: Outbox, now: Callable[[], dt.datetime], *, idle: float = 1.0) -> None:
        self.outbox = outbox
        self.now = now
        self.idle = idle
        self._cond = threading.Condition()
        self._asked = 0
        self._done = 0
        self._extra: list[tuple[str, Notification]] = []
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> OutboxWorker:
        self._thread = threading.Thread(target=self._run, name="lineagewire-alerting-outbox", daemon=True)
        self._thread.start()
        return self

    def wake(self) -> int:
        """Ask for a delivery round; its ticket for ``settle``."""
        with self._cond:
            self._asked += 1
            self._cond.notify_all()
            return self._asked

    def send(self, channel: str, notification: Notification) -> None:
        with self._cond:
            self._extra.append((channel, notification))
        self.wake()

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until a delivery round that started after this call has finished; False on timeout."""
        ticket = self.wake()
        with self._cond:
            return self._cond.wait_for(lambda: self._done >= ticket or self._thread is None, timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the round in hand, run a last one, and end the thread."""
        thread = self._thread
        if thread is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread.join(timeout)
        if thread.is_alive():
            log.warning("the outbox worker did not stop within %.0fs; undelivered rows stay in the outbox", timeout)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._asked > self._done or self._stopping, self.idle)
                    ticket, stopping = self._asked, self._stopping
                    extra, self._extra = self._extra, []
                self._round(extra)
                with self._cond:
                    self._done = ticket
                    self._cond.notify_all()
                if stopping:
                    return
        finally:
            with self._cond:
                self._thread = None
                self._cond.notify_all()

    def _round(self, extra: list[tuple[str, Notification]]) -> None:
        for name, notification in extra:
            channel = self.outbox.channels.get(name)
            if channel is None:
                continue
            try:
                channel.send(notification)
            except Exception as exc:  # noqa: BLE001 - a re-send is a refresh; the next one comes soon
                log.warning("re-sending %d firing alert(s) to %s failed: %s", len(notification.alerts), name, exc)
        try:
            while self.outbox.deliver(self.now(), limit=200) and self.outbox.last_page >= 200:
                pass  # a full page delivered: there may be more due
        except Exception:  # noqa: BLE001 - the database is down: the rows wait, the next round tries again
            log.exception("delivering the alert outbox failed; retrying in %.0fs", self.idle)
