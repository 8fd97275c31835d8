"""Refresh status from the job events of the runs that executed the refreshes.

``StatusHandler`` is a ``Handler`` of the shared consumer runtime
(``lineagewire.consumers.runtime``): it hands every event that carries
``header.schedule`` to ``EmbeddedWorkflowScheduler.apply_status``. The runtime
commits an event's offset only after ``handle`` returned, so:

* a database error (busy, locked, unreachable) is an ``OutputError``: the
  runtime retries the same event with backoff and pauses the partitions; if
  the service stops meanwhile the event stays uncommitted and is applied after
  the restart. It is never dead-lettered, since the event itself is fine;
* applying an event twice changes nothing (``apply_status`` matches on command
  id and attempt), so redelivery after a crash is harmless.

``StatusTracker`` runs the runtime in a background thread next to the API and
the scheduling loop, in its own consumer group (default
``lineagewire-scheduler-status``), with the runtime's dead-letter topic,
metrics and ``/healthz`` (``metrics_port``). Several scheduler instances may
share the group: the database is shared, the partitions are split.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from lineagewire.config import Settings
from lineagewire.consumers.runtime import ConsumerRuntime, Handler, OutputError, Record, RetryPolicy, RunStats

from .embedded import EmbeddedWorkflowScheduler

log = logging.getLogger(__name__)

__all__ = ["StatusHandler", "StatusTracker"]


class StatusHandler(Handler):
    """Applies job status events of refresh runs to the scheduler's refresh table."""

    name = "scheduler-status"

    def __init__(self, scheduler: EmbeddedWorkflowScheduler) -> None:
        self.scheduler = scheduler
        self.applied = 0

    def handle(self, record: Record) -> int:
        if record.event is None:
            return 0
        try:
            status = self.scheduler.apply_status(record.event)
        except SQLAlchemyError as exc:
            # The database is down or locked, not the event: retried with backoff, never dead-lettered.
            raise OutputError(f"{record.where}: database error applying refresh status: "
                              f"{type(exc).__name__}: {exc}") from exc
        if status is None:
            return 0
        self.applied += 1
        return 1


class StatusTracker:
    """Runs ``StatusHandler`` on ``ConsumerRuntime`` in a background thread.

    ``metrics_port``: /metrics and /healthz of the runtime on 127.0.0.1 (0 = any free port, None = off).
    ``retry``: backoff while the database is unavailable (default: retry until it is back).
    """

    def __init__(self, settings: Settings, scheduler: EmbeddedWorkflowScheduler, *,
                 group_id: str = "lineagewire-scheduler-status", metrics_port: int | None = None,
                 retry: RetryPolicy | None = None, consumer_config: dict[str, Any] | None = None) -> None:
        self.handler = StatusHandler(scheduler)
        self.runtime = ConsumerRuntime(settings, self.handler, topics=[settings.topics.jobs], group_id=group_id,
                                       retry=retry or RetryPolicy(initial=0.5, maximum=30.0),
                                       metrics_port=metrics_port, consumer_config=consumer_config)
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lineagewire-scheduler-status", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self.runtime.run()
        except BaseException as exc:  # noqa: BLE001 - logged; /health shows the tracker stopped
            self._failed = exc
            log.exception("refresh status tracking on %s stopped", ", ".join(self.runtime.topics))

    def stop(self, timeout: float = 60.0) -> None:
        """Finish the event in hand (or leave it uncommitted if the database is still down), commit, stop."""
        if self._thread is not None:
            self.runtime.stop()
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("refresh status tracking did not stop within %.0fs", timeout)
            self._thread = None

    @property
    def applied(self) -> int:
        return self.handler.applied

    @property
    def stats(self) -> RunStats:
        return self.runtime.stats

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return self.runtime.metrics_address
