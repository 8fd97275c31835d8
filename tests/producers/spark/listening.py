"""Register a Python QueryExecutionListener on a session and remove it again, for the tests' capturing listeners.

``listenerManager().register(obj)`` with a Python object makes a py4j proxy, and
``unregister(obj)`` makes another one, which Spark, removing by equality, does not
find: the listener stays on the session for good. Each one left behind runs on
Spark's listener bus for every later action of the shared test session, and the
capturing ones extract lineage there, on the bus thread: a few dozen of them
delay every later test's callbacks by seconds. So register one proxy and
unregister that same proxy (as ``producers/spark/hooks.py`` does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def query_listener(spark: Any, listener: Any) -> Iterator[Any]:
    """``listener`` registered on ``spark`` while the block runs; the same Java proxy is unregistered after it."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    holder = gateway.jvm.java.util.ArrayList()
    holder.add(listener)
    proxy = holder.get(0)
    manager = spark._jsparkSession.listenerManager()
    manager.register(proxy)
    try:
        yield listener
    finally:
        manager.unregister(proxy)
