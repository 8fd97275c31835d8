"""Runs: identity, per-run sequence numbers and the status state machine.

A run is the application run of an installed emitter, a ``job_run()`` block,
a streaming query or a Spark Connect client session. Its events carry its
namespace, name and run id, the parent run, root parent run (an orchestrator's
DAG run above the parent) and schedule it was given, and a ``sequence`` that
starts at 0 and grows by one per event, so consumers can order and deduplicate them. Status
follows Flink's JobStatus: CREATED → RUNNING → FINISHED / FAILED / CANCELED,
with the lifecycle state alongside.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
import uuid
from typing import Any

from lineagewire.schemas import (
    TERMINAL_STATUSES,
    header,
    job_created,
    job_status_changed,
)
from lineagewire.schemas.events import ErrorInfo, EventHeader, JobSpec, RunRef, ScheduleRef

__all__ = ["Run", "error_info", "is_cancellation"]

_MAX_STACK = 32_000


class Run:
    """One run and its event counter. Build its events with the methods; they number themselves."""

    def __init__(self, namespace: str, job_name: str, run_id: str | None = None, *,
                 parent: RunRef | None = None, schedule: ScheduleRef | None = None,
                 root_parent: RunRef | None = None) -> None:
        self.namespace = namespace
        self.job_name = job_name
        self.run_id = run_id or str(uuid.uuid4())
        self.parent = parent
        #: the root of the parent chain when it is not ``parent`` itself (an orchestrator's DAG run)
        self.root_parent = root_parent
        self.schedule = schedule
        self.status: str | None = None
        self.started = time.monotonic()
        self._sequence = itertools.count()
        self._lock = threading.Lock()
        self.actions = 0

    @property
    def ref(self) -> RunRef:
        return {"job_namespace": self.namespace, "job_name": self.job_name, "run_id": self.run_id}

    @property
    def child_root(self) -> RunRef | None:
        """The root parent of a run whose parent is this one: this run's root, else its parent."""
        return self.root_parent or self.parent

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def header(self, kind: str, *, parent: RunRef | None = None) -> EventHeader:
        with self._lock:
            seq = next(self._sequence)
        return self._header(kind, seq, parent)

    def _header(self, kind: str, seq: int, parent: RunRef | None) -> EventHeader:
        # An event given another parent (an action's: this run) has this run's chain above that parent.
        root = self.root_parent if parent is None else self.child_root
        return header(kind, job_namespace=self.namespace, job_name=self.job_name, run_id=self.run_id,
                      sequence=seq, parent_run=parent if parent is not None else self.parent,
                      schedule=self.schedule, root_parent_run=root)

    def draft_header(self, kind: str, *, parent: RunRef | None = None) -> EventHeader:
        """A header like ``header()`` that takes no sequence number (to size an event before it is sent)."""
        return self._header(kind, 0, parent)

    def created(self, spec: JobSpec) -> dict[str, Any]:
        self.status = "CREATED"
        return dict(job_created(self.header("JobCreatedEvent"), spec, status="CREATED"))

    def transition(self, new: str, *, error: ErrorInfo | None = None) -> dict[str, Any] | None:
        """The status event from the current status to ``new``; None if the run has ended already."""
        with self._lock:
            old = self.status
            if old in TERMINAL_STATUSES:
                return None
            self.status = new
        duration = int((time.monotonic() - self.started) * 1000) if new in TERMINAL_STATUSES else None
        return dict(job_status_changed(self.header("JobStatusChangedEvent"), new, old,  # type: ignore[arg-type]
                                       error=error, duration_ms=duration))


def error_info(exc: BaseException) -> ErrorInfo:
    """The contract's error record of a Python exception (class, message, stack)."""
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    cls = type(exc)
    return {"error_class": f"{cls.__module__}.{cls.__qualname__}" if cls.__module__ != "builtins" else cls.__name__,
            "message": str(exc).strip() or repr(exc), "stack_trace": stack[-_MAX_STACK:]}


_CANCEL_WORDS = ("cancelled", "canceled", "interrupted", "killed")


def is_cancellation(exc: BaseException) -> bool:
    """True for an interrupt or a Spark job/stage cancellation (the run is CANCELED, not FAILED).

    An exception class of your own says so with a true ``cancels_run`` attribute.
    """
    if isinstance(exc, KeyboardInterrupt) or getattr(exc, "cancels_run", False) is True:
        return True
    try:
        import asyncio

        if isinstance(exc, asyncio.CancelledError):
            return True
    except ImportError:  # pragma: no cover
        pass
    text = str(exc).lower()
    # Spark reports a cancelled job as "Job 3 cancelled because ..." / "... was cancelled"; the first line is enough.
    first = text.strip().splitlines()[0] if text.strip() else ""
    return any(w in first for w in _CANCEL_WORDS) and ("job" in first or "stage" in first or "operation" in first)
