"""The one way lineagewire publishes to Kafka.

Every producer of the product goes through here: the emitter's ``kafka``
listener (with the on-disk outbox of ``lineagewire.kafka.outbox`` in front),
the scheduler's refresh commands, the consumer runtime's dead-letter writer,
the benchmarks. So they share one configuration (``new_producer``:
idempotent, ``acks=all``, lz4, the connection and security settings of
``Settings``, librdkafka's log routed to Python logging), one bounded wait
when the local queue is full, one way of reporting deliveries, and the same
counters and log lines.

``Publisher``:

* ``publish(event)`` encodes an event with the contract and queues it (key:
  the job identity); ``produce_raw(topic, value)`` queues bytes as they are.
  Both return at once. A per-message ``on_delivery`` callback gets the
  ``Delivery`` of that message; the publisher's own ``on_delivery`` /
  ``on_error`` get every one.
* ``deliver(messages, timeout)`` sends a batch and waits for it, answering by
  position which messages were not delivered and why (``Undelivered``): one
  message that cannot be sent never holds back the others.
* ``flush(timeout)`` waits for everything queued and raises ``PublishError``
  naming what was not delivered.

Errors (``lineagewire.exceptions``): ``MessageTooLargeError`` when a message is
over the producer's ``message.max.bytes`` (from ``produce_raw``) or the topic's
``max.message.bytes`` (from ``flush``); ``QueueFullError`` when the local queue
stays full for ``queue_full_timeout`` seconds (the broker is slow or
unreachable; 0 raises at once, for a caller that has somewhere else to put the
message); any other ``PublishError`` carries librdkafka's ``code``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError as _CKError
from confluent_kafka import KafkaException, Message, Producer

from lineagewire.config import Settings
from lineagewire.exceptions import ConfigError, MessageTooLargeError, PublishError, QueueFullError
from lineagewire.schemas import Codec, job_key

from .errors import QUIET_LOGGER, ClientErrorLog

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_PRODUCER_CONFIG", "Delivery", "Outgoing", "Publisher", "Undelivered", "new_producer",
           "producer_config"]

DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 5,
    "message.timeout.ms": 120_000,
}

#: librdkafka errors that no retry of the same message can fix
PERMANENT_CODES = frozenset({_CKError.MSG_SIZE_TOO_LARGE, _CKError.INVALID_MSG, _CKError.INVALID_RECORD,
                             _CKError._INVALID_ARG})
#: librdkafka's codes for messages purged from its queues on purpose (``Publisher.purge``): not failures
PURGED_CODES = frozenset({_CKError._PURGE_QUEUE, _CKError._PURGE_INFLIGHT})
#: failed deliveries kept to be named by ``flush``; beyond that they are counted (a long outage must not grow a list)
_KEEP_FAILED = 100


def producer_config(settings: Settings, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka properties: the connection settings, the defaults above, then ``overrides``."""
    conf: dict[str, Any] = {**settings.as_librdkafka_dict(), **DEFAULT_PRODUCER_CONFIG,
                            "logger": logging.getLogger("lineagewire.kafka.librdkafka")}
    conf.update(overrides or {})
    return conf


def new_producer(settings: Settings, overrides: dict[str, Any] | None = None, *,
                 error_cb: Callable[[_CKError], None] | None = None) -> Producer:
    """A confluent-kafka ``Producer`` with ``producer_config``; ``error_cb`` gets client-level errors
    (broker down, authentication), which librdkafka otherwise only logs.

    With an ``error_cb`` (e.g. a ``lineagewire.kafka.errors.ClientErrorLog``) librdkafka's own
    connection-failure lines are dropped: the callback reports them, at its own rate.
    Raises ``ConfigError`` naming a property librdkafka does not take.
    """
    conf = producer_config(settings, overrides)
    if error_cb is not None:
        conf["error_cb"] = error_cb
        if "logger" not in (overrides or {}):
            conf["logger"] = QUIET_LOGGER
    try:
        return Producer(conf)
    except KafkaException as exc:
        raise ConfigError(f"producer configuration rejected by librdkafka: {exc.args[0].str()}; expected "
                          "properties from librdkafka's CONFIGURATION.md") from exc


class Delivery:
    """Outcome of one message: ``error`` is None when it was written at ``topic[partition]@offset``."""

    __slots__ = ("error", "key", "offset", "partition", "topic")

    def __init__(self, msg: Message, err: _CKError | None) -> None:
        self.topic = msg.topic()
        self.partition = msg.partition()
        self.offset = msg.offset()
        self.key = msg.key()
        self.error = err

    @property
    def permanent(self) -> bool:
        """Sending the same message again cannot help (too large, invalid)."""
        return self.error is not None and self.error.code() in PERMANENT_CODES

    @property
    def purged(self) -> bool:
        """The message was taken back on purpose (``Publisher.purge``), not lost to an error."""
        return self.error is not None and self.error.code() in PURGED_CODES

    def __str__(self) -> str:
        where = f"{self.topic}[{self.partition}]@{self.offset}"
        return where if self.error is None else f"{where}: {self.error.str()}"


def _shared_code_and_topic(remaining: int, failed: list[Delivery]) -> tuple[int | None, str | None]:
    """What the failed deliveries of a flush have in common: their error code when they all have the same one and
    none is still queued (``remaining``), and their topic when they are all on one."""
    codes = {d.error.code() for d in failed if d.error is not None}
    code = codes.pop() if len(codes) == 1 and not remaining else None
    topic = failed[0].topic if failed and len({d.topic for d in failed}) == 1 else None
    return code, topic


@dataclass(frozen=True)
class Outgoing:
    """One message of a ``deliver`` batch; ``label`` names it in errors (``command 1234``)."""

    topic: str
    value: bytes
    key: str | bytes | None = None
    headers: dict[str, str | bytes] | None = None
    label: str = "message"


@dataclass(frozen=True)
class Undelivered:
    """Why one message of a batch was not delivered; ``permanent`` when sending it again cannot help."""

    reason: str
    permanent: bool = False


class Publisher:
    """Encodes events with the contract and produces them to Kafka; see the module docstring.

    ``producer_config`` overrides librdkafka properties (e.g. ``{"linger.ms": 50}``).
    ``producer`` may be passed in (anything with confluent-kafka's Producer
    interface), so code that publishes is testable without patching.
    ``queue_full_timeout``: how long ``produce_raw`` waits for room in a full local queue
    before it raises ``QueueFullError`` (0: at once).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        codec: Codec | None = None,
        producer_config: dict[str, Any] | None = None,
        on_delivery: Callable[[Delivery], None] | None = None,
        on_error: Callable[[Delivery], None] | None = None,
        producer: Any = None,
        queue_full_timeout: float = 30.0,
        client_error_interval: float = 1.0,
    ) -> None:
        self.settings = settings
        self.queue_full_timeout = queue_full_timeout
        # client_error_interval: the first step of ClientErrorLog's backoff between two lines
        self._client_errors = ClientErrorLog(log, f"producer ({settings.bootstrap_servers})",
                                             first=client_error_interval)
        self.codec = codec or Codec(schema_registry_url=settings.schema_registry_url,
                                    registry_config=settings.registry_config())
        self._overrides = producer_config
        self._producer = producer or new_producer(settings, producer_config, error_cb=self._client_error)
        self._on_delivery = on_delivery
        self._on_error = on_error
        self._failed: list[Delivery] = []
        self._failures = 0  # since the last flush
        self._lock = threading.Lock()
        self.fatal = False
        self.delivered = 0
        self.failed = 0

    # -- reports -----------------------------------------------------------------------------------

    def _client_error(self, err: _CKError) -> None:
        # Broker-down and similar: librdkafka keeps retrying until message.timeout.ms; one line per
        # backoff step, not one per reconnect attempt. A fatal error (the idempotent producer's state is
        # lost) needs a new producer: ``renew``.
        if err.fatal():
            self.fatal = True
        self._client_errors.error(err)

    def _report(self, err: _CKError | None, msg: Message, callback: Callable[[Delivery], None] | None) -> None:
        d = Delivery(msg, err)
        if err is None:
            self.delivered += 1
        elif not d.purged:
            self.failed += 1
            # A caller with an on_error callback (the outbox) says what becomes of the message: one line, not two.
            log.log(logging.DEBUG if callback is not None else logging.WARNING, "delivery failed %s", d)
            with self._lock:
                self._failures += 1
                if len(self._failed) < _KEEP_FAILED:  # named in flush()'s error; the rest only counted
                    self._failed.append(d)
            if self._on_error:
                self._on_error(d)
        if callback is not None:
            callback(d)
        if self._on_delivery:
            self._on_delivery(d)

    # -- producing ---------------------------------------------------------------------------------

    def encode(self, event: dict[str, Any], *, topic: str | None = None) -> bytes:
        """``event`` encoded with the contract for ``topic`` (default ``settings.topics.jobs``)."""
        return self.codec.encode(event, topic=topic or self.settings.topics.jobs)

    def publish(self, event: dict[str, Any], *, topic: str | None = None, key: str | bytes | None = None,
                headers: dict[str, str | bytes] | None = None,
                on_delivery: Callable[[Delivery], None] | None = None) -> None:
        """Queue one event. Key defaults to the job identity; topic to ``settings.topics.jobs``."""
        topic = topic or self.settings.topics.jobs
        self.produce_raw(topic, self.encode(event, topic=topic), key=key if key is not None else job_key(event),
                         headers=headers, on_delivery=on_delivery)

    def produce_raw(self, topic: str, value: bytes, *, key: str | bytes | None = None,
                    headers: dict[str, str | bytes] | None = None, partition: int | None = None,
                    on_delivery: Callable[[Delivery], None] | None = None,
                    queue_full_timeout: float | None = None) -> None:
        """Queue bytes as they are; ``on_delivery`` gets this message's ``Delivery``."""
        kwargs: dict[str, Any] = {"key": key, "value": value,
                                  "on_delivery": lambda err, msg: self._report(err, msg, on_delivery)}
        if headers:
            kwargs["headers"] = list(headers.items())
        if partition is not None:
            kwargs["partition"] = partition
        wait = self.queue_full_timeout if queue_full_timeout is None else queue_full_timeout
        deadline: float | None = None
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError as exc:
                # Local queue full: serve delivery reports to make room rather than drop, for a bounded time.
                now = time.monotonic()
                if deadline is None:
                    deadline = now + wait
                if now >= deadline:
                    raise QueueFullError(
                        f"{topic}: the producer's local queue stayed full ({len(self._producer)} messages) for "
                        f"{wait:.0f}s; is {self.settings.bootstrap_servers} reachable? "
                        "(raise queue.buffering.max.messages or the timeout)", topic=topic) from exc
                self._producer.poll(0.1)
            except KafkaException as exc:
                err = exc.args[0]
                size = len(value or b"") + len(key or b"")
                if err.code() == _CKError.MSG_SIZE_TOO_LARGE:
                    raise MessageTooLargeError(
                        f"{topic}: message of {size} bytes is over the producer's message.max.bytes; "
                        f"expected at most that size ({err.str()})", code=err.code(), topic=topic) from exc
                raise PublishError(f"{topic}: cannot produce a message of {size} bytes: {err.str()}",
                                   code=err.code(), topic=topic) from exc
        self._producer.poll(0)

    def deliver(self, messages: Sequence[Outgoing], timeout: float = 30.0) -> dict[int, Undelivered]:
        """Send ``messages`` and wait up to ``timeout`` for them; by position, those not delivered and why.

        The local queue may stay full for at most ``timeout`` over the whole batch; what could not be
        queued by then is reported undelivered, not raised.
        """
        failed: dict[int, Undelivered] = {}
        waiting: set[int] = set()
        deadline = time.monotonic() + timeout

        def done(i: int, m: Outgoing) -> Callable[[Delivery], None]:
            def report(d: Delivery) -> None:
                waiting.discard(i)
                if d.error is not None:
                    failed[i] = Undelivered(f"{d.topic}[{d.partition}]: {m.label}: {d.error.str()}",
                                            permanent=d.permanent)
            return report

        for i, m in enumerate(messages):
            waiting.add(i)
            try:
                self.produce_raw(m.topic, m.value, key=m.key, headers=m.headers, on_delivery=done(i, m),
                                 queue_full_timeout=max(0.0, deadline - time.monotonic()))
            except PublishError as exc:
                waiting.discard(i)
                failed[i] = Undelivered(f"{m.label} of {len(m.value)} bytes: {exc}",
                                        permanent=exc.code in PERMANENT_CODES)
        self._producer.flush(max(0.0, deadline - time.monotonic()))
        for i in sorted(waiting):
            failed[i] = Undelivered(f"{messages[i].topic}: {messages[i].label} still undelivered after "
                                    f"{timeout:.0f}s (is {self.settings.bootstrap_servers} reachable?)")
        with self._lock:  # reported here, per message: flush() must not raise them again
            self._failed.clear()
            self._failures = 0
        return failed

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery reports for up to ``timeout`` seconds; how many were served."""
        return self._producer.poll(timeout)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for every queued message; raise PublishError naming what was not delivered."""
        remaining = self._producer.flush(timeout)
        with self._lock:
            failed, self._failed = self._failed, []
            failures, self._failures = self._failures, 0
        if remaining or failed:
            raise self._undelivered(remaining, failed, failures, timeout)

    def _undelivered(self, remaining: int, failed: list[Delivery], failures: int, timeout: float) -> PublishError:
        """The error of a flush that left ``remaining`` messages queued and saw ``failures`` fail (``failed``: the
        first of them): ``MessageTooLargeError`` when that is what they all failed with."""
        code, topic = _shared_code_and_topic(remaining, failed)
        parts = []
        if remaining:
            parts.append(f"{remaining} message(s) still undelivered after {timeout:.1f}s "
                         f"(is {self.settings.bootstrap_servers} reachable?)")
        if failed:
            parts.append(f"{failures} failed: " + "; ".join(str(d) for d in failed[:5]))
        cls = MessageTooLargeError if code == _CKError.MSG_SIZE_TOO_LARGE else PublishError
        return cls("; ".join(parts), code=code, topic=topic)

    def reachable(self, topic: str | None = None, timeout: float = 2.0) -> bool:
        """The cluster answers a metadata request (for ``topic``, or the cluster's) within ``timeout``."""
        try:
            self._producer.list_topics(topic, timeout=timeout)
        except KafkaException:
            return False
        return True

    def purge(self) -> None:
        """Drop every queued and in-flight message (their reports say ``purged``); for a caller that keeps
        its own copy, such as the outbox, and must not wait at exit."""
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.poll(0)

    def renew(self) -> None:
        """Replace the producer after a fatal error; what the old one held is purged (its reports say so)."""
        old = self._producer
        self._producer = new_producer(self.settings, self._overrides, error_cb=self._client_error)
        self.fatal = False
        old.purge(in_queue=True, in_flight=True, blocking=False)
        old.poll(0)

    def pending(self) -> int:
        """Messages queued or in flight."""
        return len(self._producer)

    def stats(self) -> dict[str, int]:
        return {"delivered": self.delivered, "failed": self.failed, "pending": self.pending()}

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
