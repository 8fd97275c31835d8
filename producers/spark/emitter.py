"""The emitter: one per SparkSession; turns Spark's callbacks into contract events for the listeners.

Where the parts live:

* ``hooks.py`` registers Spark's listeners and calls the ``SparkCallbacks``
  protocol (``callbacks.py``), which ``Emitter`` implements;
* ``actions.py``: Spark actions to ``ActionLineageEvent`` on the actions worker;
* ``streaming.py``: streaming queries as runs of their own;
* ``connect.py``: Spark Connect client sessions as runs of their own;
* ``process_hooks.py``: excepthook, atexit and ``SparkContext.stop``;
* this module: the runs, the listeners, redaction, flush and close, and the
  public entry points ``install`` and ``job_run``.

Threads, and why:

* Spark's listener bus calls the hooks; they hand the ``QueryExecution`` to the
  **actions** worker (a bounded queue) and return.
* The actions worker extracts lineage within ``time_budget_ms`` and builds the
  ``ActionLineageEvent`` (split when oversized).
* Each listener has its own bounded worker (``listeners.executor``): a slow or
  failing listener drops only its own events, with a counted warning.
* The job's thread only ever builds small status events and enqueues them.

Every event is redacted (``lineagewire.redact``, plus the ``redact_patterns``
and ``redact_keys`` settings) before any listener sees it: secrets in conf
values, SQL text, URLs or error messages never leave the driver.

Run model: installing the emitter starts the **application run** (a
``JobCreatedEvent`` with the spec snapshot, then CREATED → RUNNING); it ends at
``close()``, ``SparkContext.stop()`` or interpreter exit with FINISHED, or
FAILED when the script dies of an uncaught exception (error class, message,
stack), or CANCELED on Ctrl-C. ``job_run()`` blocks are runs of their own with
the application run (or the given run) as parent; every Spark action inside
one gets its ``ActionLineageEvent`` in that run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from lineagewire.config import Settings, load_settings
from lineagewire.schemas import Codec, job_spec
from lineagewire.schemas.events import ErrorInfo, RunRef, ScheduleRef

from . import internals, process_hooks, versions
from .actions import ActionLineage
from .callbacks import RddJobCallbacks, SparkCallbacks
from .config import CONF_PREFIX, EmitterConfig, conf_snapshot, resolve_config
from .connect import ConnectRuns
from .exceptions import EmitterError
from .hooks import SparkHooks
from .listeners.base import JobStatusListener, ListenerContext
from .listeners.executor import BoundedExecutor
from .listeners.registry import load_factory
from .parents import CONF_KEYS, orchestrator_parents
from .runs import Run, error_info, is_cancellation
from .streaming import StreamingRuns, jvm_query

log = logging.getLogger(__name__)

__all__ = ["Emitter", "install", "job_run"]

RUN_ID_PROPERTY = "spark.lineagewire.run_id"


class Emitter(SparkCallbacks, RddJobCallbacks):
    """Publishes one SparkSession's runs, statuses and action lineage to the configured listeners.

    Made by ``install()``; ``close(timeout)`` ends the application run, removes
    every hook from the session and flushes within the timeout. It implements
    ``SparkCallbacks``, the protocol the Spark hooks call.
    """

    def __init__(self, spark: Any, config: EmitterConfig, settings: Settings,
                 properties: dict[str, str] | None = None, *, connect_runs: bool = True,
                 parents: tuple[RunRef | None, RunRef | None] = (None, None)) -> None:
        self.spark = spark
        self.config = config
        self.settings = settings
        self.closed = False  # no more callbacks taken (hooks removed)
        self._closing = False
        self.spark_context = spark.sparkContext
        self._lock = threading.RLock()
        self._stack: list[Run] = []
        # Secrets never leave the driver: every event is redacted before any listener sees it.
        self._redactor = config.redactor()
        self.events = 0
        self._spec = self._spec_snapshot()
        # An orchestrator's task run (and its DAG run) above the application: Airflow's conf keys (parents.py).
        self.app_run = Run(config.namespace, config.job_name or self._spec["application_name"], config.run_id,
                           parent=parents[0], root_parent=parents[1])
        self._listeners = self._start_listeners(properties or {})
        self._actions = ActionLineage(config, self._redactor, self._send_action,
                                      codec=Codec(schema_registry_url=settings.schema_registry_url,
                                                  registry_config=settings.registry_config()),
                                      topic=config.topic or settings.topics.jobs)
        self._streams = StreamingRuns(config.namespace, self.app_run, self._spec, heartbeat=config.heartbeat,
                                      lock=self._lock, start=self._emit_start, end=self._end, actions=self._actions,
                                      find_query=functools.partial(jvm_query, spark))
        self._connect = ConnectRuns(config.namespace, self.app_run, self._spec, per_session=connect_runs,
                                    lock=self._lock, start=self._emit_start, end=self._end)
        self._emit_start(self.app_run, self._spec)
        try:
            # Kept before install(): if install fails halfway, close() still reaches what it registered.
            self._hooks = SparkHooks(self, spark, spark_listener=config.spark_listener,
                                     streaming_listener=config.streaming_listener, javac=config.javac)
            self._hooks.install()
        except Exception as exc:
            self.close(0.5)
            raise EmitterError(f"could not register the Spark listeners on {spark!r}: {exc}") from exc

    # -- setup -----------------------------------------------------------------------------------

    def _spec_snapshot(self) -> dict[str, Any]:
        sc = self.spark_context
        conf = dict(sc.getConf().getAll())
        return dict(job_spec(
            sc.appName, self.spark.version, application_id=sc.applicationId, master=sc.master,
            deploy_mode=conf.get("spark.submit.deployMode"), parallelism=sc.defaultParallelism,
            conf=conf_snapshot(conf, self._redactor), job_type="BATCH"))

    def _start_listeners(self, properties: dict[str, str]) -> list[tuple[str, JobStatusListener, BoundedExecutor]]:
        # Resolve every name before creating any, so an unknown name fails before anything runs.
        factories = [(name, load_factory(name)) for name in self.config.listeners]
        started: list[tuple[str, JobStatusListener, BoundedExecutor]] = []
        try:
            for name, factory in factories:
                executor = BoundedExecutor(name, self.config.queue_size)
                ctx = ListenerContext(name=name, config=self.config, settings=self.settings, executor=executor,
                                      app_name=self.app_run.job_name, properties=properties)
                try:
                    listener = factory.create_listener(ctx)
                except BaseException:
                    executor.shutdown(0)
                    raise
                started.append((name, listener, executor))
        except Exception as exc:
            for _name, listener, executor in started:
                executor.shutdown(0)
                with contextlib.suppress(Exception):
                    listener.close(0)
            if isinstance(exc, EmitterError):
                raise
            raise EmitterError(f"listener {name!r} could not start: {exc}") from exc
        return started

    # -- dispatch --------------------------------------------------------------------------------

    def _dispatch(self, event: dict[str, Any] | None, *, redacted: bool = False) -> None:
        if event is None:
            return
        if not redacted:
            event = self._redactor.mapping(event)
        self.events += 1
        for _name, listener, executor in self._listeners:
            executor.submit(listener.on_event, event)

    def _send_action(self, run: Run, event: dict[str, Any]) -> None:
        with self._lock:
            run.actions += 1
            # Numbered under the lock so that every listener sees a run's events in sequence order.
            for part in self._actions.numbered_parts(run, event):
                self._dispatch(part, redacted=True)

    def _emit_start(self, run: Run, spec: dict[str, Any]) -> None:
        with self._lock:
            self._dispatch(run.created(spec))  # type: ignore[arg-type]
            self._dispatch(run.transition("RUNNING"))

    def _end(self, run: Run, status: str, error: ErrorInfo | None = None) -> None:
        with self._lock:
            self._dispatch(run.transition(status, error=error))

    # -- runs ------------------------------------------------------------------------------------

    def current_run(self) -> Run:
        """The innermost open ``job_run()``, else the application run."""
        with self._lock:
            return self._stack[-1] if self._stack else self.app_run

    def start_run(self, job_name: str, *, namespace: str | None = None, parent: RunRef | None = None,
                  schedule: ScheduleRef | None = None, run_id: str | None = None,
                  tags: dict[str, str] | None = None, sql: str | None = None, job_type: str = "BATCH") -> Run:
        """Begin a run (JobCreatedEvent, CREATED → RUNNING); end it with ``end_run``. ``job_run()`` does both."""
        run = Run(namespace or self.config.namespace, job_name, run_id,
                  parent=parent if parent is not None else self.app_run.ref, schedule=schedule,
                  root_parent=None if parent is not None else self.app_run.child_root)
        spec = {**self._spec, "sql": sql, "tags": dict(tags or {}), "job_type": job_type}
        with self._lock:
            self._stack.append(run)
            self._emit_start(run, spec)
        run._previous_property = self._set_run_property(run.run_id)  # type: ignore[attr-defined]
        return run

    def end_run(self, run: Run, exc: BaseException | None = None) -> None:
        """End ``run``: FINISHED, or FAILED with the error, or CANCELED for interrupts and cancelled jobs."""
        budget = min(2.0, self.config.flush_timeout)
        if not self.closed:
            # Callbacks of this run's actions may still be on Spark's bus: let them land in this run.
            deadline = time.monotonic() + budget
            self._hooks.wait_for_bus(budget)
            self._actions.drain(max(0.0, deadline - time.monotonic()))
        self._set_run_property(getattr(run, "_previous_property", None))
        if exc is None or (isinstance(exc, SystemExit) and exc.code in (0, None)):
            status, error = "FINISHED", None
        elif is_cancellation(exc):
            status, error = "CANCELED", error_info(exc)
        else:
            status, error = "FAILED", error_info(exc)
        with self._lock:
            if run in self._stack:
                self._stack.remove(run)
            self._end(run, status, error)

    @contextlib.contextmanager
    def job_run(self, job_name: str, **kwargs: Any) -> Iterator[Run]:
        """``with emitter.job_run("name", ...) as run:`` — see the module-level ``job_run``."""
        run = self.start_run(job_name, **kwargs)
        try:
            yield run
        except BaseException as exc:
            self.end_run(run, exc)
            raise
        self.end_run(run)

    def _set_run_property(self, value: str | None) -> str | None:
        # The JVM thread-local property reaches every Spark job of this thread, so the run id shows in the
        # Spark UI and event logs next to the jobs it ran.
        try:
            previous = self.spark_context.getLocalProperty(RUN_ID_PROPERTY)
            self.spark_context.setLocalProperty(RUN_ID_PROPERTY, value)
            return previous
        except Exception:  # noqa: BLE001 - a stopped context: attribution falls back to the open run
            return None

    # -- SparkCallbacks (listener-bus threads: hand off and return) -----------------------------

    def on_action(self, func_name: str, qe: Any, duration_ns: int | None, exception: Any) -> None:
        """A Spark action ended: its lineage is extracted on the actions worker, in the run open now."""
        if not self.closed:
            self._actions.submit(self.current_run(), func_name, qe, duration_ns, exception)

    def on_rdd_job(self, job: str, exception: Any) -> None:
        """A Spark job of an RDD action (no SQL query) ended: its event is built on the actions worker, in the run
        open now."""
        if not self.closed:
            self._actions.submit_rdd_job(self.current_run(), job, exception)

    def on_application_end(self) -> None:
        """The context stopped from the JVM side: the runs end now, as the process does (FINISHED, or CANCELED for
        a process told to stop); listeners flush at close() or exit."""
        status, error = process_hooks.exit_status()
        with self._lock:
            for run in reversed(self._stack):
                self._end(run, status, error)
            self._connect.end_all(status, error)
            self._end(self.app_run, status, error)

    def on_connect_event(self, kind: str, fields: dict[str, Any]) -> None:
        """A Spark Connect server event: a client session's first operation starts its run, closing it ends it."""
        if not self.closed:
            self._connect.event(kind, fields)

    def on_connect_action(self, session_id: str, func_name: str, qe: Any, duration_ns: int | None,
                          exception: Any) -> None:
        """An action of a Connect client session: in the session's run (else the run open now)."""
        if not self.closed:
            run = self._connect.run_of(session_id) or self.current_run()
            self._actions.submit(run, func_name, qe, duration_ns, exception)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the SparkListener is registered (it may be compiling); False on timeout.

        A Connect server waits for it before taking clients: the listener is what sees their sessions.
        """
        return self._hooks.spark_listener_ready.wait(timeout)

    def on_stream_started(self, event: Any) -> None:
        """A streaming query started: a run of its own."""
        if not self.closed:
            self._streams.started(event)

    def on_stream_progress(self, event: Any) -> None:
        """A micro-batch ended: an ActionLineageEvent at most every ``heartbeat`` seconds."""
        if not self.closed:
            self._streams.progress(event)

    def on_stream_terminated(self, event: Any) -> None:
        """A streaming query stopped: its run ends."""
        self._streams.terminated(event)

    @property
    def actions(self) -> int:
        """Spark actions taken by the actions worker."""
        return self._actions.processed

    @property
    def actions_skipped(self) -> int:
        """Spark actions sent without lineage because the actions queue was full."""
        return self._actions.skipped

    # -- flush and close -------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until past actions are processed and every listener has handled its queue; False on timeout."""
        deadline = time.monotonic() + (self.config.flush_timeout if timeout is None else timeout)
        if not self.closed:
            self._hooks.wait_for_bus(max(0.0, deadline - time.monotonic()))
        ok = self._actions.drain(max(0.0, deadline - time.monotonic()))
        for _name, _listener, executor in self._listeners:
            ok = executor.drain(max(0.0, deadline - time.monotonic())) and ok
        return ok

    def stats(self) -> dict[str, Any]:
        """Counters: events made, actions seen and skipped, Spark jobs, per listener handled / failed / dropped.

        ``stream_progress``: streaming progress callbacks received and sent as events (the rest throttled);
        ``spark_jobs`` (started, succeeded, failed) comes from the SparkListener, None without one;
        ``spark_listener`` says which one runs: "jvm", "py4j" (the fallback) or None;
        ``connect_operations``: Spark Connect operations the server reported (started, failed).
        """
        hooks = getattr(self, "_hooks", None)
        return {"events": self.events, "actions": self.actions, "actions_skipped": self.actions_skipped,
                "spark_jobs": hooks.job_counts() if hooks is not None else None,
                "spark_listener": hooks.spark_listener_kind if hooks is not None else None,
                "stream_progress": {"seen": self._streams.progress_seen, "sent": self._streams.progress_sent},
                "connect_operations": {"started": self._connect.operations, "failed": self._connect.operations_failed},
                "listeners": {name: {"handled": ex.done, "failed": ex.failed, "dropped": ex.dropped}
                              for name, _l, ex in self._listeners}}

    def close(self, timeout: float | None = None, *, status: str | None = None,
              error: ErrorInfo | None = None) -> None:
        """End open runs, unregister every hook from the session, flush listeners within ``timeout`` seconds.

        ``status`` is the application run's final status (default FINISHED, or
        FAILED / CANCELED when the interpreter is dying of an exception).
        Never raises; safe to call twice.
        """
        with self._lock:
            if self._closing:
                return
            self._closing = True
        timeout = self.config.flush_timeout if timeout is None else timeout
        # The first half of the timeout is the actions': those still on Spark's bus, then their extraction, cut
        # short at the half; a quarter more for the cut extraction to return. The listeners keep the rest.
        start = time.monotonic()
        deadline, actions_cut, actions_end = start + timeout, start + timeout / 2, start + timeout * 3 / 4
        if status is None:
            status, exit_error = process_hooks.exit_status()
            error = error or exit_error
        # A process being stopped (SIGTERM from YARN or Kubernetes, Ctrl-C) has only the grace its cluster manager
        # gives it, 250 ms on YARN: its runs end first, and the actions go out after them in what is left.
        stopped = status == "CANCELED"
        if stopped:
            self._end_all(status, error)
        hooks = getattr(self, "_hooks", None)
        if hooks is not None:
            # Callbacks still on Spark's bus belong to actions that ran before close(): take them first.
            hooks.wait_for_bus(max(0.0, actions_cut - time.monotonic()))
            hooks.remove()
        self.closed = True
        now = time.monotonic()
        self._actions.shutdown(max(0.0, actions_cut - now), max(0.0, actions_end - now))
        if not stopped:
            self._end_all(status, error)
        for _name, listener, executor in self._listeners:
            closer = functools.partial(_close_listener, listener, deadline)
            if not executor.submit(closer):
                closer()
        for name, _listener, executor in self._listeners:
            if not executor.shutdown(max(0.0, deadline - time.monotonic())):
                # pending() counts the close itself too: the kafka listener's close waits for the broker while the
                # events it took wait in its outbox (sent by the next start), so "dropped" would be wrong there.
                log.warning("listener %r did not finish within the flush timeout (%.1fs): %d of its tasks (events, "
                            "or its close) were unfinished, %d event(s) dropped before", name,
                            self.config.flush_timeout, executor.pending(), executor.dropped)
        with process_hooks.INSTALL_LOCK:
            process_hooks.unregister(self)
            if getattr(self.spark, "_lineagewire_emitter", None) is self:
                self.spark._lineagewire_emitter = None

    def _end_all(self, status: str, error: ErrorInfo | None) -> None:
        """End the open ``job_run()`` blocks (CANCELED if the application FINISHED), streams, Connect sessions and
        the application run with ``status``."""
        with self._lock:
            for run in reversed(self._stack):
                self._end(run, status if status != "FINISHED" else "CANCELED",
                          error or {"error_class": "lineagewire.RunNotEnded",
                                    "message": "the emitter closed while this run was open", "stack_trace": None})
            self._stack.clear()
            self._streams.cancel_all()
            self._connect.end_all(status, error)
            self._end(self.app_run, status, error)

    def __enter__(self) -> Emitter:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.close()
        else:
            self.close(status="CANCELED" if is_cancellation(exc) else "FAILED", error=error_info(exc))


def _close_listener(listener: JobStatusListener, deadline: float) -> None:
    listener.close(max(0.0, deadline - time.monotonic()))


# -- the public entry points ---------------------------------------------------------------------

def install(spark: Any, *, settings: Settings | None = None, listeners: list[str] | None = None,
            job_namespace: str | None = None, job_name: str | None = None,
            config: dict[str, str] | None = None, connect_runs: bool = True) -> Emitter:
    """Start emitting for ``spark``; the same Emitter again if one is already running on it.

    Arguments that are None come from ``spark.lineagewire.*`` conf keys, then
    ``LINEAGEWIRE_EMITTER__*`` environment variables, then defaults (see ``config.py``).
    ``listeners=[]`` starts none. Raises ``UnknownListenerError`` (listing the
    available names), ``EmitterConfigError`` or ``UnsupportedSparkError`` (a Spark before 3.5,
    ``versions.py``) before anything starts.
    ``connect_runs``: a Spark Connect server on this session gives each client session a run of
    its own (``connect.py``); False puts the clients' actions in the open run, as a classic session's.
    """
    with process_hooks.INSTALL_LOCK:
        existing = running(spark)
        if existing is not None:
            return existing
        sc = spark.sparkContext
        versions.check(str(sc.version), sc.getConf().get("spark.jars.packages", ""), internals.context_jvm(sc))
        conf = {k: v for k, v in sc.getConf().getAll() if k.startswith(CONF_PREFIX)}
        orchestrator = {k: v for k in CONF_KEYS if (v := spark.conf.get(k, None))}
        cfg = resolve_config(spark_conf=conf, config=config, listeners=listeners, namespace=job_namespace,
                             job_name=job_name)
        settings = _kafka_settings(settings, cfg, conf, config or {})
        emitter = Emitter(spark, cfg, settings, conf, connect_runs=connect_runs,
                          parents=orchestrator_parents(orchestrator, os.environ))
        spark._lineagewire_emitter = emitter
        process_hooks.register(emitter)
        return emitter


def running(spark: Any) -> Emitter | None:
    """The emitter open on ``spark``, or None: for code that reports through the user's emitter if there is one."""
    emitter = getattr(spark, "_lineagewire_emitter", None)
    return emitter if emitter is not None and not emitter._closing else None


def _kafka_settings(settings: Settings | None, cfg: EmitterConfig, conf: dict[str, str],
                    config: dict[str, str]) -> Settings:
    if settings is None:
        settings = load_settings(bootstrap_servers=cfg.bootstrap_servers)
    else:
        # Given settings win over the environment; only conf keys and install()'s config may still override.
        explicit = {**conf, **config}
        servers = explicit.get(CONF_PREFIX + "bootstrap_servers") or explicit.get("bootstrap_servers")
        if servers:
            settings = settings.model_copy(update={"bootstrap_servers": servers})
        topic = explicit.get(CONF_PREFIX + "topic") or explicit.get("topic")
        cfg.topic = topic or None
    if cfg.topic:
        settings = settings.model_copy(update={"topics": settings.topics.model_copy(update={"jobs": cfg.topic})})
    return settings


@contextlib.contextmanager
def job_run(spark: Any, job_name: str, *, namespace: str | None = None, parent: RunRef | None = None,
            schedule: ScheduleRef | None = None, run_id: str | None = None, tags: dict[str, str] | None = None,
            sql: str | None = None) -> Iterator[Run]:
    """A named run around a block: ``with job_run(spark, "daily orders") as run: ...``.

    Installs the emitter if needed. At enter: ``JobCreatedEvent`` and
    CREATED → RUNNING; at exit FINISHED, FAILED (with the error) or CANCELED,
    and the exception goes on. Every event of the run carries ``parent`` (default:
    the application run) and ``schedule``; each Spark action inside gets an
    ``ActionLineageEvent`` whose ``header.parent_run`` is this run. ``run_id`` is
    used as given (default: a new UUID).
    """
    emitter = install(spark)
    with emitter.job_run(job_name, namespace=namespace, parent=parent, schedule=schedule, run_id=run_id,
                         tags=tags, sql=sql) as run:
        yield run
