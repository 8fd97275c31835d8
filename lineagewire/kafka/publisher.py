"""Publishing events: a thin wrapper over confluent-kafka's Producer.

Idempotent producer, ``acks=all``, compression, and delivery reports surfaced:
``publish()`` returns at once; a failed delivery is logged with
``topic[partition]`` and handed to ``on_error``; ``flush(timeout)`` raises
``PublishError`` if anything is still undelivered or failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError as _CKError
from confluent_kafka import Message, Producer

from lineagewire.config import Settings
from lineagewire.exceptions import PublishError
from lineagewire.schemas import Codec, job_key

log = logging.getLogger(__name__)

__all__ = ["Delivery", "Publisher"]

DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 5,
    "message.timeout.ms": 120_000,
}


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
    ) -> None:
        self.settings = settings
        self.codec = codec or Codec(schema_registry_url=settings.schema_registry_url,
                                    registry_config=settings.registry_config())
        conf = {**settings.as_librdkafka_dict(), **DEFAULT_PRODUCER_CONFIG, **(producer_config or {})}
        conf["error_cb"] = self._client_error
        conf.setdefault("logger", logging.getLogger("lineagewire.kafka.librdkafka"))
        self._producer = producer or Producer(conf)
        self._on_delivery = on_delivery
        self._on_error = on_error
        self._failed: list[Delivery] = []
        self._lock = threading.Lock()
        self.delivered = 0

    def _client_error(self, err: _CKError) -> None:
        # Broker-down and similar: librdkafka keeps retrying until message.timeout.ms.
        log.warning("kafka client error (%s): %s", self.settings.bootstrap_servers, err.str())

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
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:
                # Local queue full: serve delivery reports to make room rather than drop.
                self._producer.poll(0.1)
        self._producer.poll(0)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for every queued message; raise PublishError naming what was not delivered."""
        remaining = self._producer.flush(timeout)
        with self._lock:
            failed, self._failed = self._failed, []
        if remaining or failed:
            parts = []
            if remaining:
                parts.append(f"{remaining} message(s) still undelivered after {timeout:.1f}s "
                             f"(is {self.settings.bootstrap_servers} reachable?)")
            if failed:
                parts.append(f"{len(failed)} failed: " + "; ".join(str(d) for d in failed[:5]))
            raise PublishError("; ".join(parts))

    def pending(self) -> int:
        return len(self._producer)

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
