"""Reading a range of a topic without a consumer group.

``subscribe`` and ``replay`` read this way: partitions are *assigned*, not
subscribed, and nothing is committed, so no live consumer group's offsets
move. Positions are ``"beginning"``, ``"end"``, an offset (int, the same for
every partition) or a time (aware datetime, resolved with offsets_for_times).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from lineagewire.config import Settings
from lineagewire.exceptions import BrokerUnavailableError, ConfigError

from .cluster import ConnectFailures, unreachable
from .errors import QUIET_LOGGER, ClientErrorLog

log = logging.getLogger(__name__)

Position = str | int | dt.datetime

__all__ = ["Position", "TopicReader", "parse_position"]


def parse_position(text: str | None) -> Position | None:
    """'beginning' | 'end' | an offset | an ISO-8601 time ('2026-01-31T12:00:00Z', '2026-01-31')."""
    if text is None:
        return None
    t = text.strip()
    if t in ("beginning", "earliest"):
        return "beginning"
    if t in ("end", "latest", "now"):
        return "end"
    if t.lstrip("-").isdigit():
        n = int(t)
        if n < 0:
            raise ConfigError(f"position {text!r}: an offset must be >= 0")
        return n
    try:
        when = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"position {text!r}: expected 'beginning', 'end', an offset, or an ISO-8601 time such as "
                          "2026-01-31T12:00:00Z") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


class TopicReader:
    """Iterates over messages of ``topic`` from ``start`` up to ``end`` (exclusive).

    ``end=None`` follows the topic until ``close()``; ``end="end"`` stops at the
    high watermarks taken when reading starts (``--exit-at-end``). A cluster that does not answer within
    ``settings.connect_timeout`` (or ``timeout``, if shorter) is ``BrokerUnavailableError`` with librdkafka's
    reason (``cluster.unreachable``); later client errors are logged once per backoff step.
    """

    def __init__(self, settings: Settings, topic: str, *, start: Position = "end", end: Position | None = None,
                 partitions: list[int] | None = None, consumer_config: dict[str, Any] | None = None,
                 timeout: float = 30.0) -> None:
        self.settings = settings
        self.topic = topic
        # Until the first answer, librdkafka's reasons are kept for the error below (a one-shot read: an
        # unreachable cluster is one clear line); after it, they are logged once per backoff step.
        failures = ConnectFailures()
        errors = ClientErrorLog(log, f"reader of {topic}")
        self._answered = False
        conf = {
            **settings.as_librdkafka_dict(),
            "group.id": f"lineagewire-reader-{uuid.uuid4()}",  # required by librdkafka; never committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "logger": QUIET_LOGGER,  # connection failures reach error_cb, not the log line by line
            "error_cb": lambda err: errors.error(err) if self._answered else failures(err),
            **(consumer_config or {}),
        }
        self._consumer = Consumer(conf)
        self._closed = False
        wait = min(timeout, settings.connect_timeout)
        try:
            md = self._consumer.list_topics(topic, timeout=wait)
        except KafkaException as exc:
            self._consumer.poll(0)  # nothing is assigned yet: serves the error callbacks queued meanwhile
            self.close()
            raise unreachable(settings, wait, failures, exc) from exc
        self._answered = True
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            raise ConfigError(f"topic {topic!r} does not exist on {settings.bootstrap_servers}; "
                              "create it with: lineagewire topics create")
        self.partitions = sorted(partitions if partitions is not None else tmd.partitions)
        self._stop_at = self._resolve(end, timeout) if end is not None else None
        self.start_offsets = self._resolve(start, timeout)
        self._consumer.assign([TopicPartition(topic, p, self.start_offsets[p]) for p in self.partitions])
        self._active = set(self.partitions)
        if self._stop_at is not None:
            # Partitions with an empty range are done before we begin.
            self._active = {p for p in self.partitions if self.start_offsets[p] < self._stop_at[p]}

    def _resolve(self, pos: Position, timeout: float) -> dict[int, int]:
        out: dict[int, int] = {}
        if isinstance(pos, dt.datetime):
            ms = int(pos.timestamp() * 1000)
            tps = self._consumer.offsets_for_times([TopicPartition(self.topic, p, ms) for p in self.partitions],
                                                   timeout=timeout)
            for tp in tps:
                if tp.offset < 0:  # no message at or after that time
                    _, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, tp.partition),
                                                                   timeout=timeout)
                    out[tp.partition] = high
                else:
                    out[tp.partition] = tp.offset
            return out
        for p in self.partitions:
            low, high = self._watermarks(p, timeout)
            if pos == "beginning":
                out[p] = low
            elif pos == "end":
                out[p] = high
            elif isinstance(pos, int):
                out[p] = min(max(pos, low), high)
            else:
                raise ConfigError(f"position {pos!r}: expected 'beginning', 'end', an offset or a time")
        return out

    def _watermarks(self, partition: int, timeout: float) -> tuple[int, int]:
        try:
            return self._consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(f"{self.topic}[{partition}]: could not read watermarks from "
                                         f"{self.settings.bootstrap_servers}: {exc}") from exc

    def total(self) -> int | None:
        """Offsets in the range when it is bounded (for progress bars; an upper bound on
        compacted or transactional topics), else None."""
        if self._stop_at is None:
            return None
        return sum(max(0, self._stop_at[p] - self.start_offsets[p]) for p in self.partitions)

    def __iter__(self) -> Iterator[Message]:
        return self.messages()

    def messages(self, poll_timeout: float = 0.5, idle_timeout: float | None = None) -> Iterator[Message]:
        """Yield messages in the range. ``idle_timeout``: stop after that many seconds without one."""
        last = time.monotonic()
        while not self._closed:
            if self._stop_at is not None and not self._active:
                return
            msg = self._consumer.poll(poll_timeout)
            if msg is None:
                if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                    return
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if self._stop_at is not None and offset_of(msg) >= self._stop_at.get(partition_of(msg), 0):
                        self._active.discard(partition_of(msg))
                    continue
                log.warning("%s[%s]: %s", msg.topic(), msg.partition(), err.str())
                continue
            last = time.monotonic()
            p = partition_of(msg)
            if self._stop_at is not None:
                if p not in self._active:
                    continue
                if offset_of(msg) >= self._stop_at[p]:
                    self._active.discard(p)
                    continue
                yield msg
                if offset_of(msg) + 1 >= self._stop_at[p]:
                    self._active.discard(p)
            else:
                yield msg

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._consumer.close()

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def partition_of(msg: Message) -> int:
    """A consumed message's partition (confluent-kafka types it optional: None only on messages it made up)."""
    return cast(int, msg.partition())


def offset_of(msg: Message) -> int:
    """A consumed message's offset (typed optional, as ``partition_of``)."""
    return cast(int, msg.offset())
