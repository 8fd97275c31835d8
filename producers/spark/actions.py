"""Spark actions to ``ActionLineageEvent``: extraction within the time budget, on the actions worker.

The hooks hand each action's ``QueryExecution`` over (``submit``) and return;
the worker (one thread, a bounded queue of ``action_queue_size``) extracts the
lineage within ``time_budget_ms``, builds the event and redacts it; ``send``
hands it to the emitter, which, under its lock, has ``numbered_parts`` number it,
encode it once and split it only when it is over ``max_event_bytes``. The one
encoding travels with the event (``EncodedEvent``), so the Kafka listener sends
those bytes instead of encoding the event a second time.
An action that finds the queue full still gets its event, without lineage
and saying why, so no action goes unreported. So does every action still
waiting or being extracted when the emitter closes: at ``shutdown``'s cut the
extraction under way returns what it found, queued actions skip extraction,
and at its end whatever is still unsent goes out without lineage.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from lineagewire.redact import Redactor
from lineagewire.schemas import Codec, action_lineage
from lineagewire.schemas.events import ErrorInfo

from .config import EmitterConfig
from .internals import release_thread_connection
from .listeners.base import EncodedEvent
from .listeners.executor import BoundedExecutor
from .runs import Run
from .split import split_action_lineage

log = logging.getLogger(__name__)

__all__ = ["ActionLineage", "failed_analysis", "java_error"]

#: ``send(run, event)``: under the emitter's lock, ``numbered_parts(run, event)`` and hand them to the listeners
Send = Callable[[Run, dict[str, Any]], None]


def _extractor() -> Any:
    """``extract_action_lineage`` if the lineage package is there, else None."""
    try:
        from lineagewire.producers.spark.lineage import extract_action_lineage
    except ImportError:
        return None
    return extract_action_lineage


class ActionLineage:
    """The actions worker and the building of action events; see the module docstring."""

    def __init__(self, config: EmitterConfig, redactor: Redactor, send: Send, *, codec: Codec | None = None,
                 topic: str = "lineage.jobs") -> None:
        self.config = config
        self._redactor = redactor
        self._send = send
        # The Kafka listener's codec and topic: an encoding made here is the one it sends.
        self._codec = codec or Codec()
        self._topic = topic
        #: dated folders named as one dataset (config.dated_folders)
        self._dated = config.dated()
        self._executor = BoundedExecutor("actions", config.action_queue_size, on_exit=release_thread_connection)
        #: set at shutdown's cut: extraction stops, what is queued goes without lineage
        self._stop = threading.Event()
        #: actions submitted and not yet sent, by action id: (run, func_name, duration_ns, Java exception)
        self._unsent: dict[str, tuple[Run, str, int | None, Any]] = {}
        self._unsent_lock = threading.Lock()
        #: actions taken from the queue, and those sent without lineage because it was full
        self.processed = 0
        self.skipped = 0

    # -- the hooks' side (listener-bus threads) --------------------------------------------------

    def submit(self, run: Run, func_name: str, qe: Any, duration_ns: int | None, exception: Any) -> None:
        """Queue one action for extraction; when the queue is full, send it at once without lineage."""
        action_id = str(uuid.uuid4())
        with self._unsent_lock:
            self._unsent[action_id] = (run, func_name, duration_ns, exception)
        if not self._executor.submit(self._process, action_id, qe):
            self.skipped += 1
            self._send_once(action_id, None, "action queue full: lineage not extracted")

    def submit_rdd_job(self, run: Run, job: str, exception: Any) -> None:
        """Queue a Spark job of an RDD action (the JVM listener's JSON, ``lineage/rdd_jobs.py``) for its event, sent
        through ``publish`` as every action's is; when the queue is full, send it at once without lineage."""
        from lineagewire.producers.spark.lineage import rdd_jobs

        parsed = rdd_jobs.parse(job)
        action_id = str(uuid.uuid4())
        duration_ns = parsed.duration_ms * 1_000_000 if parsed.duration_ms is not None else None
        with self._unsent_lock:
            self._unsent[action_id] = (run, parsed.action, duration_ns, exception)
        if not self._executor.submit(self._process_rdd_job, action_id, parsed):
            self.skipped += 1
            self._send_once(action_id, None, "action queue full: lineage not extracted")

    def run_later(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run other per-action work (streaming progress) on the same worker, in order; False when full."""
        return self._executor.submit(fn, *args)

    # -- the worker ------------------------------------------------------------------------------

    def _process(self, action_id: str, qe: Any) -> None:
        self.processed += 1
        with self._unsent_lock:
            if action_id not in self._unsent:  # sent without lineage by shutdown already
                return
            _run, func_name, _duration_ns, exception = self._unsent[action_id]
        self._send_once(action_id, *self._extract(func_name, qe, exception))

    def _process_rdd_job(self, action_id: str, job: Any) -> None:
        from lineagewire.producers.spark.lineage import rdd_jobs

        self.processed += 1
        with self._unsent_lock:
            if action_id not in self._unsent:  # sent without lineage by shutdown already
                return
        if self._stop.is_set():
            self._send_once(action_id, None, "the emitter closed before this action's lineage was extracted")
            return
        try:
            result, reason = rdd_jobs.job_lineage(job), None
        except Exception as exc:  # noqa: BLE001 - the job must not care
            result, reason = None, f"lineage extraction failed: {self._redactor.text(repr(exc))}"
        if result is not None and result.complete and not (result.inputs or result.outputs):
            # A job that read and wrote no dataset and did not fail (a Connect server's own jobs, a collect of
            # parallelized data) has no lineage to tell: it is counted with the application's jobs, not sent.
            with self._unsent_lock:
                kept = self._unsent.get(action_id)
                if kept is not None and kept[3] is None:
                    del self._unsent[action_id]
                    return
        self._send_once(action_id, result, reason)

    def _extract(self, func_name: str, qe: Any, exception: Any) -> tuple[Any, str | None]:
        """The action's extraction result (None when there is none) and why it is incomplete, if it is."""
        if self._stop.is_set():
            return None, "the emitter closed before this action's lineage was extracted"
        if exception is not None and failed_analysis(exception):
            # Spark 4 reports a query that failed analysis (a misspelt column) as a failed "analyze" action. It
            # has no plan to read, and asking for one only raises again (each time logged by PySpark at ERROR).
            return None, "the query failed analysis: it has no plan to read"
        extract = _extractor()
        if extract is None:
            return None, "lineage extractor unavailable"
        budget_s = self.config.time_budget_ms / 1000
        started = time.perf_counter()
        try:
            result = extract(qe, func_name, budget_s=budget_s, stop=self._stop)
        except Exception as exc:  # noqa: BLE001 - the contract says it never raises; the job must not care
            why = self._redactor.text(repr(exc))
            log.warning("lineage extraction of %s failed: %s", func_name, why)
            return None, f"lineage extraction failed: {why}"
        elapsed = time.perf_counter() - started
        if elapsed > budget_s and getattr(result, "complete", False):
            return result, f"lineage extraction took {elapsed * 1000:.0f} ms, over the {budget_s * 1000:.0f} ms budget"
        return result, None

    def _send_once(self, action_id: str, result: Any, reason: str | None) -> None:
        """Send a submitted action with ``result`` (None: without lineage), unless its event went out already."""
        with self._unsent_lock:
            found = self._unsent.pop(action_id, None)
        if found is not None:
            run, func_name, duration_ns, exception = found
            self.publish(run, func_name, result, duration_ns,
                         java_error(exception) if exception is not None else None, reason, action_id=action_id)

    def publish(self, run: Run, func_name: str, result: Any, duration_ns: int | None, error: ErrorInfo | None,
                reason: str | None, *, status: str | None = None, action_id: str | None = None) -> None:
        """Build the action's event from an extraction ``result`` (or None), redact, split and send it."""
        if result is not None:
            result = self._dated.apply(result)
        complete = bool(result is not None and result.complete and reason is None)
        reasons = [r for r in (getattr(result, "incomplete_reason", None), reason) if r]
        outputs = list(result.outputs) if result is not None else []
        if error is not None:
            # A failed CREATE, RENAME or DROP changed no table, and a failed write committed no rows: its outputs are
            # named, as a failure's are, without a change or counts.
            outputs = [{**o, "lifecycle_change": None, "previous_identifier": None, "row_count": None,
                        "byte_count": None} for o in outputs]
        event = dict(action_lineage(
            run.draft_header("ActionLineageEvent", parent=run.ref),  # each part gets its numbered header on send
            action_id or str(uuid.uuid4()), func_name,
            action_status=status or ("FAILED" if error else "SUCCEEDED"),  # type: ignore[arg-type]
            inputs=list(result.inputs) if result is not None else [],
            outputs=outputs,
            column_lineage=list(result.column_lineage) if result is not None else [],
            plan_node=getattr(result, "plan_node", None), sql=getattr(result, "sql", None),
            duration_ms=int(duration_ns / 1e6) if duration_ns is not None else None,
            lineage_complete=complete, incomplete_reason="; ".join(reasons) or None, error=error))
        # Redacted before it is sized, so the parts are sized as they are sent.
        self._send(run, self._redactor.mapping(event))

    def numbered_parts(self, run: Run, event: dict[str, Any]) -> list[dict[str, Any]]:
        """``event`` numbered in ``run`` and encoded once; split over several numbered events only when the
        encoding is over ``max_event_bytes``. Called under the emitter's lock, so numbers follow dispatch order."""
        event["header"] = run.header("ActionLineageEvent", parent=run.ref)
        try:
            value = self._codec.encode(event, topic=self._topic)
            if len(value) <= self.config.max_event_bytes:
                return [EncodedEvent(event, encoded=value, topic=self._topic)]
            parts = split_action_lineage(event, self._size, self.config.max_event_bytes)
        except Exception as exc:  # noqa: BLE001 - an unencodable event: say so rather than lose the action
            why = self._redactor.text(str(exc))
            log.warning("action %s: lineage event cannot be encoded (%s); sent without lineage",
                        event.get("func_name"), why)
            return [{**event, "inputs": [], "outputs": [], "column_lineage": [], "lineage_complete": False,
                     "incomplete_reason": f"lineage not encodable: {why}"}]
        for part in parts[1:]:  # the first part keeps the number the whole event took
            part["header"] = run.header("ActionLineageEvent", parent=run.ref)
        return parts

    def _size(self, event: dict[str, Any]) -> int:
        return len(self._codec.encode(event, topic=self._topic))

    # -- lifecycle -------------------------------------------------------------------------------

    def drain(self, timeout: float) -> bool:
        """Wait until the queued actions are processed; False on timeout."""
        return self._executor.drain(timeout)

    def shutdown(self, cut: float, timeout: float) -> bool:
        """Extract what is queued for ``cut`` seconds; then cut: the extraction under way returns what it has
        found so far, and queued actions are sent without lineage. Past ``timeout`` seconds, every action still
        unsent (its extraction stuck in a JVM call) is sent without lineage. False if the worker did not finish."""
        deadline = time.monotonic() + timeout
        if not self._executor.drain(min(cut, timeout)):
            self._stop.set()
        finished = self._executor.shutdown(max(0.0, deadline - time.monotonic()))
        with self._unsent_lock:
            left = list(self._unsent)
        for action_id in left:
            self._send_once(action_id, None, "the emitter closed (flush_timeout) before this action's lineage was "
                                             "extracted")
        return finished


#: what Spark raises for a query it cannot analyze (ExtendedAnalysisException and others extend it)
ANALYSIS_EXCEPTION = "org.apache.spark.sql.AnalysisException"


def failed_analysis(exc: Any) -> bool:
    """Whether a Java throwable (py4j object) is, or extends, Spark's AnalysisException."""
    try:
        cls = exc.getClass()
        while cls is not None:
            if str(cls.getName()) == ANALYSIS_EXCEPTION:
                return True
            cls = cls.getSuperclass()
    except Exception:  # noqa: BLE001 - the JVM may be going away: extraction says what it can
        return False
    return False


def java_error(exc: Any) -> ErrorInfo:
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
