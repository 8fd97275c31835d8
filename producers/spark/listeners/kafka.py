"""The ``kafka`` listener (the default): events through the contract to the jobs topic, outbox-backed.

Every event is encoded (``lineagewire.schemas.Codec``) and handed to the
product's one publishing component with the on-disk outbox in front
(``lineagewire.kafka.outbox.OutboxPublisher``), keyed by the job identity:
spooled first, produced, deleted from the outbox when the broker acknowledges
it. While the broker is unreachable events wait in the outbox and are re-sent,
oldest first, as soon as it answers; what is still there at exit is sent by
the next emitter started on the same folder.

Delivery is at-least-once: an event whose acknowledgement was lost (a crash
between the broker's write and the file's deletion, or a purge at exit) is
sent again later. Consumers deduplicate by ``header.event_id``.
"""

from __future__ import annotations

import logging
from typing import Any

from lineagewire.config import Settings
from lineagewire.kafka.outbox import Outbox, OutboxPublisher
from lineagewire.schemas import Codec, job_key

from .base import EncodedEvent, JobStatusListener, JobStatusListenerFactory, ListenerContext

log = logging.getLogger(__name__)

__all__ = ["KafkaListener", "KafkaListenerFactory"]


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
        self._publisher = OutboxPublisher(settings, outbox, delivery_timeout=delivery_timeout,
                                          producer_config=producer_config)

    def on_event(self, event: dict[str, Any]) -> None:
        if isinstance(event, EncodedEvent) and event.topic == self.topic:
            value = event.encoded  # the emitter encoded it once, to size it
        else:
            value = self.codec.encode(event, topic=self.topic)
        self._publisher.send(self.topic, job_key(event).encode(), value)

    @property
    def delivered(self) -> int:
        return self._publisher.delivered

    @property
    def failed_deliveries(self) -> int:
        return self._publisher.failed_deliveries

    @property
    def lost(self) -> int:
        return self._publisher.lost

    def pending(self) -> int:
        """Events not yet acknowledged (in the outbox or in flight)."""
        return self._publisher.pending()

    def close(self, timeout: float) -> None:
        """Deliver within ``timeout`` seconds what can be; the rest stays in the outbox for the next start."""
        self._publisher.close(timeout)


class KafkaListenerFactory(JobStatusListenerFactory):
    """Builds the Kafka listener with the outbox folder of the application."""

    def create_listener(self, context: ListenerContext) -> JobStatusListener:
        cfg = context.config
        outbox = Outbox(cfg.outbox_path(context.app_name), int(cfg.outbox_max_mb * (1 << 20)))
        return KafkaListener(context.settings, outbox, topic=cfg.topic, delivery_timeout=cfg.delivery_timeout)
