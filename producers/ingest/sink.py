"""Durable acknowledgement: a request's messages are on Kafka, or in the outbox, before it is answered.

``DurableSink.store(messages)`` (a coroutine) returns once every message is
durable, in one of two ways:

* **on Kafka**: produced through the product's ``Publisher`` (idempotent,
  ``acks=all``) and confirmed by its delivery report. This is the path while the
  cluster answers, with no disk write per event;
* **in the outbox** (``lineagewire.kafka.outbox``, the emitter's): a message whose
  delivery failed, or that did not get a report within ``ack_timeout`` (its
  ``message.timeout.ms``), or that the producer's local queue had no room for,
  is written to the outbox folder before ``store`` returns. The outbox's own
  publisher sends it as soon as the cluster answers again, and a restarted
  receiver sends what an earlier one left there.

After a failure the sink stays in outage mode: new messages go straight to the
outbox (answered at disk speed, not after ``ack_timeout``), behind the older
ones, until the outbox is empty again. A message the outbox cannot hold (full:
``outbox_max_mb``) fails the request with ``NotStored`` (503), so the producer
keeps it and retries. Delivery is at-least-once: a message that timed out may
still arrive and then arrive again from the outbox; the translator's event ids
are deterministic, so consumers drop the second copy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from lineagewire.config import Settings
from lineagewire.exceptions import PublishError
from lineagewire.kafka.outbox import Outbox, OutboxEntry, OutboxPublisher
from lineagewire.kafka.publisher import Delivery, Outgoing, Publisher

from .http_errors import IngestRejected, NotStored

log = logging.getLogger(__name__)

__all__ = ["DurableSink", "StrictOutbox"]


class StrictOutbox(Outbox):
    """An ``Outbox`` whose ``put`` raises ``NotStored`` when full, instead of answering None: the outbox's
    publisher would send such a message unspooled, and the receiver must not acknowledge what it cannot keep. Each
    record is on disk (fsync) before the receiver answers for it."""

    sync = True

    def put(self, topic: str, key: bytes, value: bytes) -> OutboxEntry | None:
        entry = super().put(topic, key, value)
        if entry is None:
            raise NotStored(f"Kafka did not take the events and the outbox {self.folder} cannot hold them "
                            f"({self.bytes} of {self.max_bytes} bytes used, or not writable); expected room for "
                            f"{len(value)} more bytes (raise outbox_max_mb, or bring the cluster back)")
        return entry


#: how often the loop serves delivery reports while requests wait for them (seconds)
_TICK = 0.001


class _Batch:
    """One request's messages in flight: settled on the event loop once each has its delivery report."""

    __slots__ = ("failed", "future", "loop", "messages", "remaining")

    def __init__(self, messages: Sequence[Outgoing], loop: asyncio.AbstractEventLoop) -> None:
        self.messages = messages
        self.remaining = len(messages)
        self.failed: list[tuple[int, Delivery | None]] = []
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()


class DurableSink:
    """Stores messages on Kafka or in the outbox; see the module docstring.

    ``store`` is called on one asyncio event loop, and the delivery reports are served on it too: while requests
    wait, the loop polls the producer every millisecond. A thread of its own would hand the GIL back and forth and
    wake the loop through its self-pipe once per request, which cost more than the rest of a small request.
    """

    def __init__(self, settings: Settings, outbox: StrictOutbox, *, ack_timeout: float = 2.0,
                 producer_config: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.ack_timeout = ack_timeout
        timeout_ms = max(1000, int(ack_timeout * 1000))
        # linger 2 ms: a request waits for its confirmation, so a long linger is added to every answer; the
        # concurrent requests of a loaded receiver still share batches within it.
        overrides = {"message.timeout.ms": timeout_ms, "linger.ms": 2, **(producer_config or {})}
        self._publisher = Publisher(settings, producer_config=overrides, queue_full_timeout=0)
        self._spool = OutboxPublisher(settings, outbox, delivery_timeout=ack_timeout, producer_config=producer_config)
        self.outbox = outbox
        self._outage = len(outbox) > 0  # an earlier run's events go first
        self._waiting = 0  # requests whose reports are not all in
        self._ticking = False
        self.delivered = 0
        self.spooled = 0
        self._closed = False

    @property
    def outage(self) -> bool:
        """New messages go to the outbox first (the cluster failed a delivery and the outbox is not empty yet)."""
        if self._outage and len(self.outbox) == 0:
            self._outage = False
            log.info("the outbox is empty again: events go straight to Kafka")
        return self._outage

    def pending_in_outbox(self) -> int:
        """Messages in the outbox, not yet acknowledged by Kafka."""
        return len(self.outbox)

    async def store(self, messages: Sequence[Outgoing]) -> None:
        """Return once every message is on Kafka or in the outbox; NotStored when one is neither."""
        if not messages:
            return
        if self.outage:
            self._spool_all(messages, range(len(messages)))
            return
        batch = _Batch(messages, asyncio.get_running_loop())
        self._waiting += 1
        try:
            for i, m in enumerate(messages):
                try:
                    self._publisher.produce_raw(m.topic, m.value, key=m.key, on_delivery=self._reporter(batch, i))
                except PublishError as exc:  # the local queue is full (the cluster is slow or away): no report comes
                    log.debug("cannot queue %s: %s; it goes to the outbox", m.label, exc)
                    self._report(batch, i, None)
            self._watch(batch.loop)
            # A timer, not asyncio.wait_for: that wraps the wait in a task of its own, a cost on every request.
            timer = batch.loop.call_later(self.ack_timeout + 5.0, self._expire, batch)
            try:
                await batch.future
            finally:
                timer.cancel()
        finally:
            self._waiting -= 1

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._ticking:
            self._ticking = True
            loop.call_later(_TICK, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            self._publisher.poll(0)  # delivery reports: _report, on this thread
            if self._publisher.fatal:
                log.error("the Kafka producer hit a fatal error; starting a new one (its messages are reported "
                          "failed and go to the outbox)")
                self._publisher.renew()
        except Exception:
            log.exception("serving Kafka delivery reports failed; going on")
        if self._waiting:
            loop.call_later(_TICK, self._tick, loop)
        else:
            self._ticking = False

    def _expire(self, batch: _Batch) -> None:
        """message.timeout.ms bounds the reports; this only guards against a report that never comes."""
        if batch.future.done():
            return
        try:
            # all of them: a confirmed one is then sent twice, which its event id makes harmless
            self._spool_all(batch.messages, range(len(batch.messages)))
        except IngestRejected as exc:
            batch.future.set_exception(exc)
        else:
            batch.future.set_result(None)

    def _reporter(self, batch: _Batch, i: int) -> Any:
        return lambda d: self._report(batch, i, d)

    def _report(self, batch: _Batch, i: int, d: Delivery | None) -> None:
        """A delivery report (``d``; None: never queued), on the loop's thread (``_tick``, or ``produce_raw``'s own
        poll); at shutdown on the thread that closes the sink, when every request was answered."""
        if d is None or d.error is not None:
            batch.failed.append((i, d))
        else:
            self.delivered += 1
        batch.remaining -= 1
        if batch.remaining == 0:
            self._settle(batch)

    def _settle(self, batch: _Batch) -> None:
        if batch.future.done():
            return  # the waiter timed out and spooled them itself
        try:
            if batch.failed:
                self._keep_failed(batch)
        except IngestRejected as exc:
            batch.future.set_exception(exc)
        else:
            batch.future.set_result(None)

    def _keep_failed(self, batch: _Batch) -> None:
        """Spool the messages Kafka failed for now, then refuse (413) the request if it refused any for good: the
        spooling comes first, as a producer does not retry a 4xx and would lose what only waited."""
        permanent = [d for _i, d in batch.failed if d is not None and d.permanent]
        passing = sorted(i for i, d in batch.failed if d is None or not d.permanent)
        if passing:
            self._start_outage(batch.failed[0][1])
            self._spool_all(batch.messages, passing)
        if permanent:
            raise IngestRejected(413, f"Kafka refused {len(permanent)} of the request's {len(batch.messages)}"
                                 f" message(s) for good ({permanent[0]}); expected messages within the "
                                 "topic's max.message.bytes (the others were stored)")

    def _start_outage(self, d: Delivery | None) -> None:
        if not self._outage:
            self._outage = True
            log.warning("Kafka (%s) did not confirm an event within %.1fs (%s); events go to the outbox %s until it "
                        "answers again", self.settings.bootstrap_servers, self.ack_timeout,
                        d if d is not None else "local queue full", self.outbox.folder)

    def _spool_all(self, messages: Sequence[Outgoing], which: Any) -> None:
        for i in which:
            m = messages[i]
            key = m.key.encode() if isinstance(m.key, str) else (m.key or b"")
            self._spool.send(m.topic, key, m.value)  # StrictOutbox: NotStored when it cannot keep it
            self.spooled += 1

    def stats(self) -> dict[str, int]:
        return {"delivered": self.delivered, "spooled": self.spooled, "in_outbox": len(self.outbox)}

    def close(self, timeout: float = 10.0) -> None:
        """Stop; what the cluster has not confirmed stays in the outbox for the next start (within ``timeout``,
        the outbox's publisher delivers what it can first). A second call does nothing."""
        if self._closed:
            return
        self._closed = True
        # Every request was answered after its reports came (the server drains its requests before this), so the
        # direct producer holds nothing anyone waits for: no long flush, which a down cluster would run out.
        try:
            self._publisher.flush(min(1.0, timeout))
        except (PublishError, RuntimeError) as exc:  # RuntimeError: a late report for a request of a closed loop
            log.debug("at shutdown: %s", exc)
        self._publisher.purge()
        # In an outage the outbox is safe on disk and the cluster did not answer a moment ago: waiting out the
        # timeout would only delay the exit (a restart, a deploy); the next start sends it.
        self._spool.close(min(1.0, timeout) if self._outage else timeout)
