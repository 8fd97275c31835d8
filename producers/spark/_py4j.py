"""py4j housekeeping shared by the emitter and the refresh runner."""

from __future__ import annotations

import contextlib
from typing import Any


def release_thread_connection() -> None:
    """Close the calling thread's own py4j connection before the thread ends.

    PySpark pins one py4j connection per Python thread; left to the garbage collector it is
    dropped with its socket open (a ResourceWarning, an error under the tests' warning filter).
    """
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover - only called where pyspark runs
        return
    client: Any = getattr(SparkContext._gateway, "_gateway_client", None)
    get = getattr(client, "get_thread_connection", None)
    if client is None or get is None:
        return
    connection = get()
    if connection is None:
        return
    with contextlib.suppress(ValueError):
        client.deque.remove(connection)
    connection.close()
    client.thread_connection.connection = None
