"""The at-least-once consumer loop every lineagewire service runs on.

One ``ConsumerRuntime`` per service process:

1. subscribes in the service's own consumer group (``lineagewire-<service>``);
2. decodes each message with the contract (``lineagewire.schemas.Codec``);
3. hands the event to the service's ``Handler``; the offset is committed only
   after ``handle`` returned (or the event was dead-lettered): at-least-once.
   Offsets are tracked per partition by the runtime and committed explicitly
   (every ``commit_interval`` seconds, on partition revocation and at shutdown),
   never by librdkafka's auto-commit;
4. skips event ids it handled recently (``DedupWindow``), so a redelivered
   batch is not handled twice within one process;
5. dead-letters undecodable messages and events the handler rejects with
   ``PermanentError`` to ``<topic>.dlq.<service>``, the original bytes and key
   with headers ``lineagewire.error.class``, ``lineagewire.error.message``,
   ``lineagewire.error.reason``, ``lineagewire.original.topic``,
   ``lineagewire.original.partition``, ``lineagewire.original.offset``,
   ``lineagewire.original.timestamp``, ``lineagewire.service``; then goes on;
6. retries an event whose output failed with exponential backoff (tenacity)
   and jitter, forever by default; meanwhile every assigned partition is
   paused, so nothing more is fetched (memory stays bounded by one batch),
   the group membership is kept alive, and per-key order holds;
7. stops gracefully on SIGTERM/SIGINT: the event in hand is finished (or, if
   its output is still down, left uncommitted for the next run), offsets are
   committed, the consumer, dead-letter producer and handler closed.

Every log line about a message names it as ``topic[partition]@offset``.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from lineagewire.exceptions import MissingExtraError

try:
    from tenacity import (
        RetryError,
        Retrying,
        retry_if_exception,
        stop_after_delay,
        stop_when_event_set,
        wait_exponential_jitter,
    )
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("tenacity", "consumers", "The consumer runtime (retries with backoff)") from exc

from lineagewire.config import Settings
from lineagewire.consumers.audit.subscribe import Record
from lineagewire.exceptions import DecodeError, LineagewireError, PublishError
from lineagewire.kafka.publisher import Publisher
from lineagewire.kafka.topics import create_topics, dlq_topic
from lineagewire.schemas import Codec

from .base import Handler
from .dedup import DedupWindow
from .exceptions import DeadLetterError, PermanentError
from .metrics import HealthServer, Metrics

log = logging.getLogger(__name__)

__all__ = ["DLQ_HEADERS", "ConsumerRuntime", "RetryPolicy", "RunStats"]

#: Header names on dead letters.
DLQ_HEADERS = (
    "lineagewire.error.class", "lineagewire.error.message", "lineagewire.error.reason",
    "lineagewire.original.topic", "lineagewire.original.partition", "lineagewire.original.offset",
    "lineagewire.original.timestamp", "lineagewire.service",
)


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for an output that is down: ``initial`` * 2^n seconds, capped at ``maximum``, plus
    up to ``jitter`` seconds; ``give_up_after`` None retries until the output is back or the service stops."""

    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.25
    give_up_after: float | None = None


@dataclass
class RunStats:
    """What one ``run()`` did."""

    consumed: int = 0
    handled: int = 0
    emitted: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    retries: int = 0
    committed: dict[str, int] = field(default_factory=dict)


def _pos(msg: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a consumed message (set for every message without an error)."""
    return msg.topic() or "", msg.partition() or 0, msg.offset() or 0


class _Aborted(Exception):
    """The service is stopping while an output is still down: leave the event uncommitted."""


class ConsumerRuntime:
    """Runs ``handler`` over ``topics`` in consumer group ``group_id``; see the module docstring.

    ``metrics_port``: serve /metrics and /healthz on 127.0.0.1 at that port (0 = any free port,
    None = no server). ``consumer_config`` overrides librdkafka consumer properties.
    """

    def __init__(
        self,
        settings: Settings,
        handler: Handler,
        *,
        topics: list[str] | None = None,
        group_id: str | None = None,
        service: str | None = None,
        retry: RetryPolicy | None = None,
        dedup_window: int = 100_000,
        dead_letters: bool = True,
        metrics_port: int | None = None,
        commit_interval: float = 1.0,
        batch_size: int = 500,
        consumer_config: dict[str, Any] | None = None,
        codec: Codec | None = None,
    ) -> None:
        self.settings = settings
        self.handler = handler
        self.service = service or handler.name
        self.topics = topics or [settings.topics.jobs]
        self.group_id = group_id or f"lineagewire-{self.service}"
        self.retry = retry or RetryPolicy()
        self.dedup = DedupWindow(dedup_window)
        self.dead_letters = dead_letters
        self.commit_interval = commit_interval
        self.batch_size = batch_size
        self.codec = codec or Codec(schema_registry_url=settings.schema_registry_url,
                                    registry_config=settings.registry_config())
        self.metrics = Metrics(self.service)
        self.stats = RunStats()
        self._metrics_port = metrics_port
        self._health: HealthServer | None = None
        self._consumer_config = {
            **settings.as_librdkafka_dict(),
            "group.id": self.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "fetch.wait.max.ms": 50,
            # A crashed member holds its partitions until the session times out; 10 s instead of 45 s
            # lets a restarted service (or a peer) take over sooner.
            "session.timeout.ms": 10_000,
            "logger": logging.getLogger("lineagewire.kafka.librdkafka"),
            **(consumer_config or {}),
        }
        self._consumer: Consumer | None = None
        self._dlq: Publisher | None = None
        self._stop = threading.Event()
        self._assigned: set[tuple[str, int]] = set()
        self._next: dict[tuple[str, int], int] = {}  # offsets handled, not yet committed
        self._last_commit = 0.0
        self._last_loop = time.monotonic()
        self._assigned_at = 0.0
        self._retrying: str | None = None
        self._paused: list[TopicPartition] = []

    # -- public ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to finish the event in hand, commit and return (thread- and signal-safe)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return (str(self._health.host), int(self._health.port)) if self._health else None

    def run(self, *, install_signal_handlers: bool = False, max_events: int | None = None,
            idle_timeout: float | None = None) -> RunStats:
        """Consume until ``stop()``/SIGTERM, ``max_events`` consumed, or ``idle_timeout`` seconds without a message
        (counted from the last message or partition assignment).

        ``install_signal_handlers``: stop gracefully on SIGTERM and SIGINT (main thread only).
        """
        previous: dict[signal.Signals, Any] = {}
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            self._open()
            last_message = time.monotonic()
            while not self._stop.is_set():
                self._last_loop = time.monotonic()
                batch = self._next_batch()
                if batch:
                    last_message = time.monotonic()
                for msg in self._messages(batch):
                    self._process(msg)
                    if self._stop.is_set() or (max_events is not None and self.stats.consumed >= max_events):
                        break
                self._update_lag(batch)
                self._maybe_commit()
                if max_events is not None and self.stats.consumed >= max_events:
                    break
                # Joining the group is not idleness: count from the last message or the last assignment
                # (waiting at most a minute more for a first assignment).
                since = max(last_message, self._assigned_at or last_message + 60)
                if idle_timeout is not None and time.monotonic() - since > idle_timeout:
                    break
        finally:
            self._close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.stats

    # -- lifecycle ---------------------------------------------------------------------------

    def _open(self) -> None:
        if self._metrics_port is not None:
            self._health = HealthServer(self.metrics, self._healthz, port=self._metrics_port).start()
        self.handler.open()
        if self.dead_letters:
            self._dlq = Publisher(self.settings, codec=self.codec,
                                  producer_config={"linger.ms": 0, "message.timeout.ms": 30_000})
            try:
                create_topics(self.settings, [dlq_topic(self.settings, t, self.service) for t in self.topics])
            except LineagewireError as exc:
                # It may exist already or be auto-created; a dead letter that cannot be written is retried.
                log.warning("could not create dead-letter topics for %s: %s", ", ".join(self.topics), exc)
        self._consumer = Consumer(self._consumer_config)
        self._consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                 on_lost=self._on_revoke)
        log.info("service %s: group %s on %s", self.service, self.group_id, ", ".join(self.topics))

    def _close(self) -> None:
        try:
            if self._consumer is not None:
                with contextlib.suppress(Exception):
                    self._commit(asynchronous=False)
                self._consumer.close()
        finally:
            self._consumer = None
            try:
                self.handler.close()
            finally:
                if self._dlq is not None:
                    with contextlib.suppress(PublishError):
                        self._dlq.flush(10)
                    self._dlq = None
                if self._health is not None:
                    self._health.stop()
                    self._health = None
        log.info("service %s stopped: %s", self.service, self.stats)

    def _healthz(self) -> tuple[bool, dict[str, Any]]:
        stalled = time.monotonic() - self._last_loop
        # A loop waiting on a down output still polls (paused); only a stuck loop is unhealthy.
        ok = self._consumer is not None and stalled < 120 and not self._stop.is_set()
        return ok, {"service": self.service, "group": self.group_id,
                    "assigned": sorted(f"{t}[{p}]" for t, p in self._assigned),
                    "output": "retrying" if self._retrying else "up", "retrying": self._retrying,
                    "consumed": self.stats.consumed, "emitted": self.stats.emitted,
                    "dead_lettered": self.stats.dead_lettered}

    # -- rebalance and commits ---------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.update((tp.topic, tp.partition) for tp in partitions)
        self._assigned_at = time.monotonic()
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing")

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        with contextlib.suppress(Exception):
            self._commit(asynchronous=False, only=gone)
        self._assigned -= gone
        for key in gone:
            self._next.pop(key, None)
        log.info("revoked %s", ", ".join(f"{t}[{p}]" for t, p in sorted(gone)) or "nothing")

    def _maybe_commit(self) -> None:
        if self._next and time.monotonic() - self._last_commit >= self.commit_interval:
            self._commit(asynchronous=True)

    def _commit(self, *, asynchronous: bool, only: set[tuple[str, int]] | None = None) -> None:
        if self._consumer is None or not self._next:
            return
        keys = [k for k in self._next if only is None or k in only]
        if not keys:
            return
        offsets = [TopicPartition(t, p, self._next[(t, p)]) for t, p in keys]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=asynchronous)  # type: ignore[call-overload]
        except KafkaException as exc:
            self.metrics.failed("commit")
            log.warning("commit of %s failed: %s", ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}"
                                                             for tp in offsets), exc)
            return
        for tp in offsets:
            self.stats.committed[f"{tp.topic}[{tp.partition}]"] = tp.offset
            if self._next.get((tp.topic, tp.partition)) == tp.offset:
                del self._next[(tp.topic, tp.partition)]
        self._last_commit = time.monotonic()

    def _done(self, msg: Message) -> None:
        """The message's outputs are durable (or it was dead-lettered or skipped): commit past it."""
        topic, partition, offset = _pos(msg)
        if (topic, partition) not in self._assigned:
            return  # revoked meanwhile: the new owner starts from the last commit (at-least-once)
        self._next[(topic, partition)] = offset + 1

    # -- messages ----------------------------------------------------------------------------

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
                if err.code() != -191:  # _PARTITION_EOF is not an error
                    log.warning("%s[%s]: consumer error: %s", msg.topic(), msg.partition(), err.str())
                continue
            if (msg.topic(), msg.partition()) not in self._assigned:
                continue  # revoked while this batch was in hand; the new owner handles it
            yield msg

    def _process(self, msg: Message) -> None:
        topic, partition, offset = _pos(msg)
        where = f"{topic}[{partition}]@{offset}"
        self.stats.consumed += 1
        self.metrics.consumed(topic)
        started = time.perf_counter()
        try:
            event = self.codec.decode(msg.value())
        except DecodeError as exc:
            log.error("%s: undecodable message (%s): %s; dead-lettering", where, exc.reason, exc,
                      extra={"topic": topic, "partition": partition, "offset": offset, "service": self.service})
            self._dead_letter_or_abort(msg, exc, exc.reason)
            return
        event_id = event["header"]["event_id"]
        if event_id in self.dedup:
            self.stats.duplicates += 1
            self.metrics.duplicate()
            log.debug("%s: event %s already handled; skipped", where, event_id)
            self._done(msg)
            return
        key = msg.key()
        record = Record(topic, partition, offset,
                        key.decode("utf-8", "replace") if key is not None else None, msg.timestamp()[1], event)
        try:
            emitted = self._with_retries(where, lambda: self.handler.handle(record))
        except PermanentError as exc:
            log.error("%s: event %s cannot be handled by %s: %s; dead-lettering", where, event_id, self.service, exc,
                      extra={"topic": topic, "partition": partition, "offset": offset, "service": self.service,
                             "event_id": event_id})
            self._dead_letter_or_abort(msg, exc, "permanent")
            return
        except _Aborted:
            log.warning("%s: stopping while the output is down; event %s stays uncommitted", where, event_id)
            return
        self.metrics.latency(time.perf_counter() - started)
        self.dedup.add(event_id)
        self.stats.handled += 1
        self.stats.emitted += emitted or 0
        self.metrics.emitted(emitted or 0)
        self._done(msg)

    def _dead_letter_or_abort(self, msg: Message, exc: Exception, reason: str) -> None:
        topic, partition, offset = _pos(msg)
        where = f"{topic}[{partition}]@{offset}"
        if self._dlq is None:
            log.error("%s: no dead-letter topic configured; message skipped", where)
            self._done(msg)
            return
        try:
            self._with_retries(where, lambda: self._dead_letter(msg, exc, reason), stage="dead_letter")
        except _Aborted:
            return
        self.stats.dead_lettered += 1
        self.metrics.dead_lettered(topic, reason)
        self._done(msg)

    def _dead_letter(self, msg: Message, exc: Exception, reason: str) -> int:
        src, partition, offset = _pos(msg)
        topic = self.settings.topics.dlq(src, self.service)
        headers = dict(zip(DLQ_HEADERS, (
            f"{type(exc).__module__}.{type(exc).__qualname__}", str(exc)[:4000], reason, src,
            str(partition), str(offset), str(msg.timestamp()[1]), self.service), strict=True))
        assert self._dlq is not None
        self._dlq.produce_raw(topic, msg.value(), key=msg.key(), headers=headers)  # type: ignore[arg-type]
        try:
            # Waiting per dead letter is fine: they are rare, and the offset must not pass an unwritten one.
            self._dlq.flush(30)
        except PublishError as e:
            raise DeadLetterError(f"{src}[{partition}]@{offset}: dead letter to {topic} failed: {e}") from e
        log.info("%s[%s]@%s dead-lettered to %s", src, partition, offset, topic)
        return 1

    # -- retries -----------------------------------------------------------------------------

    def _with_retries(self, where: str, call: Any, stage: str = "output") -> int:
        """Run ``call`` until it succeeds, pausing the partitions while it fails; PermanentError passes."""
        try:
            return call()  # the common case: no retry machinery on the hot path
        except PermanentError:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure means the output is down: retry below
            first = exc
        policy = self.retry
        stop: Any = stop_when_event_set(self._stop)
        if policy.give_up_after is not None:
            stop = stop | stop_after_delay(policy.give_up_after)
        attempts = 0
        self._retrying = f"{where}: {type(first).__name__}: {first}"
        log.warning("%s: %s failed, retrying with backoff: %s: %s", where, stage, type(first).__name__, first)
        self.stats.retries += 1
        self.metrics.failed(stage)
        self._pause()

        def before_sleep(state: Any) -> None:
            nonlocal attempts
            attempts += 1
            self.stats.retries += 1
            self.metrics.failed(stage)
            exc = state.outcome.exception()
            self._retrying = f"{where}: {type(exc).__name__}: {exc}"
            log.warning("%s: %s failed (attempt %d), retrying in %.1fs: %s: %s", where, stage, attempts,
                        state.next_action.sleep, type(exc).__name__, exc)

        retrying = Retrying(
            retry=retry_if_exception(lambda e: not isinstance(e, PermanentError)),
            wait=wait_exponential_jitter(multiplier=policy.initial, max=policy.maximum, jitter=policy.jitter),
            stop=stop,
            sleep=self._sleep_polling,
            before_sleep=before_sleep,
            reraise=False,
        )
        try:
            self._sleep_polling(policy.initial)
            return retrying(call)
        except RetryError as exc:
            if self._stop.is_set():
                raise _Aborted from exc
            last = exc.last_attempt.exception()
            raise PermanentError(f"{where}: {stage} still failing after {policy.give_up_after}s: "
                                 f"{type(last).__name__}: {last}") from last
        finally:
            self._resume()
            self._retrying = None
            if not self._stop.is_set():
                log.info("%s: %s recovered after %d retries", where, stage, attempts + 1)

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
                        self._consumer.seek(TopicPartition(*_pos(msg)))
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
                topic, partition, offset = _pos(msg)
                last[(topic, partition)] = offset
        for (topic, partition), offset in last.items():
            try:
                _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            except KafkaException:
                continue
            if high >= 0:
                self.metrics.lag(topic, partition, high - offset - 1)


def new_group_id(service: str) -> str:
    """A throwaway group id (tests, one-off runs)."""
    return f"lineagewire-{service}-{uuid.uuid4().hex[:8]}"
