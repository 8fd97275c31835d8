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
its mark (at most once per claim). While a send lasts, the outbox's one
``ClaimRenewer`` thread keeps its claim alive.

The pieces: ``Outbox`` claims, sends and marks rows; ``ClaimRenewer`` renews
the claim of the row being sent; ``OutboxWorker`` runs the outbox on a thread
of its own, woken by the service after each save.

Clocks, one per purpose:

* Times that are stored, or compared with stored times (``claimed_until``,
  ``next_attempt_at``, ``delivered_at``, and ``_down_until``, which copies a
  row's ``next_attempt_at``), are wall-clock times: the caller's ``now`` (the
  service's clock, which tests drive by hand), advanced by how long the
  delivery round has run so far (``RoundClock``), so each claim's lease counts
  from its own time, not from the start of a round of slow sends.
* How long the round has run, and every wait (a third of the lease between
  renewals, the worker's idle second), is measured on the monotonic clock,
  which no clock adjustment moves.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .channels import Channel
from .exceptions import ChannelError
from .model import Notification
from .store import AlertStore, OutboxRow

log = logging.getLogger(__name__)

__all__ = ["ClaimRenewer", "Outbox", "OutboxWorker", "RoundClock"]


class RoundClock:
    """The wall-clock times of one delivery round: ``start`` (the caller's now) plus the time the round has run,
    as the monotonic clock measures it (see the module docstring)."""

    def __init__(self, start: dt.datetime) -> None:
        self.start = start
        self._began = time.monotonic()

    def now(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=time.monotonic() - self._began)


@dataclass
class _Hold:
    """A claim kept while its row is sent."""

    row_id: int
    clock: RoundClock
    #: the send is over
    ended: threading.Event = field(default_factory=threading.Event)
    #: the renewer let go of it: no renewal is under way or to come
    released: threading.Event = field(default_factory=threading.Event)


class ClaimRenewer:
    """Renews the claim of the row being sent, every third of the lease while ``holding`` lasts: a channel's
    ``timeout`` bounds each phase of a send (connect, each read, each SMTP round trip), not the whole of it, so a
    live instance's slow send may outlast the lease; renewed, its claim is never taken over while the instance
    lives. Only an instance that died or froze for a whole lease loses it.

    One thread per outbox (started by the first hold, ended by ``close``; ``Outbox`` is a context manager that
    closes it): an outbox sends one row at a time, so there is one claim at a time to renew. ``holding`` and
    ``close`` are called from the thread that sends."""

    def __init__(self, store: AlertStore, owner: str, lease: float) -> None:
        self.store = store
        self.owner = owner
        self.lease = lease
        self._holds: queue.SimpleQueue[_Hold | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def holding(self, row_id: int, clock: RoundClock) -> Iterator[None]:
        """Keep the claim of row ``row_id`` while the block (a send) runs."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="lineagewire-alerting-claim", daemon=True)
            self._thread.start()
        hold = _Hold(row_id, clock)
        self._holds.put(hold)
        try:
            yield
        finally:
            hold.ended.set()
            # A renewal under way is written before the row's mark ends the claim. One stuck for a whole lease (a
            # locked or unreachable database) must not stop the worker for good: a renewal that lands after the
            # mark changes nothing (a mark clears the claim, and renew_claim extends only a claim that is set).
            if not hold.released.wait(self.lease):
                log.warning("outbox row %s: renewing its claim has not returned %.1fs after the send ended (the "
                            "database slow or locked?); marking the row without waiting for it", row_id, self.lease)

    def close(self, timeout: float = 30.0) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._holds.put(None)
            thread.join(timeout)

    def _run(self) -> None:
        while (hold := self._holds.get()) is not None:
            try:
                while not hold.ended.wait(self.lease / 3) and self._renew(hold):
                    pass
            finally:
                hold.released.set()

    def _renew(self, hold: _Hold) -> bool:
        """Extend the claim by a lease from now; False when it was lost (it is not renewed again)."""
        until = hold.clock.now() + dt.timedelta(seconds=self.lease)
        try:
            if self.store.renew_claim(hold.row_id, self.owner, until):
                return True
        except Exception as exc:  # noqa: BLE001 - the next renewal tries again, within the lease
            log.warning("outbox row %s: renewing the claim failed: %s", hold.row_id, exc)
            return True
        log.warning("outbox row %s: the claim of this instance (%s) was lost while sending", hold.row_id, self.owner)
        return False


class Outbox:
    """Delivers due outbox rows of ``store`` through ``channels``, as instance ``owner``."""

    def __init__(self, store: AlertStore, channels: dict[str, Channel], *, initial: float = 1.0,
                 maximum: float = 300.0, owner: str = "local", lease: float = 30.0) -> None:
        self.store = store
        self.channels = channels
        self.owner = owner
        self.lease = lease
        self.initial = initial
        self.maximum = maximum
        self.renewer = ClaimRenewer(store, owner, lease)
        #: channel -> the next attempt of its last failed row (a stored time): its rows are not claimed before
        self._down_until: dict[str, dt.datetime] = {}

    def backoff(self, attempts: int) -> float:
        return min(self.initial * 2 ** max(attempts - 1, 0), self.maximum) * (1 + 0.1 * random.random())

    def close(self, timeout: float = 30.0) -> None:
        """End the claim renewer's thread (started by the first send)."""
        self.renewer.close(timeout)

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def deliver(self, now: dt.datetime, limit: int = 200) -> int:
        """Claim and try due rows one by one (skipping channels known to be down), up to ``limit``; how many were
        delivered. Each row is marked delivered as soon as its channel took it: a kill before the mark makes the
        next claimant send it again, so the window is one send, not a batch."""
        return self._page(now, limit)[0]

    def deliver_due(self, now: Callable[[], dt.datetime], page: int = 200) -> None:
        """``deliver`` page after page while a full page was claimed and something was sent: there may be more."""
        while True:
            sent, claimed = self._page(now(), page)
            if not sent or claimed < page:
                return

    def _page(self, now: dt.datetime, limit: int) -> tuple[int, int]:
        """(delivered, claimed) of one ``deliver``."""
        clock = RoundClock(now)
        sent = claimed = 0
        while claimed < limit:
            at = clock.now()
            down = [ch for ch, until in self._down_until.items() if at < until]
            row = self.store.claim_outbox(self.owner, at, self.lease, skip=down)
            if row is None:
                break
            claimed += 1
            sent += self._attempt(row, at, clock)
        return sent, claimed

    def _attempt(self, row: OutboxRow, at: dt.datetime, clock: RoundClock) -> bool:
        """Send ``row``, claimed at ``at``, and record the attempt; whether its channel took it."""
        attempts = row.attempts + 1
        try:
            channel = self.channels.get(row.channel)
            if channel is None:
                raise ChannelError(f"channel {row.channel!r} is not in the rules file (any more); the "
                                   "notification waits until it is")
            with self.renewer.holding(row.id, clock):
                channel.send(Notification.from_json(row.payload))
        except Exception as exc:  # noqa: BLE001 - whatever a channel raises, the row must stay
            self._failed(row, attempts, at, exc)
            return False
        self._down_until.pop(row.channel, None)
        self._marked(row.id, self.store.mark_delivered([(row.id, attempts)], at, owner=self.owner))
        return True

    def _failed(self, row: OutboxRow, attempts: int, at: dt.datetime, exc: Exception) -> None:
        if isinstance(exc, ChannelError) and not exc.retryable:
            log.error("outbox row %s: %s; not retried (see `lineagewire alerts outbox`)", row.id, exc)
            self._marked(row.id, self.store.mark_outbox(row.id, state="failed", attempts=attempts, now=at,
                                                        error=str(exc), owner=self.owner))
            return
        delay = self.backoff(attempts)
        retry_at = at + dt.timedelta(seconds=delay)
        self._down_until[row.channel] = retry_at
        log.warning("outbox row %s: %s; attempt %d failed, next in %.1fs", row.id, exc, attempts, delay)
        self._marked(row.id, self.store.mark_outbox(row.id, state="pending", attempts=attempts, now=at,
                                                    next_attempt_at=retry_at, error=str(exc), owner=self.owner))

    def _marked(self, row_id: int, held: bool) -> None:
        if not held:
            log.warning("outbox row %s: this instance (%s) no longer held its claim when it marked it (it outlasted "
                        "claim_lease without renewing it: frozen, or the database unreachable); another instance "
                        "took the row over and may send it again", row_id, self.owner)


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
            self.outbox.close()
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
            self.outbox.deliver_due(self.now)
        except Exception:  # noqa: BLE001 - the database is down: the rows wait, the next round tries again
            log.exception("delivering the alert outbox failed; retrying in %.0fs", self.idle)
