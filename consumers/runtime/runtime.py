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
   ``lineagewire.original.timestamp``, ``lineagewire.service``; then goes on.
   A message too large for the dead-letter topic is written cut, with its size
   and SHA-256 (``deadletter.py``); a dead letter that cannot be written at all
   is retried until it can (never skipped), and /healthz turns unhealthy.
   A handler that delivers after ``handle`` returned (``InFlight``) hands over
   the records its output rejected for good (``Handler.rejected``), after each
   ``batch_done`` and ``tick``: they are dead-lettered the same way, and their
   partitions committed past them only once their dead letters are written;
6. retries an event whose output is down (``retry.py``: ``OutputError``,
   ``OSError``, Kafka errors, ``Handler.retryable_errors``) with exponential
   backoff (tenacity) and jitter, forever by default, and an unexpected
   exception (a handler bug) ``max_handler_retries`` times before dead-lettering
   it with its traceback. When ``give_up_after`` runs out on outputs a handler
   holds for earlier records (``Handler.give_up``), those records are
   dead-lettered, not the one in hand, which is handed again. Meanwhile every
   assigned partition is paused, so nothing more is fetched (memory stays
   bounded by one batch), the group membership is kept alive, and per-key
   order holds;
7. stops gracefully on SIGTERM/SIGINT: the event in hand is finished (or, if
   its output is still down, left uncommitted for the next run), offsets are
   committed, the consumer, dead-letter producer and handler closed.

/healthz answers 503 while the cluster is unreachable, while a dead letter has
failed for ``unhealthy_after`` seconds, or when the loop is stuck. With the
broker down, connection errors are logged once per backoff step (1 s, 2 s...
up to a minute), and SIGTERM is honoured within a poll interval.

Every log line about a message names it as ``topic[partition]@offset``.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from lineagewire.config import Settings
from lineagewire.exceptions import ConfigError, DecodeError, LineagewireError, PublishError
from lineagewire.kafka.errors import QUIET_LOGGER, ClientErrorLog
from lineagewire.kafka.topics import create_topics, dlq_topic
from lineagewire.schemas import Codec

from .base import Handler
from .deadletter import DLQ_HEADERS, DeadLetterWriter
from .dedup import DedupWindow
from .exceptions import GaveUpError, HandlerBugError, PermanentError
from .metrics import HealthServer, Metrics
from .polling import Polling, position
from .record import Record
from .retry import Aborted, Retrier, RetryPolicy

log = logging.getLogger(__name__)

__all__ = ["DLQ_HEADERS", "ConsumerRuntime", "RetryPolicy", "RunStats"]

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


class ConsumerRuntime(Polling):
    """Runs ``handler`` over ``topics`` in consumer group ``group_id``; see the module docstring.

    ``metrics_port``: serve /metrics and /healthz on 127.0.0.1 at that port (0 = any free port,
    None = no server). ``consumer_config`` overrides librdkafka consumer properties.
    ``dlq_max_bytes``: the largest dead letter written whole (larger ones are cut, see ``deadletter``).
    ``unhealthy_after``: seconds a dead letter may keep failing before /healthz answers 503.
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
        dlq_max_bytes: int = 1_000_000,
        unhealthy_after: float = 30.0,
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
        self._decode = handler.decoder(self.codec)
        self.metrics = Metrics(self.service)
        self.stats = RunStats()
        self._metrics_port = metrics_port
        self._health: HealthServer | None = None
        self.dlq_max_bytes = dlq_max_bytes
        self.unhealthy_after = unhealthy_after
        self.client_errors = ClientErrorLog(log, f"consumer of group {self.group_id}")
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
            # Connection failures reach error_cb (logged once per backoff step), not the log line by line;
            # the statistics say when a broker answers again.
            "logger": QUIET_LOGGER,
            "error_cb": self.client_errors.error,
            "statistics.interval.ms": 2000,
            "stats_cb": self.client_errors.stats,
            **(consumer_config or {}),
        }
        self._consumer: Consumer | None = None
        self._dlq: DeadLetterWriter | None = None
        self._stop = threading.Event()
        self._assigned: set[tuple[str, int]] = set()
        self._next: dict[tuple[str, int], int] = {}  # offsets handled, not yet committed
        self._last_commit = 0.0
        self._last_tick = time.monotonic()
        self._last_loop = time.monotonic()
        self._assigned_at = 0.0
        self._paused: list[TopicPartition] = []
        self.retrier = Retrier(self.retry, pause=self._pause, resume=self._resume, sleep=self._sleep_polling,
                               stopping=self._stop.is_set, on_failure=self._failed)

    # -- public ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to finish the event in hand, commit and return (thread- and signal-safe)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def assigned(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this member consumes now (empty before the group's first assignment)."""
        return frozenset(self._assigned)

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return (str(self._health.host), int(self._health.port)) if self._health else None

    def run(self, *, install_signal_handlers: bool = False, max_events: int | None = None,
            idle_timeout: float | None = None, on_open: Callable[[], None] | None = None) -> RunStats:
        """Consume until ``stop()``/SIGTERM, ``max_events`` consumed, or ``idle_timeout`` seconds without a message
        (counted from the last message or partition assignment).

        ``install_signal_handlers``: stop gracefully on SIGTERM and SIGINT (main thread only).
        ``on_open``: called once the consumer, the handler and the dead-letter writer are set up (a wrong
        setting has raised ``ConfigError`` by then).
        """
        previous: dict[signal.Signals, Any] = {}
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            self._open()
            if on_open is not None:
                on_open()
            self._consume(sys.maxsize if max_events is None else max_events, idle_timeout)
        finally:
            self._close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.stats

    def _consume(self, max_events: int, idle_timeout: float | None) -> None:
        """The loop: poll a batch, process its messages, then the batch's hooks, the tick and the commit."""
        last_message = time.monotonic()
        while not self._stop.is_set():
            self._last_loop = time.monotonic()
            batch = self._next_batch()
            if batch:
                last_message = time.monotonic()
            for msg in self._messages(batch):
                self._process(msg)
                if self._stop.is_set() or self.stats.consumed >= max_events:
                    break
            self._update_lag(batch)
            if batch:
                self._batch_done()
            self._maybe_tick()
            self._maybe_commit()
            if self.stats.consumed >= max_events:
                break
            if idle_timeout is not None and self._idle_for(last_message) > idle_timeout:
                break

    def _idle_for(self, last_message: float) -> float:
        """Seconds without a message. Joining the group is not idleness: counted from the last message or the
        last assignment (waiting at most a minute more for a first assignment)."""
        return time.monotonic() - max(last_message, self._assigned_at or last_message + 60)

    # -- lifecycle ---------------------------------------------------------------------------

    def _open(self) -> None:
        # The handler and the consumer first: a wrong setting of either fails before anything is started
        # (or connects); run() closes whatever was opened.
        self.handler.open()
        try:
            self._consumer = Consumer(self._consumer_config)
        except KafkaException as exc:
            raise ConfigError(f"consumer configuration rejected by librdkafka: {exc.args[0].str()}; expected "
                              "consumer properties from librdkafka's CONFIGURATION.md") from exc
        if self._metrics_port is not None:
            self._health = HealthServer(self.metrics, self._healthz, port=self._metrics_port).start()
        if self.dead_letters:
            self._dlq = DeadLetterWriter(self.settings, self.service, max_bytes=self.dlq_max_bytes)
            # In the background: with the cluster unreachable this waits for its timeout, and the service
            # must still start (and stop on SIGTERM) meanwhile.
            threading.Thread(target=self._create_dlq_topics, name="lineagewire-dlq-topics", daemon=True).start()
        self._consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                 on_lost=self._on_revoke)
        log.info("service %s: group %s on %s", self.service, self.group_id, ", ".join(self.topics))

    def _create_dlq_topics(self) -> None:
        try:
            create_topics(self.settings, [dlq_topic(self.settings, t, self.service) for t in self.topics])
        except LineagewireError as exc:
            # It may exist already or be auto-created; a dead letter that cannot be written is retried.
            log.warning("could not create dead-letter topics for %s: %s", ", ".join(self.topics), exc)

    def _close(self) -> None:
        try:
            try:
                # Before the final commit: what close() flushes becomes durable and can be committed.
                self.handler.close()
            finally:
                if self._consumer is not None:
                    with contextlib.suppress(Exception):
                        self._dead_letter_rejected()  # what close() found rejected: committed past once written
                    with contextlib.suppress(Exception):
                        self._commit(asynchronous=False)
                    self._consumer.close()
        finally:
            self._consumer = None
            if self._dlq is not None:
                with contextlib.suppress(PublishError):
                    self._dlq.flush(10)
                self._dlq = None
            if self._health is not None:
                self._health.stop()
                self._health = None
        log.info("service %s stopped: %s", self.service, self.stats)

    def _healthz(self) -> tuple[bool, dict[str, Any]]:
        now = time.monotonic()
        stalled = now - self._last_loop
        r = self.retrier
        # A loop waiting on a down output still polls (paused) and is healthy: the output is what is down.
        # A dead letter that keeps failing is the runtime's own problem: it blocks every partition.
        dlq_stuck = r.stage == "dead_letter" and r.since is not None and now - r.since >= self.unhealthy_after
        problems = [p for p, bad in (
            ("stopped", self._consumer is None or self._stop.is_set()),
            (f"loop stalled for {stalled:.0f}s", stalled >= 120),
            (f"kafka unreachable: {self.client_errors.last_error}", self.client_errors.unreachable),
            (f"dead letter failing for {now - (r.since or now):.0f}s", dlq_stuck)) if bad]
        return not problems, {"service": self.service, "group": self.group_id, "problems": problems,
                              "assigned": sorted(f"{t}[{p}]" for t, p in self._assigned),
                              "output": "retrying" if r.state else "up", "retrying": r.state,
                              "consumed": self.stats.consumed, "emitted": self.stats.emitted,
                              "dead_lettered": self.stats.dead_lettered}

    def _failed(self, stage: str) -> None:
        self.stats.retries += 1
        self.metrics.failed(stage)

    # -- rebalance and commits ---------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.client_errors.reachable()
        self._assigned.update((tp.topic, tp.partition) for tp in partitions)
        self._assigned_at = time.monotonic()
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions) or "nothing")
        if partitions:
            try:
                self.handler.on_assign(sorted((tp.topic, tp.partition) for tp in partitions))
            except Exception:  # noqa: BLE001 - the handler must block its work until it recovered (see base.py)
                log.exception("service %s: on_assign of %s failed", self.service,
                              ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        if self.handler.durable_offsets() is not None:
            # A buffering or concurrently delivering handler may hold events it was handed but has not made
            # durable; the window has their ids. Should the partition come back to this process, those events
            # are redelivered and must be handled again, not skipped as seen: forget the window (outputs are
            # idempotent, so the cost is at most some duplicates).
            self.dedup.clear()
        try:
            self.handler.on_revoke(sorted(gone))
        except Exception:  # noqa: BLE001 - whatever it could not flush is redelivered to the new owner
            log.exception("service %s: on_revoke of %s failed", self.service, sorted(gone))
        with contextlib.suppress(Exception):
            self._commit(asynchronous=False, only=gone)
        self._assigned -= gone
        for key in gone:
            self._next.pop(key, None)
        log.info("revoked %s", ", ".join(f"{t}[{p}]" for t, p in sorted(gone)) or "nothing")

    def _batch_done(self) -> None:
        self._call_hook("batch", self.handler.batch_done, "saving a batch")

    def _maybe_tick(self) -> None:
        interval = self.handler.tick_interval
        if interval is None or time.monotonic() - self._last_tick < interval:
            return
        self._last_tick = time.monotonic()
        self._call_hook("tick", lambda: self.handler.tick(time.time()), "tick")

    def _call_hook(self, stage: str, call: Callable[[], int], what: str) -> None:
        """``batch_done`` or ``tick`` with retries, then the dead letters of what the handler's output rejected."""
        try:
            emitted = self.retrier.run(f"service {self.service}", call, stage=stage,
                                       retryable=self.handler.retryable_errors)
        except Aborted:
            return
        except GaveUpError as exc:
            if not self._gave_up(exc):
                log.error("service %s: %s failed for good: %s", self.service, what, exc)
            return
        except PermanentError as exc:
            log.error("service %s: %s failed for good: %s", self.service, what, exc)
        else:
            self.stats.emitted += emitted or 0
            self.metrics.emitted(emitted or 0)
        self._dead_letter_rejected()

    def _maybe_commit(self) -> None:
        if self._next and time.monotonic() - self._last_commit >= self.commit_interval:
            self._commit(asynchronous=True)

    def _commit(self, *, asynchronous: bool, only: set[tuple[str, int]] | None = None) -> None:
        if self._consumer is None or not self._next:
            return
        wanted = self._committable(only)
        if not wanted:
            return
        offsets = [TopicPartition(t, p, off) for (t, p), off in wanted.items()]
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

    def _committable(self, only: set[tuple[str, int]] | None) -> dict[tuple[str, int], int]:
        """The offset to commit per partition (of ``only``, if given): past the last message done, but never past
        what a buffering handler has made durable."""
        keys = [k for k in self._next if only is None or k in only]
        durable = self.handler.durable_offsets()
        if durable is None:
            return {k: self._next[k] for k in keys}
        return {k: min(self._next[k], durable[k]) for k in keys if k in durable}

    def _done(self, msg: Message) -> None:
        """The message's outputs are durable (or it was dead-lettered or skipped): commit past it."""
        topic, partition, offset = position(msg)
        if (topic, partition) not in self._assigned:
            return  # revoked meanwhile: the new owner starts from the last commit (at-least-once)
        self._next[(topic, partition)] = offset + 1

    # -- messages ----------------------------------------------------------------------------

    def _process(self, msg: Message) -> None:
        topic, partition, offset = position(msg)
        where = f"{topic}[{partition}]@{offset}"
        self.stats.consumed += 1
        self.metrics.consumed(topic)
        started = time.perf_counter()
        event_id = decode_error = None
        try:
            event = self._decode(msg.value())
        except DecodeError as exc:
            if not self.handler.accepts_undecodable:
                log.error("%s: undecodable message (%s): %s; dead-lettering", where, exc.reason, exc,
                          extra={"topic": topic, "partition": partition, "offset": offset, "service": self.service})
                self._dead_letter_or_abort(msg, exc, exc.reason)
                return
            # A handler that keeps every message (the archive) gets the undecodable one as it is.
            event, decode_error = None, f"{exc.reason}: {exc}"
        else:
            assert event is not None  # a decoder returns an event or raises
            event_id = event["header"]["event_id"]
            if event_id in self.dedup:
                self.stats.duplicates += 1
                self.metrics.duplicate()
                log.debug("%s: event %s already handled; skipped", where, event_id)
                self._done(msg)
                return
        record = Record.from_message(msg, event, decode_error)
        while True:
            try:
                emitted = self.retrier.run(where, lambda: self.handler.handle(record),
                                           retryable=self.handler.retryable_errors)
                break
            except GaveUpError as exc:
                error: PermanentError = exc
                if self._gave_up(exc):
                    # The outputs given up on were earlier records' (now dead-lettered); this record was not
                    # taken (``InFlight.submit`` raises first), so it is handed again.
                    if not self._stop.is_set():
                        continue
                    log.warning("%s: stopping; %s stays uncommitted", where, _what(event_id))
                    return
            except PermanentError as exc:
                error = exc
            except Aborted:
                log.warning("%s: stopping while the output is down; %s stays uncommitted", where, _what(event_id))
                return
            log.error("%s: %s cannot be handled by %s: %s; dead-lettering", where, _what(event_id), self.service,
                      error, extra={"topic": topic, "partition": partition, "offset": offset,
                                    "service": self.service, "event_id": event_id})
            self._dead_letter_or_abort(msg, error, _reason(error))
            return
        if event_id is not None:
            self.metrics.latency(time.perf_counter() - started)
            self.dedup.add(event_id)
        self.stats.handled += 1
        self.stats.emitted += emitted or 0
        self.metrics.emitted(emitted or 0)
        self._done(msg)

    def _dead_letter_or_abort(self, msg: Message, exc: Exception, reason: str) -> None:
        if self._dead_letter(Record.from_message(msg, None), exc, reason):
            self._done(msg)

    def _dead_letter(self, record: Record, exc: BaseException, reason: str) -> bool:
        """Write ``record``'s dead letter, retried until it is written; False when the service stopped first."""
        if self._dlq is None:
            log.error("%s: no dead-letter topic configured; message skipped", record.where)
            return True
        dlq = self._dlq
        try:
            # Forever: skipping would lose the message, and a PermanentError here must not stop the service.
            self.retrier.run(record.where, lambda: dlq.write(record, exc, reason), stage="dead_letter", forever=True)
        except Aborted:
            log.warning("%s: stopping while its dead letter is not written; it stays uncommitted", record.where)
            return False
        self.stats.dead_lettered += 1
        self.metrics.dead_lettered(record.topic, reason)
        return True

    def _dead_letter_rejected(self) -> None:
        """Dead-letter the records whose outputs the handler's output rejected for good after ``handle`` returned
        (``Handler.rejected``), then let their partitions commit past them (``Rejected.settle``)."""
        for rejected in self.handler.rejected():
            record, exc = rejected.record, rejected.error
            log.error("%s: rejected by the output of %s for good: %s; dead-lettering", record.where, self.service, exc,
                      extra={"topic": record.topic, "partition": record.partition, "offset": record.offset,
                             "service": self.service})
            if not self._dead_letter(record, exc, _reason(exc)):
                return  # stopping: this one and the rest stay held back, uncommitted, for the next run
            rejected.settle()

    def _gave_up(self, exc: GaveUpError) -> bool:
        """``give_up_after`` ran out: True when the failure was of outputs the handler holds for records it was
        handed before (``Handler.give_up``), which are then dead-lettered; False when it is the call's own."""
        if not self.handler.give_up(exc.since):
            return False
        log.error("service %s: gave up on outputs held for records handed before (%s); dead-lettering those records",
                  self.service, exc)
        self._dead_letter_rejected()
        return True

def _what(event_id: str | None) -> str:
    return "undecodable message" if event_id is None else f"event {event_id}"


def _reason(exc: PermanentError) -> str:
    return "handler-bug" if isinstance(exc, HandlerBugError) else "permanent"
