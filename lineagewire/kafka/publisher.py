"""Publishing events: a thin wrapper over confluent-kafka's Producer.

Idempotent producer, ``acks=all``, compression, and delivery reports surfaced:
``publish()`` returns at once; a failed delivery is logged with
``topic[partition]`` and handed to ``on_error``; ``flush(timeout)`` raises
``PublishError`` if anything is still undelivered or failed.

Errors (``lineagewire.exceptions``): ``MessageTooLargeError`` when a message is
over the producer's ``message.max.bytes`` (from ``produce_raw``) or the topic's
``max.message.bytes`` (from ``flush``); ``QueueFullError`` when the local queue
stays full for ``queue_full_timeout`` seconds (the broker is slow or
unreachable); any other ``PublishError`` carries librdkafka's ``code``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError as _CKError
from confluent_kafka import KafkaException, Message

from lineagewire.config import Settings
from lineagewire.exceptions import MessageTooLargeError, PublishError, QueueFullError
from lineagewire.schemas import Codec, job_key

from .errors import ClientErrorLog
from .producer import DEFAULT_PRODUCER_CONFIG, new_producer

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_PRODUCER_CONFIG", "Delivery", "Publisher"]

class Delivery:
    """Outcome of one message: ``error`` is None when it was written at ``topic[partition]@offset``."""

    __slots__ = ("error", "key", "offset", "partition", "topic")

    def __init__(self, msg: Message, err: _CKError | None) -> None:
        self.topic = msg.topic()
        self.partition = msg.partition()
        self.offset = msg.offset()
        self.key = msg.key()
        self.error = err

    def __str__(self) -> str:
        where = f"{self.topic}[{self.partition}]@{self.offset}"
        return where if self.error is None else f"{where}: {self.error.str()}"


class Publisher:
    """Encodes events with the contract and produces them to Kafka.

    ``producer_config`` overrides librdkafka properties (e.g. ``{"linger.ms": 50}``).
    ``producer`` may be passed in (anything with confluent-kafka's Producer
    interface), so code that publishes is testable without patching.
    ``queue_full_timeout``: how long ``produce_raw`` waits for room in a full local queue
    before it raises ``QueueFullError``.
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
    ) -> None:
        self.settings = settings
        self.queue_full_timeout = queue_full_timeout
        self._client_errors = ClientErrorLog(log, f"producer ({settings.bootstrap_servers})")
        self.codec = codec or Codec(schema_registry_url=settings.schema_registry_url,
                                    registry_config=settings.registry_config())
        self._producer = producer or new_producer(settings, producer_config, error_cb=self._client_error)
        self._on_delivery = on_delivery
        self._on_error = on_error
        self._failed: list[Delivery] = []
        self._lock = threading.Lock()
        self.delivered = 0

    def _client_error(self, err: _CKError) -> None:
        # Broker-down and similar: librdkafka keeps retrying until message.timeout.ms; one line per
        # backoff step, not one per reconnect attempt.
        self._client_errors.error(err)

    def _report(self, err: _CKError | None, msg: Message) -> None:
        d = Delivery(msg, err)
        if err is None:
            self.delivered += 1
        else:
            log.error("delivery failed %s", d)
            with self._lock:
                self._failed.append(d)
            if self._on_error:
                self._on_error(d)
        if self._on_delivery:
            self._on_delivery(d)

    def publish(self, event: dict[str, Any], *, topic: str | None = None, key: str | bytes | None = None,
                headers: dict[str, str | bytes] | None = None) -> None:
        """Queue one event. Key defaults to the job identity; topic to ``settings.topics.jobs``."""
        topic = topic or self.settings.topics.jobs
        value = self.codec.encode(event, topic=topic)
        self.produce_raw(topic, value, key=key if key is not None else job_key(event), headers=headers)

    def produce_raw(self, topic: str, value: bytes, *, key: str | bytes | None = None,
                    headers: dict[str, str | bytes] | None = None, partition: int | None = None) -> None:
        """Queue bytes as they are (used for dead letters and tests)."""
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": self._report}
        if headers:
            kwargs["headers"] = list(headers.items())
        if partition is not None:
            kwargs["partition"] = partition
        deadline: float | None = None
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError as exc:
                # Local queue full: serve delivery reports to make room rather than drop, for a bounded time.
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.queue_full_timeout
                elif now >= deadline:
                    raise QueueFullError(
                        f"{topic}: the producer's local queue stayed full ({len(self._producer)} messages) for "
                        f"{self.queue_full_timeout:.0f}s; is {self.settings.bootstrap_servers} reachable? "
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

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for every queued message; raise PublishError naming what was not delivered."""
        remaining = self._producer.flush(timeout)
        with self._lock:
            failed, self._failed = self._failed, []
        if remaining or failed:
            codes = {d.error.code() for d in failed if d.error is not None}
            code = codes.pop() if len(codes) == 1 and not remaining else None
            topic = failed[0].topic if failed and len({d.topic for d in failed}) == 1 else None
            parts = []
            if remaining:
                parts.append(f"{remaining} message(s) still undelivered after {timeout:.1f}s "
                             f"(is {self.settings.bootstrap_servers} reachable?)")
            if failed:
                parts.append(f"{len(failed)} failed: " + "; ".join(str(d) for d in failed[:5]))
            cls = MessageTooLargeError if code == _CKError.MSG_SIZE_TOO_LARGE else PublishError
            raise cls("; ".join(parts), code=code, topic=topic)

    def pending(self) -> int:
        return len(self._producer)

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
