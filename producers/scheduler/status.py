"""Refresh status from the job events of the runs that executed the refreshes.

``StatusTracker`` consumes ``settings.topics.jobs`` in its own consumer group
(default ``lineagewire-scheduler-status``) and hands every event that carries
``header.schedule`` to ``EmbeddedWorkflowScheduler.apply_status``; offsets are
committed after the database update (at-least-once; applying an event twice
changes nothing). Several scheduler instances may share the group: the
database is shared, the partitions are split.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException
from sqlalchemy.exc import OperationalError

from lineagewire.config import Settings
from lineagewire.exceptions import DecodeError
from lineagewire.schemas import Codec

from .embedded import EmbeddedWorkflowScheduler

log = logging.getLogger(__name__)

__all__ = ["StatusTracker"]


class StatusTracker:
    """Feeds job status events back into the scheduler's refresh table, in a background thread."""

    def __init__(self, settings: Settings, scheduler: EmbeddedWorkflowScheduler, *,
                 group_id: str = "lineagewire-scheduler-status", start: str = "earliest",
                 consumer_config: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.scheduler = scheduler
        self.topic = settings.topics.jobs
        self.codec = Codec(schema_registry_url=settings.schema_registry_url,
                           registry_config=settings.registry_config())
        self._conf = {**settings.as_librdkafka_dict(), "group.id": group_id, "auto.offset.reset": start,
                      "enable.auto.commit": False, "logger": logging.getLogger("lineagewire.kafka.librdkafka"),
                      **(consumer_config or {})}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.applied = 0

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="lineagewire-scheduler-status", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        consumer = Consumer(self._conf)
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                msgs = consumer.consume(500, 0.5)
                if not msgs:
                    continue
                for msg in msgs:
                    self._handle(msg)
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    log.warning("%s: offset commit failed (events are re-applied, harmlessly): %s", self.topic, exc)
        except Exception:  # noqa: BLE001 - logged; the service's health shows the tracker stopped
            log.exception("status tracker on %s stopped", self.topic)
        finally:
            consumer.close()

    def _handle(self, msg: Any) -> None:
        where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
        if msg.error() is not None:
            log.warning("%s: %s", where, msg.error().str())
            return
        try:
            event = self.codec.decode(msg.value())
        except DecodeError as exc:
            log.warning("%s: skipped, not a lineagewire event: %s", where, exc)
            return
        for attempt in range(1, 6):
            try:
                if self.scheduler.apply_status(event) is not None:
                    self.applied += 1
                return
            except OperationalError as exc:  # database busy or briefly unreachable: try again before moving on
                log.warning("%s: database error applying status (attempt %d of 5): %s", where, attempt, exc)
                time.sleep(0.5 * attempt)
            except Exception:  # noqa: BLE001 - one bad event must not stop status tracking
                log.exception("%s: applying status to the refresh table failed", where)
                return
        log.error("%s: status of this event was not applied after 5 attempts", where)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
