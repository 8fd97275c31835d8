"""The emitter: one per SparkSession; turns Spark's callbacks into contract events for the listeners.

Threads, and why:

* Spark's listener bus calls the hooks (``hooks.py``); they hand the
  ``QueryExecution`` to the **actions** worker (a bounded queue) and return.
* The actions worker extracts lineage within ``time_budget_ms`` and builds the
  ``ActionLineageEvent`` (split when oversized).
* Each listener has its own bounded worker (``listeners.executor``): a slow or
  failing listener drops only its own events, with a counted warning.
* The job's thread only ever builds small status events and enqueues them.

Run model: installing the emitter starts the **application run** (a
``JobCreatedEvent`` with the spec snapshot, then CREATED → RUNNING); it ends at
``close()``, ``SparkContext.stop()`` or interpreter exit with FINISHED, or
FAILED when the script dies of an uncaught exception (error class, message,
stack), or CANCELED on Ctrl-C. ``job_run()`` blocks are runs of their own with
the application run (or the given run) as parent; every Spark action inside
one gets its ``ActionLineageEvent`` in that run.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from lineagewire.config import Settings, load_settings
from lineagewire.schemas import Codec, action_lineage, dataset, job_spec
from lineagewire.schemas.events import ErrorInfo, RunRef, ScheduleRef

from ._py4j import release_thread_connection
from .config import CONF_PREFIX, EmitterConfig, conf_snapshot, resolve_config
from .exceptions import EmitterError
from .hooks import SparkHooks
from .listeners.base import JobStatusListener, ListenerContext
from .listeners.executor import BoundedExecutor
from .listeners.registry import load_factory
from .runs import Run, error_info, is_cancellation
from .split import split_action_lineage

log = logging.getLogger(__name__)

__all__ = ["Emitter", "install", "job_run"]

RUN_ID_PROPERTY = "spark.lineagewire.run_id"

_INSTALL_LOCK = threading.RLock()
_ACTIVE: list[Emitter] = []
_process_hooks_installed = False
_uncaught: BaseException | None = None


def _extractor() -> Any:
    """``extract_action_lineage`` if the lineage package is there, else None."""
    try:
        from lineagewire.producers.spark.lineage import extract_action_lineage
    except ImportError:
        return None
    return extract_action_lineage


class Emitter:
    """Publishes one SparkSession's runs, statuses and action lineage to the configured listeners.

    Made by ``install()``; ``close(timeout)`` ends the application run, removes
    every hook from the session and flushes within the timeout.
    """

    def __init__(self, spark: Any, config: EmitterConfig, settings: Settings,
                 properties: dict[str, str] | None = None) -> None:
        self.spark = spark
        self.config = config
        self.settings = settings
        self.closed = False  # no more callbacks taken (hooks removed)
        self._closing = False
        self._sc = spark.sparkContext
        self._lock = threading.RLock()
        self._stack: list[Run] = []
        self._streams: dict[str, tuple[Run, float]] = {}
        self._codec = Codec()
        self.events = 0
        self.actions = 0
        self.actions_skipped = 0
        self._spec = self._spec_snapshot()
        self.app_run = Run(config.namespace, config.job_name or self._spec["application_name"], config.run_id)
        self._listeners = self._start_listeners(properties or {})
        self._actions = BoundedExecutor("actions", config.action_queue_size, on_exit=release_thread_connection)
        self._emit_start(self.app_run, self._spec)
        try:
            self._hooks = SparkHooks(self, spark, spark_listener=config.spark_listener,
                                     streaming_listener=config.streaming_listener, javac=config.javac)
        except Exception as exc:
            self.close(0.5)
            raise EmitterError(f"could not register the Spark listeners on {spark!r}: {exc}") from exc

    # -- setup -----------------------------------------------------------------------------------

    def _spec_snapshot(self) -> dict[str, Any]:
        sc = self._sc
        conf = dict(sc.getConf().getAll())
        return dict(job_spec(
            sc.appName, self.spark.version, application_id=sc.applicationId, master=sc.master,
            deploy_mode=conf.get("spark.submit.deployMode"), parallelism=sc.defaultParallelism,
            conf=conf_snapshot(conf), job_type="BATCH"))

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

    def _dispatch(self, event: dict[str, Any] | None) -> None:
        if event is None:
            return
        self.events += 1
        for _name, listener, executor in self._listeners:
            executor.submit(listener.on_event, event)

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
                  parent=parent if parent is not None else self.app_run.ref, schedule=schedule)
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
            previous = self._sc.getLocalProperty(RUN_ID_PROPERTY)
            self._sc.setLocalProperty(RUN_ID_PROPERTY, value)  # type: ignore[arg-type]
            return previous
        except Exception:  # noqa: BLE001 - a stopped context: attribution falls back to the open run
            return None

    # -- Spark callbacks (listener-bus threads: hand off and return) -----------------------------

    def _on_action(self, func_name: str, qe: Any, duration_ns: int | None, exception: Any) -> None:
        if self.closed:
            return
        run = self.current_run()
        if not self._actions.submit(self._process_action, run, func_name, qe, duration_ns, exception):
            self.actions_skipped += 1
            self._publish_action(run, func_name, None, duration_ns, _java_error(exception) if exception else None,
                                 "action queue full: lineage not extracted")

    def _on_application_end(self) -> None:
        # The context stopped from the JVM side: the runs end now; listeners flush at close() or exit.
        with self._lock:
            for run in reversed(self._stack):
                self._end(run, "FINISHED")
            self._end(self.app_run, _exit_status()[0], _exit_status()[1])

    # -- the actions worker ----------------------------------------------------------------------

    def _process_action(self, run: Run, func_name: str, qe: Any, duration_ns: int | None, exception: Any) -> None:
        self.actions += 1
        budget_s = self.config.time_budget_ms / 1000
        error = _java_error(exception) if exception is not None else None
        extract = _extractor()
        if extract is None:
            self._publish_action(run, func_name, None, duration_ns, error, "lineage extractor unavailable")
            return
        started = time.perf_counter()
        try:
            result = extract(qe, func_name, budget_s=budget_s)
        except Exception as exc:  # noqa: BLE001 - the contract says it never raises; the job must not care
            log.warning("lineage extraction of %s failed: %r", func_name, exc)
            self._publish_action(run, func_name, None, duration_ns, error, f"lineage extraction failed: {exc!r}")
            return
        elapsed = time.perf_counter() - started
        reason = None
        if elapsed > budget_s and getattr(result, "complete", False):
            reason = f"lineage extraction took {elapsed * 1000:.0f} ms, over the {budget_s * 1000:.0f} ms budget"
        self._publish_action(run, func_name, result, duration_ns, error, reason)

    def _publish_action(self, run: Run, func_name: str, result: Any, duration_ns: int | None,
                        error: ErrorInfo | None, reason: str | None, *, status: str | None = None,
                        action_id: str | None = None) -> None:
        complete = bool(result is not None and result.complete and reason is None)
        reasons = [r for r in (getattr(result, "incomplete_reason", None), reason) if r]
        event = dict(action_lineage(
            run.draft_header("ActionLineageEvent", parent=run.ref),  # each part gets its numbered header below
            action_id or str(uuid.uuid4()), func_name,
            action_status=status or ("FAILED" if error else "SUCCEEDED"),  # type: ignore[arg-type]
            inputs=list(result.inputs) if result is not None else [],
            outputs=list(result.outputs) if result is not None else [],
            column_lineage=list(result.column_lineage) if result is not None else [],
            plan_node=getattr(result, "plan_node", None), sql=getattr(result, "sql", None),
            duration_ms=int(duration_ns / 1e6) if duration_ns is not None else None,
            lineage_complete=complete, incomplete_reason="; ".join(reasons) or None, error=error))
        try:
            parts = split_action_lineage(event, self._size, self.config.max_event_bytes)
        except Exception as exc:  # noqa: BLE001 - an unencodable event: say so rather than lose the action
            log.warning("action %s: lineage event cannot be encoded (%s); sent without lineage", func_name, exc)
            parts = [{**event, "inputs": [], "outputs": [], "column_lineage": [], "lineage_complete": False,
                      "incomplete_reason": f"lineage not encodable: {exc}"}]
        with self._lock:
            run.actions += 1
            for part in parts:
                # Numbered under the lock so that every listener sees a run's events in sequence order.
                part["header"] = run.header("ActionLineageEvent", parent=run.ref)
                self._dispatch(part)

    def _size(self, event: dict[str, Any]) -> int:
        return len(self._codec.encode(event))

    # -- streaming (PySpark's StreamingQueryListener) --------------------------------------------

    def _on_stream_started(self, event: Any) -> None:
        if self.closed:
            return
        name = event.name or f"{self.app_run.job_name}.stream.{event.id}"
        run = Run(self.config.namespace, name, str(event.runId), parent=self.app_run.ref)
        with self._lock:
            self._streams[str(event.id)] = (run, float("-inf"))  # the first progress always goes
            self._emit_start(run, {**self._spec, "job_type": "STREAMING"})

    def _on_stream_progress(self, event: Any) -> None:
        if self.closed:
            return
        progress = event.progress
        key = str(progress.id)
        with self._lock:
            entry = self._streams.get(key)
            now = time.monotonic()
            if entry is None or now - entry[1] < self.config.heartbeat:
                return
            self._streams[key] = (entry[0], now)
        self._actions.submit(self._process_progress, entry[0], progress)

    def _process_progress(self, run: Run, progress: Any) -> None:
        inputs = [_described(s.description, "CONTINUOUS_UNBOUNDED") for s in progress.sources]
        outputs = [_described(progress.sink.description, "CONTINUOUS_UNBOUNDED")]
        result = _Described(inputs, outputs)
        self._publish_action(run, "microBatch", result, int(progress.batchDuration) * 1_000_000, None,
                             "streaming progress: datasets named from source and sink descriptions",
                             status="RUNNING", action_id=f"{progress.runId}:{progress.batchId}")

    def _on_stream_terminated(self, event: Any) -> None:
        with self._lock:
            entry = self._streams.pop(str(event.id), None)
            if entry is None:
                return
            error: ErrorInfo | None = None
            if event.exception:
                error = {"error_class": event.errorClassOnException or "StreamingQueryException",
                         "message": str(event.exception).splitlines()[0][:2000],
                         "stack_trace": str(event.exception)[-32_000:]}
            self._end(entry[0], "FAILED" if error else "FINISHED", error)

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

        ``spark_jobs`` (started, succeeded, failed) comes from the SparkListener, None without one;
        ``spark_listener`` says which one runs: "jvm", "py4j" (the fallback) or None.
        """
        hooks = getattr(self, "_hooks", None)
        return {"events": self.events, "actions": self.actions, "actions_skipped": self.actions_skipped,
                "spark_jobs": hooks.job_counts() if hooks is not None else None,
                "spark_listener": hooks.spark_listener_kind if hooks is not None else None,
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
        deadline = time.monotonic() + (self.config.flush_timeout if timeout is None else timeout)
        hooks = getattr(self, "_hooks", None)
        if hooks is not None:
            # Callbacks still on Spark's bus belong to actions that ran before close(): take them first.
            hooks.wait_for_bus(min(2.0, max(0.0, deadline - time.monotonic())))
            hooks.remove()
        self.closed = True
        self._actions.shutdown(max(0.0, deadline - time.monotonic()))
        if status is None:
            status, exit_error = _exit_status()
            error = error or exit_error
        with self._lock:
            for run in reversed(self._stack):
                self._end(run, status if status != "FINISHED" else "CANCELED",
                          error or {"error_class": "lineagewire.RunNotEnded",
                                    "message": "the emitter closed while this run was open", "stack_trace": None})
            self._stack.clear()
            for run, _t in self._streams.values():
                self._end(run, "CANCELED")
            self._streams.clear()
            self._end(self.app_run, status, error)
        for _name, listener, executor in self._listeners:
            closer = functools.partial(_close_listener, listener, deadline)
            if not executor.submit(closer):
                closer()
        for name, _listener, executor in self._listeners:
            if not executor.shutdown(max(0.0, deadline - time.monotonic())):
                log.warning("listener %r did not finish within the flush timeout (%.1fs); %d event(s) dropped",
                            name, self.config.flush_timeout, executor.pending() + executor.dropped)
        with _INSTALL_LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            if getattr(self.spark, "_lineagewire_emitter", None) is self:
                self.spark._lineagewire_emitter = None

    def __enter__(self) -> Emitter:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.close()
        else:
            self.close(status="CANCELED" if is_cancellation(exc) else "FAILED", error=error_info(exc))


def _close_listener(listener: JobStatusListener, deadline: float) -> None:
    listener.close(max(0.0, deadline - time.monotonic()))


class _Described:
    """A lineage result made from streaming descriptions (the extractor's ``ActionLineage`` shape)."""

    def __init__(self, inputs: list[Any], outputs: list[Any]) -> None:
        self.inputs, self.outputs, self.column_lineage = inputs, outputs, []
        self.plan_node, self.sql, self.complete, self.incomplete_reason = None, None, False, None


def _described(description: str, boundedness: str) -> Any:
    """A dataset named from a streaming source or sink description such as ``FileStreamSource[file:/x]``."""
    kind, _, rest = description.partition("[")
    inner = rest.rsplit("]", 1)[0] if rest else ""
    if kind.startswith("FileStream") or kind == "FileSink":
        path = inner.removeprefix("file:")
        return dataset("file", path, boundedness=boundedness)  # type: ignore[arg-type]
    if kind.startswith("Kafka") and "[" in inner:
        return dataset("kafka", inner.split("[", 1)[1].rstrip("]"), boundedness=boundedness)  # type: ignore[arg-type]
    return dataset("spark", description[:200], boundedness=boundedness)  # type: ignore[arg-type]


def _java_error(exc: Any) -> ErrorInfo:
    """Class, message and stack of a Java throwable (py4j object)."""
    try:
        cls = exc.getClass().getName()
        message = exc.getMessage() or cls
        try:
            stack = exc.toString() + "\n" + "\n".join(f"\tat {e.toString()}" for e in list(exc.getStackTrace())[:50])
        except Exception:  # noqa: BLE001
            stack = None
        return {"error_class": cls, "message": str(message)[:8000], "stack_trace": stack}
    except Exception as err:  # noqa: BLE001 - the JVM may be going away
        return {"error_class": "unknown", "message": f"error not readable: {err!r}", "stack_trace": None}


def _exit_status() -> tuple[str, ErrorInfo | None]:
    if _uncaught is None:
        return "FINISHED", None
    return ("CANCELED" if is_cancellation(_uncaught) else "FAILED"), error_info(_uncaught)


# -- process-wide hooks: stop(), uncaught exceptions, interpreter exit ------------------------------

def _install_process_hooks() -> None:
    global _process_hooks_installed
    if _process_hooks_installed:
        return
    _process_hooks_installed = True
    previous_hook = sys.excepthook

    def excepthook(exc_type: Any, exc: BaseException, tb: Any) -> None:
        global _uncaught
        _uncaught = exc
        previous_hook(exc_type, exc, tb)

    sys.excepthook = excepthook
    # Registered after PySpark's own atexit (which kills the JVM), so it runs before it: the JVM is still there.
    atexit.register(_close_all)

    from pyspark import SparkContext

    original_stop = SparkContext.stop
    if getattr(original_stop, "_lineagewire", False):
        return

    @functools.wraps(original_stop)
    def stop(self: Any, *args: Any, **kwargs: Any) -> Any:
        for emitter in [e for e in list(_ACTIVE) if e._sc is self]:
            try:
                emitter.close()
            except Exception:  # noqa: BLE001 - never stand in the way of stop()
                log.exception("closing the lineagewire emitter at SparkContext.stop() failed")
        return original_stop(self, *args, **kwargs)

    stop._lineagewire = True  # type: ignore[attr-defined]
    SparkContext.stop = stop  # type: ignore[method-assign]


def _close_all() -> None:
    for emitter in list(_ACTIVE):
        try:
            emitter.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            log.exception("closing the lineagewire emitter at exit failed")


# -- the public entry points ---------------------------------------------------------------------

def install(spark: Any, *, settings: Settings | None = None, listeners: list[str] | None = None,
            job_namespace: str | None = None, job_name: str | None = None,
            config: dict[str, str] | None = None) -> Emitter:
    """Start emitting for ``spark``; the same Emitter again if one is already running on it.

    Arguments that are None come from ``spark.lineagewire.*`` conf keys, then
    ``LINEAGEWIRE_*`` environment variables, then defaults (see ``config.py``).
    ``listeners=[]`` starts none. Raises ``UnknownListenerError`` (listing the
    available names) or ``EmitterConfigError`` before anything starts.
    """
    with _INSTALL_LOCK:
        existing = getattr(spark, "_lineagewire_emitter", None)
        if existing is not None and not existing._closing:
            return existing
        conf = {k: v for k, v in spark.sparkContext.getConf().getAll() if k.startswith(CONF_PREFIX)}
        cfg = resolve_config(spark_conf=conf, config=config, listeners=listeners, namespace=job_namespace,
                             job_name=job_name)
        settings = _kafka_settings(settings, cfg, conf, config or {})
        emitter = Emitter(spark, cfg, settings, conf)
        spark._lineagewire_emitter = emitter
        _ACTIVE.append(emitter)
        _install_process_hooks()
        return emitter


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
