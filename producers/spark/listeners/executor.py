"""A single worker thread with a bounded queue that never blocks the submitter.

Each listener gets one, so a listener that is slow, blocked or raising costs
only its own events: ``submit`` drops (and counts) work when the queue is
full rather than wait, and a failing task is logged and counted.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["BoundedExecutor"]

_STOP = object()


class BoundedExecutor:
    """Runs submitted callables in order on one daemon thread; at most ``maxsize`` waiting."""

    def __init__(self, name: str, maxsize: int = 1000, *, on_exit: Callable[[], None] | None = None) -> None:
        self.name = name
        self._on_exit = on_exit
        self.maxsize = maxsize
        self._queue: queue.Queue[Any] = queue.Queue(maxsize)
        self.dropped = 0
        self.failed = 0
        self.done = 0
        self._last_warning = 0.0
        self._closed = False
        # Daemon: a listener stuck forever must not keep the job's process alive at exit.
        self._thread = threading.Thread(target=self._run, name=f"lineagewire-{name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Queue ``fn(*args)``; False (and a counted, rate-limited warning) if the queue is full or closed."""
        if self._closed:
            self._drop("closed")
            return False
        try:
            self._queue.put_nowait((fn, args))
            return True
        except queue.Full:
            self._drop(f"queue full ({self.maxsize})")
            return False

    def _drop(self, why: str) -> None:
        self.dropped += 1
        now = time.monotonic()
        if now - self._last_warning > 10:
            self._last_warning = now
            log.warning("listener %r dropped an event: %s; %d dropped so far", self.name, why, self.dropped)

    def _run(self) -> None:
        try:
            self._work()
        finally:
            if self._on_exit is not None:
                try:
                    self._on_exit()
                except Exception:  # noqa: BLE001 - cleanup only
                    log.debug("executor %r exit hook failed", self.name, exc_info=True)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                fn, args = item
                try:
                    fn(*args)
                    self.done += 1
                except Exception:
                    self.failed += 1
                    log.exception("listener %r failed on an event (%d failures so far)", self.name, self.failed)
            finally:
                self._queue.task_done()

    def pending(self) -> int:
        return self._queue.unfinished_tasks

    def drain(self, timeout: float) -> bool:
        """Wait until everything queued ran; False if ``timeout`` passed first."""
        deadline = time.monotonic() + max(timeout, 0)
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline or not self._thread.is_alive():
                return False
            time.sleep(0.005)
        return True

    def shutdown(self, timeout: float) -> bool:
        """Run what is queued (within ``timeout``), then stop the thread. False if it did not finish."""
        finished = self.drain(timeout)
        self._closed = True
        try:
            self._queue.put_nowait(_STOP)
        except queue.Full:
            return False
        if finished:
            self._thread.join(max(0.0, min(timeout, 1.0)))
        return finished and not self._thread.is_alive()
