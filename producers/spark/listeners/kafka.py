"""The ``kafka`` listener (the default): events through the contract to the jobs topic, outbox-backed.

Every event is encoded (``lineagewire.schemas.Codec``), written to the outbox,
then produced with the job identity as key. The broker's acknowledgement
deletes the outbox file. While the broker is unreachable (a delivery failed,
``delivery_timeout`` passed) new events only go to the outbox, and a
background thread re-sends the folder, oldest first, as soon as the broker
answers again. What is still there at exit is sent by the next emitter
started on the same folder.

Delivery is at-least-once: an event whose acknowledgement was lost (a crash
between the broker's write and the file's deletion, or a purge at exit) is
sent again later. Consumers deduplicate by ``header.event_id``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

from confluent_kafka import KafkaError as _CKError
from confluent_kafka import KafkaException, Message

from lineagewire.config import Settings
from lineagewire.kafka.producer import new_producer
from lineagewire.schemas import Codec, job_key

from ..outbox import Outbox, OutboxEntry
from .base import JobStatusListener, JobStatusListenerFactory, ListenerContext

log = logging.getLogger(__name__)

__all__ = ["KafkaListener", "KafkaListenerFactory"]

_BATCH = 500


class KafkaListener(JobStatusListener):
    """Publishes events to ``topic`` through an outbox; see the module docstring."""

    def __init__(self, settings: Settings, outbox: Outbox, *, topic: str | None = None,
                 delivery_timeout: float = 10.0, codec: Codec | None = None,
                 producer_config: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.topic = topic or settings.topics.jobs
        self.outbox = outbox
        self.codec = codec or Codec(schema_registry_url=settings.schema_registry_url,
                                    registry_config=settings.registry_config())
        self._overrides = {"message.timeout.ms": max(1000, int(delivery_timeout * 1000)), **(producer_config or {})}
        self._producer = new_producer(settings, self._overrides, error_cb=self._client_error)
        self._lock = threading.Lock()
        self._inflight: set[str] = set()
        self._backlog = len(outbox) > 0
        self._next_try = 0.0
        self._backoff = 0.5
        self._fatal = False
        self.delivered = 0
        self.failed_deliveries = 0
        self.lost = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lineagewire-kafka-delivery", daemon=True)
        self._thread.start()

    # -- the listener's thread -------------------------------------------------------------------

    def on_event(self, event: dict[str, Any]) -> None:
        value = self.codec.encode(event, topic=self.topic)
        key = job_key(event).encode()
        entry = self.outbox.put(self.topic, key, value)
        if entry is None:
            log.warning("outbox %s is full (%d bytes); event %s is sent without a spool copy",
                        self.outbox.folder, self.outbox.max_bytes, event["header"]["event_id"])
        with self._lock:
            if self._backlog and entry is not None:
                return  # the delivery thread sends it after the older ones
            if entry is not None:
                self._inflight.add(entry.name)
        self._produce(entry, self.topic, key, value)

    # -- producing and acknowledgements ----------------------------------------------------------

    def _produce(self, entry: OutboxEntry | None, topic: str, key: bytes, value: bytes) -> None:
        try:
            self._producer.produce(topic, value=value, key=key, on_delivery=functools.partial(self._acked, entry))
        except (BufferError, KafkaException) as exc:
            log.warning("cannot queue an event for %s[-]: %s; it waits in the outbox", topic, exc)
            self._failed(entry)

    def _failed(self, entry: OutboxEntry | None) -> None:
        with self._lock:
            if entry is not None:
                self._inflight.discard(entry.name)
                self._backlog = True
            else:
                self.lost += 1

    def _acked(self, entry: OutboxEntry | None, err: _CKError | None, msg: Message) -> None:
        if err is None:
            self.delivered += 1
            self._backoff = 0.5
            with self._lock:
                if entry is not None:
                    self._inflight.discard(entry.name)
            if entry is not None:
                self.outbox.remove(entry)
            return
        self.failed_deliveries += 1
        if entry is None:
            log.error("event lost: delivery to %s[%s] failed (%s) and the outbox was full", msg.topic(),
                      msg.partition(), err.str())
        elif err.code() not in (_CKError._PURGE_QUEUE, _CKError._PURGE_INFLIGHT):
            log.warning("delivery to %s[%s] failed: %s; the event waits in outbox %s", msg.topic(),
                        msg.partition(), err.str(), self.outbox.folder)
        self._failed(entry)

    def _client_error(self, err: _CKError) -> None:
        if err.fatal():
            self._fatal = True
            log.error("kafka producer for %s hit a fatal error: %s; starting a new one", self.topic, err.str())
        else:
            log.debug("kafka client error (%s): %s", self.settings.bootstrap_servers, err.str())

    # -- the delivery thread: serves acknowledgements and re-sends the outbox --------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._producer.poll(0.1)
                if self._fatal:
                    self._renew_producer()
                if self._backlog and time.monotonic() >= self._next_try:
                    self._resend()
            except Exception:
                log.exception("kafka listener delivery loop failed; retrying")
                time.sleep(0.5)

    def _renew_producer(self) -> None:
        old = self._producer
        self._producer = new_producer(self.settings, self._overrides, error_cb=self._client_error)
        with self._lock:
            self._fatal = False
            self._inflight.clear()  # whatever the old producer held is still in the outbox
            self._backlog = True
        old.purge(in_queue=True, in_flight=True, blocking=False)

    def _resend(self) -> None:
        with self._lock:
            todo = [e for e in self.outbox.pending() if e.name not in self._inflight][:_BATCH]
            if not todo:
                if not self._inflight:
                    self._backlog = False
                return
        try:
            self._producer.list_topics(self.topic, timeout=2)
        except KafkaException:
            self._next_try = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, 10.0)
            return
        sent = 0
        for entry in todo:
            try:
                topic, key, value = self.outbox.read(entry)
            except OSError:
                self.outbox.remove(entry)  # deleted behind our back; nothing left to send
                continue
            with self._lock:
                self._inflight.add(entry.name)
            self._produce(entry, topic, key, value)
            sent += 1
        log.info("re-sent %d event(s) from outbox %s", sent, self.outbox.folder)
        self._next_try = time.monotonic() + 0.2

    def pending(self) -> int:
        """Events not yet acknowledged (in the outbox or in flight)."""
        return len(self.outbox)

    def close(self, timeout: float) -> None:
        """Deliver within ``timeout`` seconds what can be; the rest stays in the outbox for the next start."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (len(self.outbox) or self._inflight):
            if self._backlog and not self._inflight and self._next_try > deadline:
                break  # the broker is down and the next attempt falls after the budget: stop waiting now
            time.sleep(0.02)
        self._stop.set()
        self._thread.join(timeout=2)
        self._producer.flush(max(0.0, min(0.5, deadline - time.monotonic())))
        # Undelivered messages are safe on disk: drop librdkafka's copies so shutdown does not wait for them.
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.poll(0)
        self._producer.flush(0)
        left = len(self.outbox)
        if left:
            log.warning("%d event(s) not acknowledged by %s within %.1fs; they wait in outbox %s for the next "
                        "start", left, self.settings.bootstrap_servers, timeout, self.outbox.folder)
        self.outbox.close()


class KafkaListenerFactory(JobStatusListenerFactory):
    """Builds the Kafka listener with the outbox folder of the application."""

    def create_listener(self, context: ListenerContext) -> JobStatusListener:
        cfg = context.config
        outbox = Outbox(cfg.outbox_path(context.app_name), int(cfg.outbox_max_mb * (1 << 20)))
        return KafkaListener(context.settings, outbox, topic=cfg.topic, delivery_timeout=cfg.delivery_timeout)
