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
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from lineagewire.config import Settings
from lineagewire.consumers.runtime import Handler, OutputError, Record, RetryPolicy

from .embedded import EmbeddedWorkflowScheduler
from .tracking import Tracker

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


class StatusTracker(Tracker):
    """Runs ``StatusHandler`` on ``ConsumerRuntime`` in a background thread (``tracking.Tracker``)."""

    what = "refresh status tracking"

    def __init__(self, settings: Settings, scheduler: EmbeddedWorkflowScheduler, *,
                 group_id: str = "lineagewire-scheduler-status", metrics_port: int | None = None,
                 retry: RetryPolicy | None = None, consumer_config: dict[str, Any] | None = None) -> None:
        super().__init__(settings, StatusHandler(scheduler), group_id=group_id,
                         thread_name="lineagewire-scheduler-status", metrics_port=metrics_port, retry=retry,
                         consumer_config=consumer_config)
