"""Streaming queries as runs of their own (from PySpark's StreamingQueryListener).

A query that starts is a run (``JobCreatedEvent`` with job type STREAMING,
CREATED → RUNNING) whose run id is the query's ``runId`` and whose parent is
the application run. Each micro-batch's progress becomes an
``ActionLineageEvent`` (status RUNNING, datasets named from the source and
sink descriptions), at most one per ``heartbeat`` seconds per query. The run
ends FINISHED when the query stops, FAILED with its exception, or CANCELED
when the emitter closes under it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from lineagewire.schemas import dataset
from lineagewire.schemas.events import ErrorInfo

from .actions import ActionLineage
from .runs import Run

__all__ = ["StreamingRuns"]

#: Sink descriptions of ``foreachBatch``: no dataset of their own.
_USER_FUNCTION_SINKS = ("ForeachBatchSink",)


class StreamingRuns:
    """The open streaming runs of one emitter.

    ``start(run, spec)`` and ``end(run, status, error)`` are the emitter's: they
    emit the run's first and last events under ``lock``, the emitter's lock,
    so streaming runs and the other runs are numbered and closed consistently.
    """

    def __init__(self, namespace: str, parent: Run, spec: dict[str, Any], *, heartbeat: float,
                 lock: threading.RLock, start: Callable[[Run, dict[str, Any]], None],
                 end: Callable[[Run, str, ErrorInfo | None], None], actions: ActionLineage) -> None:
        self.namespace = namespace
        self.parent = parent
        self.spec = spec
        self.heartbeat = heartbeat
        self._lock = lock
        self._start = start
        self._end = end
        self._actions = actions
        self._runs: dict[str, tuple[Run, float]] = {}  # query id -> (run, monotonic time of the last progress sent)
        #: progress callbacks received, and those that became an event (the rest were throttled)
        self.progress_seen = 0
        self.progress_sent = 0

    def started(self, event: Any) -> None:
        name = event.name or f"{self.parent.job_name}.stream.{event.id}"
        run = Run(self.namespace, name, str(event.runId), parent=self.parent.ref, root_parent=self.parent.child_root)
        with self._lock:
            self._runs[str(event.id)] = (run, float("-inf"))  # the first progress always goes
            self._start(run, {**self.spec, "job_type": "STREAMING"})

    def progress(self, event: Any) -> None:
        progress = event.progress
        key = str(progress.id)
        with self._lock:
            self.progress_seen += 1
            entry = self._runs.get(key)
            now = time.monotonic()
            if entry is None or now - entry[1] < self.heartbeat:
                return
            self._runs[key] = (entry[0], now)
            self.progress_sent += 1
        self._actions.run_later(self._publish_progress, entry[0], progress)

    def _publish_progress(self, run: Run, progress: Any) -> None:
        inputs = [_described(s.description, "CONTINUOUS_UNBOUNDED") for s in progress.sources]
        # A foreachBatch sink hands each micro-batch to the user's function: what it writes is reported by
        # the function's own actions (with the query's sources as inputs), not as a table named after the sink.
        sink = str(progress.sink.description)
        outputs = [] if sink.startswith(_USER_FUNCTION_SINKS) else [_described(sink, "CONTINUOUS_UNBOUNDED")]
        self._actions.publish(run, "microBatch", _Described(inputs, outputs), int(progress.batchDuration) * 1_000_000,
                              None, "streaming progress: datasets named from source and sink descriptions",
                              status="RUNNING", action_id=f"{progress.runId}:{progress.batchId}")

    def terminated(self, event: Any) -> None:
        with self._lock:
            entry = self._runs.pop(str(event.id), None)
            if entry is None:
                return
            error: ErrorInfo | None = None
            if event.exception:
                error = {"error_class": event.errorClassOnException or "StreamingQueryException",
                         "message": str(event.exception).splitlines()[0][:2000],
                         "stack_trace": str(event.exception)[-32_000:]}
            self._end(entry[0], "FAILED" if error else "FINISHED", error)

    def cancel_all(self) -> None:
        """End every open streaming run CANCELED (the emitter is closing)."""
        with self._lock:
            for run, _t in self._runs.values():
                self._end(run, "CANCELED", None)
            self._runs.clear()


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
