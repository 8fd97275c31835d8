"""Fetching for the consumer runtime: batches, pausing while an output is down, lag.

A mixin of ``ConsumerRuntime`` (kept apart so each module reads on its own); it uses the
runtime's ``_consumer``, ``_assigned``, ``_paused``, ``_stop``, ``_last_loop`` and ``metrics``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

if TYPE_CHECKING:
    import threading

    from confluent_kafka import Consumer

    from .metrics import Metrics

log = logging.getLogger("lineagewire.consumers.runtime.runtime")

__all__ = ["Polling", "position"]


def position(msg: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a consumed message (set for every message without an error)."""
    return msg.topic() or "", msg.partition() or 0, msg.offset() or 0


class Polling:
    """Batches, pause/resume and lag of ``ConsumerRuntime`` (see the module docstring)."""

    _consumer: Consumer | None
    _assigned: set[tuple[str, int]]
    _paused: list[TopicPartition]
    _stop: threading.Event
    _last_loop: float
    batch_size: int
    metrics: Metrics

    def _next_batch(self) -> list[Message]:
        # Wait for one message, then take what is already fetched: consume(n, timeout) would wait for
        # n messages or the whole timeout, adding its timeout to the latency of a trickle of events.
        assert self._consumer is not None
        first = self._consumer.poll(0.2)
        if first is None:
            return []
        return [first, *self._consumer.consume(self.batch_size - 1, timeout=0)]

    def _messages(self, batch: list[Message]) -> Iterator[Message]:
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("%s[%s]: consumer error: %s", msg.topic(), msg.partition(), err.str())
                continue
            if (msg.topic(), msg.partition()) not in self._assigned:
                continue  # revoked while this batch was in hand; the new owner handles it
            yield msg

    # -- waiting -----------------------------------------------------------------------------

    def _sleep_polling(self, seconds: float) -> None:
        # Keep serving the group (heartbeats, rebalances) while waiting; the partitions are paused,
        # so poll() returns no messages and nothing piles up in memory.
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._last_loop = time.monotonic()
            if self._consumer is not None:
                msg = self._consumer.poll(min(left, 0.2))
                if msg is not None and msg.error() is None:
                    # Fetched before the pause took effect: rewind so it is fetched again after resume
                    # rather than skipped (its position has moved past it).
                    with contextlib.suppress(KafkaException):
                        self._consumer.seek(TopicPartition(*position(msg)))
                    log.debug("%s[%s]@%s arrived while paused; rewound", msg.topic(), msg.partition(),
                              msg.offset())
            else:
                time.sleep(min(left, 0.2))

    def _pause(self) -> None:
        if self._consumer is None:
            return
        self._paused = self._consumer.assignment()
        if self._paused:
            self._consumer.pause(self._paused)

    def _resume(self) -> None:
        if self._consumer is None or not self._paused:
            return
        current = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}
        still = [tp for tp in self._paused if (tp.topic, tp.partition) in current]
        if still:
            self._consumer.resume(still)
        self._paused = []

    def _update_lag(self, batch: list[Message]) -> None:
        if self._consumer is None or not batch:
            return
        last: dict[tuple[str, int], int] = {}
        for msg in batch:
            if msg.error() is None:
                topic, partition, offset = position(msg)
                last[(topic, partition)] = offset
        for (topic, partition), offset in last.items():
            try:
                _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            except KafkaException:
                continue
            if high >= 0:
                self.metrics.lag(topic, partition, high - offset - 1)
