"""Process-level hooks: the emitters alive in this process, and how each one's runs end with the process.

Installed once per process, at the first ``install()``:

* ``sys.excepthook`` remembers the exception the script dies of, so the
  application run ends FAILED (or CANCELED for Ctrl-C) with that error;
* ``atexit`` closes every emitter still open (registered after PySpark's own
  handler, which kills the JVM, so it runs first: the JVM is still there);
* ``SparkContext.stop`` is wrapped so that ``spark.stop()`` closes the
  context's emitters before the context goes.

These are process-wide by nature (there is one ``sys.excepthook``); they are
installed only when an emitter is, never on import.
"""

from __future__ import annotations

import atexit
import functools
import logging
import sys
import threading
from typing import Any, Protocol

from lineagewire.schemas.events import ErrorInfo

from .runs import error_info, is_cancellation

log = logging.getLogger(__name__)

__all__ = ["INSTALL_LOCK", "Closable", "active", "exit_status", "install_process_hooks", "register", "stopping",
           "unregister"]


class Closable(Protocol):
    """What these hooks need of an emitter: its SparkContext and ``close()``.

    The emitter imports this module, never the other way round (issue 24): the
    hooks know emitters only through this protocol.
    """

    spark_context: Any

    def close(self, timeout: float | None = None) -> None: ...

#: held while an emitter is installed or closed
INSTALL_LOCK = threading.RLock()
_ACTIVE: list[Closable] = []
_installed = False
_uncaught: BaseException | None = None


def register(emitter: Closable) -> None:
    """``emitter`` is open: close it at exit and at its context's ``stop()``."""
    with INSTALL_LOCK:
        _ACTIVE.append(emitter)
    install_process_hooks()


def unregister(emitter: Closable) -> None:
    with INSTALL_LOCK:
        if emitter in _ACTIVE:
            _ACTIVE.remove(emitter)


def active() -> list[Closable]:
    """The emitters open in this process."""
    with INSTALL_LOCK:
        return list(_ACTIVE)


def exit_status() -> tuple[str, ErrorInfo | None]:
    """FINISHED, or FAILED / CANCELED with the error when the interpreter is dying of an uncaught exception."""
    if _uncaught is None:
        return "FINISHED", None
    return ("CANCELED" if is_cancellation(_uncaught) else "FAILED"), error_info(_uncaught)


def stopping(interrupt: BaseException) -> None:
    """The process was told to stop (SIGTERM): from now on its runs end CANCELED with ``interrupt``, whichever
    ends them first, the JVM's application-end callback or the exit's close."""
    global _uncaught
    _uncaught = interrupt


def install_process_hooks() -> None:
    """Install the excepthook, atexit and ``SparkContext.stop`` hooks (once per process)."""
    global _installed
    with INSTALL_LOCK:
        if _installed:
            return
        _installed = True
    previous_hook = sys.excepthook

    def excepthook(exc_type: Any, exc: BaseException, tb: Any) -> None:
        global _uncaught
        _uncaught = exc
        previous_hook(exc_type, exc, tb)

    sys.excepthook = excepthook
    atexit.register(_close_all)

    from pyspark import SparkContext

    original_stop = SparkContext.stop
    if getattr(original_stop, "_lineagewire", False):
        return

    @functools.wraps(original_stop)
    def stop(self: Any, *args: Any, **kwargs: Any) -> Any:
        for emitter in [e for e in active() if e.spark_context is self]:
            try:
                emitter.close()
            except Exception:  # noqa: BLE001 - never stand in the way of stop()
                log.exception("closing the lineagewire emitter at SparkContext.stop() failed")
        return original_stop(self, *args, **kwargs)

    stop._lineagewire = True  # type: ignore[attr-defined]
    SparkContext.stop = stop  # type: ignore[method-assign]


def _close_all() -> None:
    for emitter in active():
        try:
            emitter.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            log.exception("closing the lineagewire emitter at exit failed")
