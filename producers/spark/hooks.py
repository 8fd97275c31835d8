"""The py4j callbacks Spark calls: QueryExecutionListener, SparkListener, StreamingQueryListener.

Each handler returns at once: it only hands references (the ``QueryExecution``,
the event) to the emitter, which does the work on its own threads. Spark calls
them on its listener-bus threads, never on the job's thread; a slow handler
would still back up the bus (which then drops events), hence the hand-off.

The Python objects are registered through a Java ``ArrayList`` so that the
same Java proxy is registered and later unregistered (py4j makes a new proxy
each time a Python object crosses, and Spark removes listeners by equality).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .emitter import Emitter

log = logging.getLogger(__name__)

__all__ = ["SparkHooks"]


class _QueryExecutionListener:
    """org.apache.spark.sql.util.QueryExecutionListener: one call per action, success or failure."""

    def __init__(self, emitter: Emitter) -> None:
        self._emitter = emitter

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:  # noqa: N802,N803 - Java names
        self._emitter._on_action(funcName, qe, durationNs, None)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:  # noqa: N802,N803
        self._emitter._on_action(funcName, qe, None, exception)

    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:  # noqa: N802
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:  # noqa: N802
        return "lineagewire.QueryExecutionListener"

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]


class _SparkListener:
    """org.apache.spark.scheduler.SparkListenerInterface: job and application events, the rest ignored.

    The interface has some thirty methods and gains new ones between Spark
    versions; ``__getattr__`` answers every other ``on...`` call with a no-op,
    so each exists whatever the version.
    """

    def __init__(self, emitter: Emitter) -> None:
        self._emitter = emitter

    def onJobStart(self, jobStart: Any) -> None:  # noqa: N802,N803
        self._emitter._on_job_start(jobStart)

    def onApplicationEnd(self, applicationEnd: Any) -> None:  # noqa: N802,N803
        self._emitter._on_application_end()

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


def _streaming_listener(emitter: Emitter) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _StreamingListener(StreamingQueryListener):
        """PySpark's StreamingQueryListener: started, progress (throttled by the emitter), terminated."""

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802
            emitter._on_stream_started(event)

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            emitter._on_stream_progress(event)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            return None

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            emitter._on_stream_terminated(event)

    return _StreamingListener()


class SparkHooks:
    """Registers the callbacks on a SparkSession and removes every one of them again."""

    def __init__(self, emitter: Emitter, spark: Any, *, spark_listener: bool, streaming_listener: bool) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        self.spark = spark
        sc = spark.sparkContext
        gateway = sc._gateway
        ensure_callback_server_started(gateway)
        holder = gateway.jvm.java.util.ArrayList()
        self._qel = None
        self._sl = None
        self._stream = None
        self._py = [_QueryExecutionListener(emitter)]
        holder.add(self._py[0])
        self._qel = holder.get(0)
        spark._jsparkSession.listenerManager().register(self._qel)
        if spark_listener:
            self._py.append(_SparkListener(emitter))
            holder.add(self._py[1])
            self._sl = holder.get(1)
            sc._jsc.sc().addSparkListener(self._sl)
        if streaming_listener:
            self._stream = _streaming_listener(emitter)
            spark.streams.addListener(self._stream)

    def wait_for_bus(self, timeout: float) -> bool:
        """Wait until Spark's listener bus delivered what is queued (so callbacks of past actions arrived)."""
        if timeout <= 0:
            return False
        try:
            self.spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(int(timeout * 1000))
            return True
        except Exception:  # noqa: BLE001 - a timeout or a stopped context: nothing more to wait for
            return False

    def remove(self) -> None:
        """Unregister everything; each step on its own, so one failure does not leave the others behind."""
        steps = [
            ("query execution listener", lambda: self.spark._jsparkSession.listenerManager().unregister(self._qel)),
        ]
        if self._sl is not None:
            steps.append(("spark listener", lambda: self.spark.sparkContext._jsc.sc().removeSparkListener(self._sl)))
        if self._stream is not None:
            steps.append(("streaming listener", lambda: self.spark.streams.removeListener(self._stream)))
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the session may be stopping; nothing to undo then
                log.debug("could not unregister the %s: %s", what, exc)
        self._qel = self._sl = self._stream = None
