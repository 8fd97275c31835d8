"""The refresh runner: consumes RefreshCommands and refreshes the tables on a SparkSession.

* Its own consumer group (default ``lineagewire-refresh-runner``) on
  ``settings.topics.refresh_commands``; a command is committed after its
  refresh ended, whatever the outcome (a failed refresh is retried by the
  scheduler with a new attempt, not by redelivery).
* A command id already completed (``CompletedStore``) is skipped, so a
  duplicate command (republished after a scheduler crash, or redelivered
  after a runner crash) never refreshes twice.
* Each refresh runs inside ``job_run(...)`` named after the command's header
  (``refresh <table>``), with the command's run id, the workflow as parent run
  and ``header.schedule``: its status and lineage flow back to
  ``settings.topics.jobs``, where the scheduler reads its status.
* A watcher thread reads CancelRefresh commands from the same topic (assigned
  partitions, from ``cancel_lookback`` seconds ago, no group). A cancel for
  the running command cancels its Spark jobs (``cancelJobsWithTag``) and the
  run ends CANCELED; a cancel for a command not started yet makes the runner
  skip it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaException

from lineagewire.config import Settings
from lineagewire.exceptions import DecodeError, LineagewireError
from lineagewire.kafka.reader import TopicReader
from lineagewire.producers.spark._py4j import release_thread_connection
from lineagewire.schemas import Codec, kind_of

from .exceptions import RefreshCanceled
from .refresh import execute_refresh
from .state import CompletedStore

log = logging.getLogger(__name__)

__all__ = ["RefreshRunner"]


class RefreshRunner:
    """Executes refresh commands on ``spark``. ``run()`` blocks until ``stop()`` (call it from another thread)."""

    def __init__(self, spark: Any, settings: Settings, *, group_id: str = "lineagewire-refresh-runner",
                 state: CompletedStore | None = None, table_format: str = "parquet", cancel_lookback: float = 3600,
                 consumer_config: dict[str, Any] | None = None, install_emitter: bool = True) -> None:
        self.spark = spark
        self.settings = settings
        self.topic = settings.topics.refresh_commands
        self.state = state if state is not None else CompletedStore()
        self.table_format = table_format
        self.cancel_lookback = cancel_lookback
        self.codec = Codec(schema_registry_url=settings.schema_registry_url,
                           registry_config=settings.registry_config())
        self._conf = {**settings.as_librdkafka_dict(), "group.id": group_id, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False,
                      # a refresh can take long; the loop does not poll while Spark works
                      "max.poll.interval.ms": 3_600_000,
                      "logger": logging.getLogger("lineagewire.kafka.librdkafka"), **(consumer_config or {})}
        self._install_emitter = install_emitter
        self._emitter: Any = None
        self._stop = threading.Event()
        self._canceled: dict[str, str] = {}
        self._current: str | None = None
        self._lock = threading.Lock()
        self.outcomes: list[tuple[str, str]] = []  # (command_id, COMPLETED | FAILED | CANCELED | SKIPPED)
        self.ready = threading.Event()  # set once partitions are assigned

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Consume and execute commands until ``stop()``."""
        if self._install_emitter:
            from lineagewire.producers.spark import install

            self._emitter = install(self.spark, settings=self.settings)
        watcher = threading.Thread(target=self._watch_cancels, name="lineagewire-refresh-cancels", daemon=True)
        watcher.start()
        consumer = Consumer(self._conf)
        try:
            consumer.subscribe([self.topic], on_assign=lambda c, p: self.ready.set())
            while not self._stop.is_set():
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
                err = msg.error()
                if err is not None:
                    log.warning("%s: %s", where, err.str())
                    continue
                self._handle_message(msg.value() or b"", where)
                try:
                    consumer.commit(message=msg, asynchronous=False)
                except KafkaException as exc:
                    log.warning("%s: commit failed (a redelivered command is skipped if completed): %s", where, exc)
        finally:
            self._stop.set()
            consumer.close()
            watcher.join(30)
            if self._emitter is not None:
                self._emitter.close()
            release_thread_connection()

    # -- commands --------------------------------------------------------------------------------------------------

    def _handle_message(self, value: bytes, where: str) -> None:
        try:
            event = self.codec.decode(value)
        except DecodeError as exc:
            log.error("%s: skipped, not a lineagewire event: %s", where, exc)
            return
        kind = kind_of(event)
        if kind == "RefreshCommand":
            self.handle(event)
        elif kind != "CancelRefresh":  # cancels are handled by the watcher
            log.warning("%s: skipped a %s on the refresh-commands topic", where, kind)

    def handle(self, command: dict[str, Any]) -> str:
        """Execute one RefreshCommand; returns COMPLETED, FAILED, CANCELED or SKIPPED."""
        from lineagewire.producers.spark import job_run

        cid = command["command_id"]
        attempt = command.get("attempt", 1)
        if self.state.completed(cid):
            log.info("refresh %s of %s already completed; duplicate skipped", cid, command["table"])
            return self._outcome(cid, "SKIPPED")
        with self._lock:
            if cid in self._canceled:
                log.info("refresh %s of %s was cancelled before it started; skipped", cid, command["table"])
                return self._outcome(cid, "CANCELED")
            self._current = cid
        h = command["header"]
        sc = self.spark.sparkContext
        tag = f"lineagewire-refresh-{cid}"
        sc.setInterruptOnCancel(True)
        sc.addJobTag(tag)
        log.info("refreshing %s for %s (attempt %d, partitions %s)", command["table"],
                 command["nominal_time"].isoformat(), attempt, command.get("static_partitions"))
        try:
            with job_run(self.spark, h["job_name"], namespace=h["job_namespace"], parent=h["parent_run"],
                         schedule=h["schedule"], run_id=h["run_id"], sql=command["query"],
                         tags={"table": command["table"], "command_id": cid, "attempt": str(attempt),
                               "nominal_time": command["nominal_time"].astimezone(dt.UTC).isoformat()}):
                try:
                    execute_refresh(self.spark, command, table_format=self.table_format,
                                    check_canceled=lambda: self._check_canceled(cid))
                except RefreshCanceled:
                    raise
                except Exception as exc:
                    # A cancelled Spark job surfaces as a Py4JJavaError whose first line is "An error occurred
                    # while calling ..."; say plainly that it was cancelled so the run ends CANCELED, not FAILED.
                    self._check_canceled(cid)
                    raise exc
        except Exception as exc:  # noqa: BLE001 - the run's status event carries the error; keep consuming
            with self._lock:
                canceled = cid in self._canceled
            if canceled:
                log.info("refresh %s of %s cancelled", cid, command["table"])
                return self._outcome(cid, "CANCELED")
            log.error("refresh %s of %s failed (attempt %d): %s", cid, command["table"], attempt,
                      str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return self._outcome(cid, "FAILED")
        finally:
            sc.removeJobTag(tag)
            with self._lock:
                self._current = None
        self.state.mark(cid, attempt)
        return self._outcome(cid, "COMPLETED")

    def _outcome(self, cid: str, what: str) -> str:
        self.outcomes.append((cid, what))
        return what

    def _check_canceled(self, cid: str) -> None:
        with self._lock:
            reason = self._canceled.get(cid)
        if reason is not None:
            raise RefreshCanceled(cid, reason)

    # -- cancels ---------------------------------------------------------------------------------------------------

    def cancel(self, command_id: str, reason: str = "") -> None:
        """Cancel a command: interrupt it if it is running, skip it if it comes later."""
        with self._lock:
            self._canceled[command_id] = reason
            running = self._current == command_id
        if running:
            log.info("cancelling the running refresh %s", command_id)
            self.spark.sparkContext.cancelJobsWithTag(f"lineagewire-refresh-{command_id}")

    def _watch_cancels(self) -> None:
        start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=self.cancel_lookback)
        try:
            reader = TopicReader(self.settings, self.topic, start=start)
        except LineagewireError as exc:
            log.error("cancel watcher cannot read %s: %s; CancelRefresh will not interrupt refreshes", self.topic, exc)
            return
        with reader, contextlib.ExitStack() as stack:
            stack.callback(release_thread_connection)  # this thread calls cancelJobsWithTag
            while not self._stop.is_set():
                # returns after a quiet half second, so stop() is noticed
                for msg in reader.messages(poll_timeout=0.2, idle_timeout=0.5):
                    try:
                        event = self.codec.decode(msg.value())
                    except DecodeError:
                        continue  # the main loop reports undecodable messages
                    if kind_of(event) == "CancelRefresh":
                        self.cancel(event["command_id"], event.get("reason", ""))
                    if self._stop.is_set():
                        break
