"""The refresh runner: a ``Handler`` on the shared consumer runtime that refreshes tables on a SparkSession.

``RefreshHandler`` runs on ``lineagewire.consumers.runtime.ConsumerRuntime``
(consumer group ``lineagewire-refresh-runner`` by default) over
``settings.topics.refresh_commands``, so it has what every service has:
commit after success, the dead-letter topic ``<topic>.dlq.refresh-runner``
(with error headers) for undecodable messages and invalid commands, retries
with backoff while its state store is unavailable, SIGTERM drain, and
``/metrics`` + ``/healthz``.

Why a worker thread: a refresh may take minutes, and a CancelRefresh for it
arrives on the same topic *after* it (same key, same partition). So
``handle`` never runs Spark itself: it queues the command for the refresh
worker and returns, and the runtime goes on consuming; a CancelRefresh
reaching ``handle`` then interrupts the running refresh (``cancelJobsWithTag``)
or marks a queued one to be skipped. The runtime keeps polling meanwhile, so
the group membership and ``/healthz`` stay live during a long refresh.

Commit after success holds all the same: ``durable_offsets()`` tells the
runtime, per partition, the offset of the oldest command not yet finished,
and the runtime never commits past it. A refresh's outcome (COMPLETED, FAILED,
CANCELED) is final for this command: a failed refresh is retried by the
scheduler with a new attempt, not by redelivery. On SIGTERM the running
refresh is finished (``drain_timeout``), queued ones are left uncommitted and
are redelivered to the next runner.

* A command id already completed (``CompletedStore``) is skipped, so a
  duplicate command (republished after a scheduler crash, or redelivered
  after a runner crash) never refreshes twice.
* Each refresh runs inside ``job_run(...)`` named after the command's header,
  with the command's run id, the workflow as parent run and
  ``header.schedule``: its status and lineage flow back to
  ``settings.topics.jobs``, where the scheduler reads its status.
  With ``install_emitter=False`` the caller owns the emitter: refreshes report
  through the one open on the session, and without one they report nothing
  (a default emitter is never started behind the caller's back).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import logging
import threading
from typing import Any

import sqlalchemy as sa

from lineagewire.config import Settings
from lineagewire.consumers.runtime import ConsumerRuntime, Handler, OutputError, PermanentError, Record, RetryPolicy
from lineagewire.producers.spark.internals import release_thread_connection
from lineagewire.schemas import kind_of

from .exceptions import RefreshCanceled
from .refresh import execute_refresh
from .state import CompletedStore

log = logging.getLogger(__name__)

__all__ = ["RefreshHandler", "RefreshRunner"]

#: remembered cancels of commands not seen yet (a bounded memory)
_MAX_CANCELS = 10_000


class InvalidCommandError(PermanentError):
    """A message on the refresh-commands topic that no refresh can come from: dead-lettered."""


class _Pending:
    """One command handed over by the runtime and not finished yet."""

    __slots__ = ("command", "offset", "tp", "where")

    def __init__(self, tp: tuple[str, int], offset: int, where: str, command: dict[str, Any]) -> None:
        self.tp, self.offset, self.where, self.command = tp, offset, where, command


class RefreshHandler(Handler):
    """Queues RefreshCommands for the refresh worker and applies CancelRefresh; see the module docstring."""

    name = "refresh-runner"

    def __init__(self, spark: Any, settings: Settings, *, state: CompletedStore | None = None,
                 table_format: str = "parquet", install_emitter: bool = True, max_pending: int = 100,
                 drain_timeout: float | None = None) -> None:
        self.spark = spark
        self.settings = settings
        self.state = state if state is not None else CompletedStore()
        self.table_format = table_format
        self.max_pending = max_pending
        self.drain_timeout = drain_timeout
        self._install_emitter = install_emitter
        self._emitter: Any = None
        self._lock = threading.Condition()
        self._queue: collections.deque[_Pending] = collections.deque()  # not started, in offset order
        self._running: _Pending | None = None
        self._canceled: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._closing = False
        self._worker: threading.Thread | None = None
        self.outcomes: list[tuple[str, str]] = []  # (command_id, COMPLETED | FAILED | CANCELED | SKIPPED)
        self.started = threading.Event()  # set by open(): the runtime is about to consume

    # -- the runtime's side (one thread) ---------------------------------------------------------------------------

    def open(self) -> None:
        if self._install_emitter:
            from lineagewire.producers.spark import install

            self._emitter = install(self.spark, settings=self.settings)
        self._worker = threading.Thread(target=self._work, name="lineagewire-refresh-worker", daemon=True)
        self._worker.start()
        self.started.set()

    def handle(self, record: Record) -> int:
        event = record.event
        assert event is not None  # accepts_undecodable is False: the runtime dead-letters those
        kind = kind_of(event)
        if kind == "CancelRefresh":
            self.cancel(event["command_id"], event.get("reason") or "")
        elif kind == "RefreshCommand":
            _validate(event, record.where)
            self._enqueue(record, event)
        elif kind == "RefreshHeld":
            log.debug("%s: %s is held by the scheduler; nothing to run", record.where, event["command_id"])
        else:
            raise InvalidCommandError(f"{record.where}: a {kind} on the refresh-commands topic; expected a "
                                      "RefreshCommand or CancelRefresh")
        return 0

    def _enqueue(self, record: Record, command: dict[str, Any]) -> None:
        cid = command["command_id"]
        try:
            done = self.state.completed(cid)
        except sa.exc.SQLAlchemyError as exc:
            raise OutputError(f"{record.where}: the completed-commands store {self.state.path} failed: {exc}") from exc
        if done:
            log.info("%s: refresh %s of %s already completed; duplicate skipped", record.where, cid, command["table"])
            self.outcomes.append((cid, "SKIPPED"))
            return
        with self._lock:
            if len(self._queue) >= self.max_pending:
                # Backpressure: the runtime retries this record with backoff, its partitions paused.
                raise OutputError(f"{record.where}: {len(self._queue)} refreshes already waiting "
                                  f"(max_pending={self.max_pending})")
            self._queue.append(_Pending((record.topic, record.partition), record.offset, record.where, command))
            self._lock.notify_all()

    def cancel(self, command_id: str, reason: str = "") -> None:
        """Cancel a command: interrupt it if it is running, skip it when its turn comes (or when it arrives)."""
        with self._lock:
            self._canceled[command_id] = reason
            self._canceled.move_to_end(command_id)
            while len(self._canceled) > _MAX_CANCELS:
                self._canceled.popitem(last=False)
            running = self._running is not None and self._running.command["command_id"] == command_id
        if running:
            log.info("cancelling the running refresh %s (%s)", command_id, reason or "no reason given")
            self.spark.sparkContext.cancelJobsWithTag(_tag(command_id))

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        """Per partition, the offset of its oldest unfinished command; every other partition is durable."""
        held = _HeldBack()
        with self._lock:
            for pending in [*([self._running] if self._running else []), *self._queue]:
                held[pending.tp] = min(held.get(pending.tp, pending.offset), pending.offset)
        return held

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        # Not started yet: the new owner gets them from the last commit. A running refresh finishes here.
        gone = set(partitions)
        with self._lock:
            self._queue = collections.deque(p for p in self._queue if p.tp not in gone)

    def close(self) -> None:
        """Finish the running refresh (within ``drain_timeout``); queued ones stay uncommitted for the next runner."""
        with self._lock:
            self._closing = True
            left = len(self._queue)
            self._lock.notify_all()
        if left:
            log.info("stopping: %d queued refresh(es) left uncommitted for the next runner", left)
        try:
            if self._worker is not None:
                self._worker.join(self.drain_timeout)
                if self._worker.is_alive():
                    log.warning("stopping: the running refresh did not end within %.0fs; it stays uncommitted",
                                self.drain_timeout or 0)
        finally:
            if self._emitter is not None:
                self._emitter.close()
            release_thread_connection()  # cancelJobsWithTag ran on this thread

    # -- the refresh worker ----------------------------------------------------------------------------------------

    def _work(self) -> None:
        try:
            while True:
                with self._lock:
                    while not self._queue and not self._closing:
                        self._lock.wait()
                    if self._closing:
                        return
                    self._running = self._queue[0]
                try:
                    self.refresh(self._running.command)
                except Exception:  # noqa: BLE001 - a bug here must not stop the worker; the run reported it
                    log.exception("%s: refresh worker failed", self._running.where)
                finally:
                    with self._lock:
                        if self._queue and self._queue[0] is self._running:
                            self._queue.popleft()
                        self._running = None
        finally:
            release_thread_connection()

    def _status_run(self, job_name: str, **kwargs: Any) -> contextlib.AbstractContextManager[Any]:
        """The refresh's own run on the session's emitter (ours, or the caller's), or nothing without one."""
        from lineagewire.producers.spark import running

        emitter = self._emitter or running(self.spark)
        return emitter.job_run(job_name, **kwargs) if emitter is not None else contextlib.nullcontext()

    def refresh(self, command: dict[str, Any]) -> str:
        """Execute one RefreshCommand on this thread; returns COMPLETED, FAILED, CANCELED or SKIPPED."""
        cid = command["command_id"]
        attempt = command.get("attempt", 1)
        with self._lock:
            if cid in self._canceled:
                log.info("refresh %s of %s was cancelled before it started; skipped", cid, command["table"])
                return self._outcome(cid, "CANCELED")
        h = command["header"]
        sc = self.spark.sparkContext
        tag = _tag(cid)
        sc.setInterruptOnCancel(True)
        sc.addJobTag(tag)
        log.info("refreshing %s for %s (attempt %d, partitions %s)", command["table"],
                 command["nominal_time"].isoformat(), attempt, command.get("static_partitions"))
        try:
            with self._status_run(h["job_name"], namespace=h["job_namespace"], parent=h["parent_run"],
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
        try:
            self.state.mark(cid, attempt)
        except sa.exc.SQLAlchemyError as exc:
            # The refresh is done and reported; only the duplicate guard is lost (a rerun overwrites the same rows).
            log.error("refresh %s completed but could not be recorded in %s: %s", cid, self.state.path, exc)
        return self._outcome(cid, "COMPLETED")

    def _outcome(self, cid: str, what: str) -> str:
        self.outcomes.append((cid, what))
        return what

    def _check_canceled(self, cid: str) -> None:
        with self._lock:
            reason = self._canceled.get(cid)
        if reason is not None:
            raise RefreshCanceled(cid, reason)


class _HeldBack(dict[tuple[str, int], int]):
    """Durable offsets that hold back only the partitions listed: any other partition is durable to its end.

    The runtime commits no partition missing from a handler's answer; records this handler never holds
    (cancels, duplicates, dead letters) must still be committed, so every partition is "in" the answer.
    """

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: tuple[str, int]) -> int:
        return 2**63 - 1


def _tag(command_id: str) -> str:
    return f"lineagewire-refresh-{command_id}"


def _validate(command: dict[str, Any], where: str) -> None:
    """The schema guarantees the types; these are the values no refresh can come from."""
    problems = []
    if not str(command.get("table") or "").strip():
        problems.append("table is empty; expected a table name such as 'mart.daily'")
    if not str(command.get("query") or "").strip():
        problems.append("query is empty; expected the table's defining SELECT")
    if int(command.get("attempt") or 1) < 1:
        problems.append(f"attempt={command.get('attempt')!r}; expected 1 or more")
    bad = [k for k in (command.get("static_partitions") or {}) if not str(k).strip()]
    if bad:
        problems.append("static_partitions has an empty column name")
    if problems:
        raise InvalidCommandError(f"{where}: RefreshCommand {command.get('command_id')!r}: {'; '.join(problems)}")


class RefreshRunner:
    """``RefreshHandler`` on ``ConsumerRuntime``: ``run()`` blocks until ``stop()`` (or SIGTERM with
    ``install_signal_handlers``); ``metrics_port`` serves /metrics and /healthz on 127.0.0.1."""

    def __init__(self, spark: Any, settings: Settings, *, group_id: str = "lineagewire-refresh-runner",
                 state: CompletedStore | None = None, table_format: str = "parquet",
                 consumer_config: dict[str, Any] | None = None, install_emitter: bool = True,
                 metrics_port: int | None = None, retry: RetryPolicy | None = None,
                 drain_timeout: float | None = None) -> None:
        self.handler = RefreshHandler(spark, settings, state=state, table_format=table_format,
                                      install_emitter=install_emitter, drain_timeout=drain_timeout)
        self.runtime = ConsumerRuntime(settings, self.handler, topics=[settings.topics.refresh_commands],
                                       group_id=group_id, metrics_port=metrics_port,
                                       retry=retry or RetryPolicy(initial=0.5, maximum=30.0),
                                       consumer_config=consumer_config)

    @property
    def ready(self) -> threading.Event:
        """Set once the runtime opened the handler and starts consuming."""
        return self.handler.started

    @property
    def outcomes(self) -> list[tuple[str, str]]:
        return self.handler.outcomes

    @property
    def state(self) -> CompletedStore:
        return self.handler.state

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return self.runtime.metrics_address

    def run(self, *, install_signal_handlers: bool = False) -> None:
        """Consume and execute commands until ``stop()``."""
        self.runtime.run(install_signal_handlers=install_signal_handlers)

    def stop(self) -> None:
        self.runtime.stop()

    def cancel(self, command_id: str, reason: str = "") -> None:
        """Cancel a command directly (as a CancelRefresh on the topic does)."""
        self.handler.cancel(command_id, reason)
