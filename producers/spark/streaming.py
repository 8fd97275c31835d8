"""Streaming queries as runs of their own (from PySpark's StreamingQueryListener).

A query that starts is a run (``JobCreatedEvent`` with job type STREAMING,
CREATED → RUNNING) whose run id is the query's ``runId`` and whose parent is
the application run. The job is named by the query's ``queryName``, else by its
sink: ``<application job>.stream.<sink>``, where the sink is the dataset it writes
(a folder, a table's folder) or, for a sink that names none when the query starts,
its kind (``kafka``: the topic is only in the writer's options, which are in the
query's logical plan, and Spark builds that plan on the query's thread after it
reports the start; ``foreachBatch``, ``console``, ``memory``, ``noop``, ``foreach``).
So a query restarted from a new checkpoint (a new query id) stays the same job,
with a new run.

Each micro-batch's progress becomes an ``ActionLineageEvent`` (status RUNNING),
at most one per ``heartbeat`` seconds per query, with the datasets and column
lineage of the query's logical plan (``extract_stream_lineage``); where the query
is not found on the JVM, the datasets are named from the source and sink
descriptions. The run ends FINISHED when the query stops, FAILED with its
exception, or CANCELED when the emitter closes under it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from lineagewire.schemas import dataset
from lineagewire.schemas.events import ErrorInfo

from . import internals
from .actions import ActionLineage
from .lineage import SINK_KINDS, described_path, extract_stream_lineage, sink_description
from .runs import Run

__all__ = ["StreamingRuns", "jvm_query"]

log = logging.getLogger(__name__)


def jvm_query(spark: Any, query_id: str) -> Any:
    """The JVM ``StreamExecution`` of the active query ``query_id`` of ``spark``'s session, or None."""
    query = internals.java_session(spark).streams().get(query_id)
    return query.streamingQuery() if query is not None else None


class StreamingRuns:
    """The open streaming runs of one emitter.

    ``start(run, spec)`` and ``end(run, status, error)`` are the emitter's: they
    emit the run's first and last events under ``lock``, the emitter's lock,
    so streaming runs and the other runs are numbered and closed consistently.
    """

    def __init__(self, namespace: str, parent: Run, spec: dict[str, Any], *, heartbeat: float,
                 lock: threading.RLock, start: Callable[[Run, dict[str, Any]], None],
                 end: Callable[[Run, str, ErrorInfo | None], None], actions: ActionLineage,
                 find_query: Callable[[str], Any] | None = None) -> None:
        """``find_query(query_id)``: the query's JVM ``StreamExecution`` (``jvm_query``), or None."""
        self.namespace = namespace
        self.parent = parent
        self.spec = spec
        self.heartbeat = heartbeat
        self._lock = lock
        self._start = start
        self._end = end
        self._actions = actions
        self._find_query = find_query
        # query id -> (run, monotonic time of the last progress sent, the query's StreamExecution or None)
        self._runs: dict[str, tuple[Run, float, Any]] = {}
        #: progress callbacks received, and those that became an event (the rest were throttled)
        self.progress_seen = 0
        self.progress_sent = 0

    def started(self, event: Any) -> None:
        # Spark calls this on the query's thread as it starts, with the query registered: its sink is known.
        query = self._query(str(event.id))
        name = event.name or f"{self.parent.job_name}.stream.{self._sink_name(query, str(event.id))}"
        run = Run(self.namespace, name, str(event.runId), parent=self.parent.ref, root_parent=self.parent.child_root)
        with self._lock:
            self._runs[str(event.id)] = (run, float("-inf"), query)  # the first progress always goes
            self._start(run, {**self.spec, "job_type": "STREAMING"})

    def _query(self, query_id: str) -> Any:
        if self._find_query is None:
            return None
        try:
            return self._find_query(query_id)
        except Exception:  # noqa: BLE001 - the run is reported without its plan: descriptions name its datasets
            log.debug("streaming query %s not found on the JVM", query_id, exc_info=True)
            return None

    @staticmethod
    def _sink_name(query: Any, query_id: str) -> str:
        """The sink's dataset name (a folder, a table's folder) or kind; the query id when the query is unknown."""
        if query is None:
            return query_id
        try:
            sink = query.sink()
            described = sink_description(str(sink.toString()))
            if isinstance(described, tuple):
                return described[1]
            if described in SINK_KINDS:
                return described
            return str(sink.name())  # a catalog's table (toTable): its name in the catalog
        except Exception:  # noqa: BLE001 - a sink that cannot say: the query id, as before
            log.debug("streaming query %s: no name from its sink", query_id, exc_info=True)
            return query_id

    def progress(self, event: Any) -> None:
        progress = event.progress
        key = str(progress.id)
        with self._lock:
            self.progress_seen += 1
            entry = self._runs.get(key)
            now = time.monotonic()
            if entry is None or now - entry[1] < self.heartbeat:
                return
            self._runs[key] = (entry[0], now, entry[2])
            self.progress_sent += 1
        self._actions.run_later(self._publish_progress, entry[0], entry[2], progress)

    def _publish_progress(self, run: Run, query: Any, progress: Any) -> None:
        duration_ns = int(progress.batchDuration) * 1_000_000
        action_id = f"{progress.runId}:{progress.batchId}"
        if query is not None:
            result = extract_stream_lineage(query, budget_s=self._actions.config.time_budget_ms / 1000)
            self._actions.publish(run, "microBatch", result, duration_ns, None, None, status="RUNNING",
                                  action_id=action_id)
            return
        inputs = [_described(s.description, "CONTINUOUS_UNBOUNDED") for s in progress.sources]
        # A foreachBatch sink hands each micro-batch to the user's function: what it writes is reported by
        # the function's own actions (with the query's sources as inputs), not as a table named after the sink.
        # Memory, console and noop sinks store no dataset either.
        sink = str(progress.sink.description)
        stores_nothing = sink_description(sink) in SINK_KINDS - {"kafka"}
        outputs = [] if stores_nothing else [_described(sink, "CONTINUOUS_UNBOUNDED")]
        self._actions.publish(run, "microBatch", _Described(inputs, outputs), duration_ns,
                              None, "streaming progress: datasets named from source and sink descriptions",
                              status="RUNNING", action_id=action_id)

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
            for run, _t, _query in self._runs.values():
                self._end(run, "CANCELED", None)
            self._runs.clear()


class _Described:
    """A lineage result made from streaming descriptions (the extractor's ``ActionLineage`` shape)."""

    def __init__(self, inputs: list[Any], outputs: list[Any]) -> None:
        self.inputs, self.outputs = inputs, outputs
        self.column_lineage: list[Any] = []
        self.plan_node, self.sql, self.complete, self.incomplete_reason = None, None, False, None


def _described(description: str, boundedness: str) -> Any:
    """A dataset named from a streaming source or sink description such as ``FileStreamSource[file:/x]``."""
    found = described_path(description)
    if found is not None:
        return dataset(found[0], found[1], format=found[2], boundedness=boundedness)  # type: ignore[arg-type]
    kind, _, rest = description.partition("[")
    inner = rest.rsplit("]", 1)[0] if rest else ""
    if kind.startswith("Kafka") and "[" in inner:
        return dataset("kafka", inner.split("[", 1)[1].rstrip("]"), boundedness=boundedness)  # type: ignore[arg-type]
    return dataset("spark", description[:200], boundedness=boundedness)  # type: ignore[arg-type]
