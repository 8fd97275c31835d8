"""The callbacks Spark calls: QueryExecutionListener, SparkListener, StreamingQueryListener.

Each handler returns at once: it only hands references (the ``QueryExecution``,
the event) to a ``SparkCallbacks`` (``callbacks.py``; the ``Emitter`` is one),
which does the work on its own threads. The hooks know nothing else of it. Spark calls
them on its listener-bus threads, never on the job's thread; a slow handler
would still back up the bus (which then drops events), hence the hand-off.

The SparkListener is Java (``java/JobEventsListener.java``, compiled once per
machine by ``jvm_classes``): it counts jobs in the JVM and calls Python only at
application end, where a Python one would be called some forty times per small
action. Jobs started by RDD actions (no SQL execution, so no QueryExecutionListener call) are
the exception: the Java listener describes each one and calls ``on_rdd_job`` once, when it ends,
if the callbacks implement ``RddJobCallbacks``. Where no JDK compiler is at hand, the Python ``_SparkListener`` below
does the same work through py4j, and a warning says what that costs; it does not report RDD-only
jobs (their walk needs the compiled classes), and the warning says so. On a new
machine the compile runs on a thread of its own, so ``install()`` never waits
for javac; jobs started in those first seconds are not counted.

Spark Connect: a Connect server (in this process for ``remote("local")``, or
lineagewire's own server, ``connect_server.py``) runs every client session as a
SparkSession of its own, and a query listener registered on one session does not
hear the others. The SparkListener hands the server's ``SparkListenerConnect*``
events to ``_on_connect_event`` on the listener bus's thread; at a session's first
operation it registers a query listener on that session (found through
``SparkConnectService.getOrCreateIsolatedSession``) before the bus, which delivers in
order, reaches the operation's query.

The Python objects are registered through a Java ``ArrayList`` so that the
same Java proxy is registered and later unregistered (py4j makes a new proxy
each time a Python object crosses, and Spark removes listeners by equality).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from . import internals, jvm_classes, versions
from .callbacks import RddJobCallbacks, SparkCallbacks
from .exceptions import JvmClassesError

log = logging.getLogger(__name__)

__all__ = ["SparkHooks"]


class _QueryExecutionListener:
    """org.apache.spark.sql.util.QueryExecutionListener: one call per action, success or failure."""

    def __init__(self, callbacks: SparkCallbacks | _SessionActions) -> None:
        self._callbacks = callbacks

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:  # noqa: N802,N803 - Java names
        self._callbacks.on_action(funcName, qe, durationNs, None)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:  # noqa: N802,N803
        self._callbacks.on_action(funcName, qe, None, exception)

    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:  # noqa: N802
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:  # noqa: N802
        return "lineagewire.QueryExecutionListener"

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]


class _SessionActions:
    """What a Connect session's query listener calls: the session's actions, with its id."""

    def __init__(self, callbacks: SparkCallbacks, session_id: str) -> None:
        self._callbacks = callbacks
        self._session_id = session_id

    def on_action(self, func_name: str, qe: Any, duration_ns: int | None, exception: Any) -> None:
        self._callbacks.on_connect_action(self._session_id, func_name, qe, duration_ns, exception)


class _ConnectEvents:
    """java.util.function.Consumer the Java listener gives each Spark Connect event."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def accept(self, event: Any) -> None:
        self._handle(event)

    class Java:
        implements = ["java.util.function.Consumer"]


#: the class-name prefix of Spark Connect's listener events (as in JobEventsListener.java)
CONNECT_EVENT_PREFIX = "org.apache.spark.sql.connect.service.SparkListenerConnect"
_CONNECT_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService"
#: the client session's settings the runs are named from
CONNECT_CONF_KEYS = ("spark.app.name", "spark.lineagewire.job_name", "spark.lineagewire.namespace")


def _connect_fields(kind: str, event: Any) -> dict[str, Any]:
    """The plain values of a Connect event (its public accessors), read on the bus thread."""
    fields: dict[str, Any] = {}
    if kind.startswith("Operation"):
        fields["operation_id"] = str(event.operationId())
        fields["job_tag"] = str(event.jobTag())
    if kind in ("OperationStarted", "SessionStarted", "SessionClosed"):
        fields["session_id"] = str(event.sessionId())
        fields["user_id"] = str(event.userId() or "")
    if kind == "OperationStarted":
        fields["user_name"] = str(event.userName() or "")
        fields["statement_text"] = str(event.statementText() or "")
        # Scala's Set: mkString is its public rendering; tags cannot contain commas (Spark checks).
        tags = str(event.sparkSessionTags().mkString(","))
        fields["session_tags"] = sorted(t for t in tags.split(",") if t)
    if kind == "OperationFailed":
        fields["error_message"] = str(event.errorMessage() or "")
    return fields


class _SparkListener:
    """The fallback: org.apache.spark.scheduler.SparkListenerInterface in Python, the same work as the Java one.

    The interface has some thirty methods and gains new ones between Spark
    versions; ``__getattr__`` answers every other ``on...`` call with a no-op,
    so each exists whatever the version.
    """

    def __init__(self, callbacks: SparkCallbacks, on_connect_event: Any = None) -> None:
        self._callbacks = callbacks
        self._on_connect_event = on_connect_event
        self.started = self.succeeded = self.failed = 0

    def onOtherEvent(self, event: Any) -> None:  # noqa: N802
        if self._on_connect_event is not None and str(event.getClass().getName()).startswith(CONNECT_EVENT_PREFIX):
            self._on_connect_event(event)

    def onJobStart(self, jobStart: Any) -> None:  # noqa: N802,N803
        self.started += 1

    def onJobEnd(self, jobEnd: Any) -> None:  # noqa: N802,N803
        if str(jobEnd.jobResult().toString()) == "JobSucceeded":
            self.succeeded += 1
        else:
            self.failed += 1

    def onApplicationEnd(self, applicationEnd: Any) -> None:  # noqa: N802,N803
        self._callbacks.on_application_end()

    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:  # noqa: N802
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:  # noqa: N802
        return "lineagewire.SparkListener"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on"):
            return _ignore
        raise AttributeError(name)

    class Java:
        implements = ["org.apache.spark.scheduler.SparkListenerInterface"]


def _ignore(*_args: Any) -> None:
    return None


class _RddJobs:
    """java.util.function.BiConsumer the Java listener gives each RDD-only job at its end (JSON, exception)."""

    def __init__(self, callbacks: RddJobCallbacks) -> None:
        self._callbacks = callbacks

    def accept(self, job: str, exception: Any) -> None:
        try:
            self._callbacks.on_rdd_job(job, exception)
        except Exception as exc:  # noqa: BLE001 - nothing goes back to Spark's bus
            log.warning("lineagewire could not take an RDD-only Spark job: %s", exc)

    class Java:
        implements = ["java.util.function.BiConsumer"]


class _ApplicationEnd:
    """java.lang.Runnable the Java listener runs once, when the application ends."""

    def __init__(self, callbacks: SparkCallbacks) -> None:
        self._callbacks = callbacks

    def run(self) -> None:
        self._callbacks.on_application_end()

    class Java:
        implements = ["java.lang.Runnable"]


def _streaming_listener(callbacks: SparkCallbacks) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _StreamingListener(StreamingQueryListener):
        """PySpark's StreamingQueryListener: started, progress (throttled by the callbacks), terminated."""

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802
            callbacks.on_stream_started(event)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            callbacks.on_stream_progress(event)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            return None

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            callbacks.on_stream_terminated(event)

    return _StreamingListener()


class SparkHooks:
    """Registers the callbacks on a SparkSession (``install``) and removes every one of them again (``remove``).

    What the JVM holds of ours is recorded as it is registered, with how to take it back: ``install``
    failing halfway removes what it had registered before raising, and ``remove`` (safe to call again, also
    after a failed ``install``) removes whatever is there. No JVM call is made while ``_lock`` is held:
    removing a listener can wait for Spark's listener bus, whose thread may be in ``_on_connect_event``
    waiting for that lock. A registration that ``remove`` could not see yet (made on the compile thread
    or the bus thread while it ran) is taken back by the thread that made it.
    """

    def __init__(self, callbacks: SparkCallbacks, spark: Any, *, spark_listener: bool, streaming_listener: bool,
                 javac: str | None = None) -> None:
        self.spark = spark
        self._callbacks = callbacks
        self._options = (spark_listener, streaming_listener, javac)
        self._py4j = internals.gateway(spark)
        self._spark_version = str(spark.sparkContext.version)
        self._sl: Any = None  # the registered SparkListener: the Java one, or the proxy of _SparkListener
        self._sl_py: _SparkListener | None = None
        self._app_end: _ApplicationEnd | None = None
        self._rdd_jobs: _RddJobs | None = None
        self._connect = _ConnectEvents(self._on_connect_event)
        self._registered: list[tuple[str, Callable[[], Any]]] = []  # what the JVM holds, how to take it back
        self._sessions: dict[str, tuple[Any, Any]] = {}  # Connect session id -> (its Java session, our listener)
        self._lock = threading.Lock()
        self._removed = False
        #: "jvm", "py4j" (the fallback), or None while compiling / when off
        self.spark_listener_kind: str | None = None
        #: set once the SparkListener is registered (or will not be)
        self.spark_listener_ready = threading.Event()
        self._py = _QueryExecutionListener(callbacks)

    def install(self) -> None:
        """Register the listeners; if one fails, remove those registered before it, then raise."""
        spark_listener, streaming_listener, javac = self._options
        try:
            internals.start_callback_server(self._py4j)
            qel = self._java_proxy(self._py)
            manager = internals.java_session(self.spark).listenerManager()
            manager.register(qel)
            self._keep([("query execution listener", functools.partial(manager.unregister, qel))])
            self._watch_catalog()
            if spark_listener:
                self._start_spark_listener(javac)
            else:
                self.spark_listener_ready.set()
            if streaming_listener:
                stream = _streaming_listener(self._callbacks)
                self.spark.streams.addListener(stream)
                self._keep([("streaming listener", lambda: self.spark.streams.removeListener(stream))])
        except BaseException:
            self.remove()
            raise

    def _watch_catalog(self) -> None:
        """The session catalog's watcher (lineage's lifecycle connector), so that a DROP that is a job's first
        statement is read before the table is gone. Never fails the install: without it a DROP is named as the
        table was last seen."""
        from .lineage.connectors import lifecycle

        try:
            lifecycle.watch_session(internals.java_session(self.spark))
        except Exception:  # noqa: BLE001
            log.debug("the session catalog is not watched", exc_info=True)

    def _java_proxy(self, obj: Any) -> Any:
        holder = self._py4j.jvm.java.util.ArrayList()
        holder.add(obj)
        return holder.get(0)

    def _keep(self, undo: list[tuple[str, Callable[[], Any]]], record: Callable[[], None] | None = None) -> bool:
        """Record a registration just made, with its ``undo`` steps; if ``remove()`` ran meanwhile, undo it now."""
        with self._lock:
            if not self._removed:
                self._registered.extend(undo)
                if record is not None:
                    record()
                return True
        _undo(undo)
        return False

    # -- the SparkListener: Java if it can be had, else Python ------------------------------------

    def _start_spark_listener(self, javac: str | None) -> None:
        try:
            info = jvm_classes.JvmInfo.of(self.spark)
            directory = jvm_classes.cached(info)
            compiler = None if directory is not None else jvm_classes.find_javac(info, javac)
        except Exception as exc:  # noqa: BLE001 - e.g. an unreadable LINEAGEWIRE_HOME: Python does the work
            self._fallback(f"the compiled classes could not be looked up: {exc}")
            return
        if directory is not None:
            self._register_jvm_listener(directory)
            return
        if compiler is None:
            self._fallback(f"no javac in the driver's JDK ({info.java_home}) nor on PATH")
            return
        threading.Thread(target=self._compile_then_register, args=(info, compiler), daemon=True,
                         name="lineagewire-javac").start()

    def _compile_then_register(self, info: jvm_classes.JvmInfo, javac: str) -> None:
        try:
            log.info("compiling lineagewire's JVM SparkListener with %s (once per machine and Spark version)", javac)
            directory = jvm_classes.compile_classes(info, javac)
        except JvmClassesError as exc:
            self._fallback(str(exc))
        except Exception as exc:  # noqa: BLE001 - never past this thread: Python does the work instead
            self._fallback(f"compiling failed: {exc!r}")
        else:
            self._register_jvm_listener(directory)
        finally:
            internals.release_thread_connection()

    def _register_jvm_listener(self, directory: Any) -> None:
        try:
            if not self._removed:
                listener = jvm_classes.new_instance(self.spark, directory, jvm_classes.JOB_EVENTS_LISTENER)
                self._app_end = _ApplicationEnd(self._callbacks)
                listener.setOnApplicationEnd(self._app_end)
                listener.setOnConnectEvent(self._connect)
                context = internals.java_spark_context(self.spark)
                undo: list[tuple[str, Callable[[], Any]]] = [
                    ("spark listener", functools.partial(context.removeSparkListener, listener)),
                    ("application-end callback", functools.partial(listener.setOnApplicationEnd, None)),
                    ("Connect event callback", functools.partial(listener.setOnConnectEvent, None))]
                if isinstance(self._callbacks, RddJobCallbacks):
                    self._rdd_jobs = _RddJobs(self._callbacks)
                    listener.setOnRddJob(self._rdd_jobs, context)
                    undo.append(("RDD job callback", functools.partial(listener.setOnRddJob, None, None)))
                context.addSparkListener(listener)
                self._keep(undo, functools.partial(self._record_spark_listener, "jvm", listener, None))
        except Exception as exc:  # noqa: BLE001 - a class that will not load or register: Python does the work
            self._fallback(f"registering {jvm_classes.JOB_EVENTS_LISTENER} from {directory} failed: "
                           f"{str(exc).splitlines()[0] if str(exc) else exc!r}")
            return
        self.spark_listener_ready.set()

    def _fallback(self, why: str) -> None:
        log.warning("lineagewire's JVM SparkListener is unavailable (%s); using the Python SparkListener, which py4j "
                    "calls for every task, stage and block event (measured 1.10-1.12x the job's time on 50 very short "
                    "actions, against 1.03-1.04x with the JVM one), and Spark jobs of RDD actions without a DataFrame "
                    "(sc.textFile(...).saveAsTextFile(...)) get no action events. "
                    "Point spark.lineagewire.javac at a JDK's javac, or set spark.lineagewire.spark_listener=false "
                    "to go without job counts and JVM-side application end.", why)
        try:
            if not self._removed:
                py = _SparkListener(self._callbacks, self._on_connect_event)
                proxy = self._java_proxy(py)
                context = internals.java_spark_context(self.spark)
                context.addSparkListener(proxy)
                self._keep([("spark listener", functools.partial(context.removeSparkListener, proxy))],
                           functools.partial(self._record_spark_listener, "py4j", proxy, py))
        except Exception as exc:  # noqa: BLE001 - a stopping context: no SparkListener, the runs still end at stop()
            log.warning("could not register lineagewire's SparkListener: %s", exc)
        finally:
            self.spark_listener_ready.set()

    def _record_spark_listener(self, kind: str, listener: Any, py: _SparkListener | None) -> None:
        # Under _lock (from _keep): job_counts() reads the three together.
        self._sl, self._sl_py, self.spark_listener_kind = listener, py, kind

    # -- Spark Connect: a query listener per client session -----------------------------------------

    def _on_connect_event(self, event: Any) -> None:
        # On the listener bus's thread (through py4j): whatever happens, nothing goes back to Spark's bus.
        try:
            kind = str(event.getClass().getName())[len(CONNECT_EVENT_PREFIX):]
            fields = _connect_fields(kind, event)
            if kind == "OperationStarted":
                fields["conf"] = self._attach_session(fields["session_id"], fields["user_id"])
            self._callbacks.on_connect_event(kind, fields)
            if kind == "SessionClosed":
                self._detach_session(fields["session_id"])
        except Exception as exc:  # noqa: BLE001 - a Connect event we cannot read: its actions go to the open run
            log.warning("lineagewire could not handle a Spark Connect event: %s", str(exc).splitlines()[0] if
                        str(exc) else repr(exc))

    def _attach_session(self, session_id: str, user_id: str) -> dict[str, str]:
        """Register a query listener on the Connect session (once); the client session's naming settings."""
        with self._lock:
            known = self._sessions.get(session_id)
            if self._removed:
                return {}
        if known is None:
            jvm = self._py4j.jvm
            service = getattr(jvm, _CONNECT_SERVICE)
            # The session exists already (this operation runs in it): get-or-create returns it.
            holder = service.getOrCreateIsolatedSession(
                user_id, session_id, *versions.isolated_session_extra(self._spark_version, jvm))
            jsession = holder.session()
            proxy = self._java_proxy(_QueryExecutionListener(_SessionActions(self._callbacks, session_id)))
            jsession.listenerManager().register(proxy)
            with self._lock:
                kept = not self._removed and session_id not in self._sessions
                if kept:
                    self._sessions[session_id] = (jsession, proxy)
            if not kept:  # remove() ran meanwhile (it could not see this one), or another event attached first
                _undo([("Connect session's query listener", functools.partial(_unregister, jsession, proxy))])
                return {}
        else:
            jsession = known[0]
        conf = jsession.conf()
        return {k: str(v) for k in CONNECT_CONF_KEYS if (v := conf.get(k, None)) is not None}

    def _detach_session(self, session_id: str) -> None:
        with self._lock:
            known = self._sessions.pop(session_id, None)
        if known is not None:
            try:
                _unregister(*known)
            except Exception as exc:  # noqa: BLE001 - the session is closing: nothing to undo
                log.debug("could not unregister the query listener of Connect session %s: %s", session_id, exc)

    def job_counts(self) -> dict[str, int] | None:
        """Spark jobs started, succeeded and failed (or cancelled) since install; None without a SparkListener."""
        with self._lock:
            kind, sl, py = self.spark_listener_kind, self._sl, self._sl_py
        try:
            if kind == "jvm":
                return {"started": int(sl.jobsStarted()), "succeeded": int(sl.jobsSucceeded()),
                        "failed": int(sl.jobsFailed())}
            if kind == "py4j" and py is not None:
                return {"started": py.started, "succeeded": py.succeeded, "failed": py.failed}
        except Exception:  # noqa: BLE001 - the JVM is gone: nothing to count
            return None
        return None

    def wait_for_bus(self, timeout: float) -> bool:
        """Wait until Spark's listener bus delivered what is queued (so callbacks of past actions arrived)."""
        if timeout <= 0:
            return False
        try:
            internals.java_spark_context(self.spark).listenerBus().waitUntilEmpty(int(timeout * 1000))
            return True
        except Exception:  # noqa: BLE001 - a timeout or a stopped context: nothing more to wait for
            return False

    def remove(self) -> None:
        """Unregister everything; each step on its own, so one failure does not leave the others behind."""
        with self._lock:
            # A compile still running registers nothing after this; a registration under way takes itself back.
            self._removed = True
            steps, self._registered = self._registered, []
            sessions = list(self._sessions.values())
            self._sessions.clear()
        steps += [("Connect session's query listener", functools.partial(_unregister, jsession, proxy))
                  for jsession, proxy in sessions]
        # _sl stays: its counters are still read by stats() after close.
        _undo(steps)


def _unregister(jsession: Any, proxy: Any) -> None:
    jsession.listenerManager().unregister(proxy)


def _undo(steps: list[tuple[str, Callable[[], Any]]]) -> None:
    for what, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - the session may be stopping; nothing to undo then
            log.debug("could not unregister the %s: %s", what, exc)
