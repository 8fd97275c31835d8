"""A ``Handler`` of the shared consumer runtime on ``lineage.jobs``, run in a background thread of the scheduler.

The scheduler follows ``lineage.jobs`` twice, in two consumer groups: ``status.StatusTracker`` for the status of
its refresh runs, ``inputs.InputTracker`` for the writes to its tables' inputs. Both are a ``Tracker``: the
runtime's commits, retries (backoff while the database is unavailable, default: until it is back), dead letters
and metrics (/metrics and /healthz on 127.0.0.1 with ``metrics_port``: 0 = any free port, None = off), in a
daemon thread the service starts and stops.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from lineagewire.config import Settings
from lineagewire.consumers.runtime import ConsumerRuntime, Handler, RetryPolicy, RunStats

log = logging.getLogger(__name__)

__all__ = ["Tracker"]


class Tracker:
    """Runs ``handler`` on ``ConsumerRuntime`` over ``lineage.jobs`` in a thread named ``thread_name``."""

    #: what the tracker does, for its log lines ("refresh status tracking")
    what = "tracking"

    def __init__(self, settings: Settings, handler: Handler, *, group_id: str, thread_name: str,
                 metrics_port: int | None = None, retry: RetryPolicy | None = None,
                 consumer_config: dict[str, Any] | None = None) -> None:
        self.handler = handler
        self.runtime = ConsumerRuntime(settings, handler, topics=[settings.topics.jobs], group_id=group_id,
                                       retry=retry or RetryPolicy(initial=0.5, maximum=30.0),
                                       metrics_port=metrics_port, consumer_config=consumer_config)
        self._thread_name = thread_name
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self.runtime.run()
        except BaseException as exc:  # noqa: BLE001 - logged; /health shows the tracker stopped
            self._failed = exc
            log.exception("%s on %s stopped", self.what, ", ".join(self.runtime.topics))

    def stop(self, timeout: float = 60.0) -> None:
        """Finish the event in hand (or leave it uncommitted if the database is still down), commit, stop."""
        if self._thread is not None:
            self.runtime.stop()
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s did not stop within %.0fs", self.what, timeout)
            self._thread = None

    @property
    def applied(self) -> int:
        return int(getattr(self.handler, "applied", 0))

    @property
    def stats(self) -> RunStats:
        return self.runtime.stats

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return self.runtime.metrics_address
