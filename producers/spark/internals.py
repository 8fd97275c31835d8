"""The one door to PySpark's and py4j's non-public names: a PySpark or py4j upgrade is checked here.

Every other module reaches the driver JVM through the functions below; ``tests/producers/spark/
test_internals.py`` fails on a private PySpark or py4j name used anywhere else in the package.

What is used, and why there is no public way:

* ``SparkContext._jvm`` (class attribute): the py4j view of the active context's JVM. Lineage
  extraction runs on an emitter thread with a Catalyst plan in hand, not a session, and needs JVM
  classes (``JavaConverters``, ``SparkSession.getDefaultSession``, ``DeltaLog``, Iceberg's
  ``FieldUtils``). PySpark exposes no JVM handle publicly.
* ``SparkContext._active_spark_context``: the active context itself, for the same callers;
  ``SparkContext.getOrCreate()`` would create one where none is running.
* ``SparkContext._gateway`` / ``sc._gateway``: the py4j ``JavaGateway``, needed to start its
  callback server (listeners written in Python), to build Java arrays (``new_array``) and to tell
  one JVM from another (a cache key). No public accessor.
* ``sc._jvm``: the same JVM view, from a given context.
* ``sc._jsc``: the ``JavaSparkContext``; ``.sc()`` is the Scala ``SparkContext`` that takes
  ``addSparkListener`` / ``removeSparkListener`` and owns the listener bus. PySpark has no
  public listener API for SparkListeners.
* ``spark._jsparkSession``: the JVM ``SparkSession``; its ``listenerManager()`` registers
  QueryExecutionListeners, and its ``streams()`` finds a query's ``StreamExecution``. PySpark
  only wraps the streaming listener (``spark.streams.addListener``), which stays public.
* ``pyspark.java_gateway.ensure_callback_server_started``: the only way to let the JVM call
  Python objects on a gateway PySpark made (PySpark starts it itself only for its own listeners).
* py4j's ``GatewayClient`` members ``_gateway_client``, ``get_thread_connection``, ``deque``,
  ``thread_connection``: closing a thread's pinned connection before the thread ends (py4j has
  no public call for it; left to the garbage collector its socket leaks with a ResourceWarning).
* The environment variable ``SPARK_LOCAL_REMOTE``: PySpark sets it while it runs a Connect server
  in this process (``remote("local")``); nothing public tells that server apart from a remote one.

JVM-side classes reached through these handles (Catalyst plan nodes, ``SparkConnectService``,
Delta's and Iceberg's classes) are Spark's and the connectors' own API surface and stay with the
code that reads them.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

__all__ = ["active_context", "active_jvm", "context_jvm", "gateway", "java_session", "java_spark_context",
           "local_connect_server", "release_thread_connection", "start_callback_server"]


def _context(spark: Any) -> Any:
    """A SparkContext from a SparkSession or a SparkContext."""
    return getattr(spark, "sparkContext", spark)


def active_context() -> Any:
    """The running SparkContext, or None; never creates one."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def active_jvm() -> Any:
    """The py4j JVM view of the running SparkContext, or None when there is none."""
    from pyspark import SparkContext

    return SparkContext._jvm


def context_jvm(spark: Any) -> Any:
    """The py4j JVM view of ``spark`` (a SparkSession or a SparkContext)."""
    return _context(spark)._jvm


def gateway(spark: Any) -> Any:
    """The py4j ``JavaGateway`` of ``spark`` (a SparkSession or a SparkContext)."""
    return _context(spark)._gateway


def java_spark_context(spark: Any) -> Any:
    """The Scala ``SparkContext`` of ``spark`` (a SparkSession or a SparkContext): listeners, listener bus."""
    return _context(spark)._jsc.sc()


def java_session(spark: Any) -> Any:
    """The JVM ``SparkSession`` behind a classic PySpark SparkSession."""
    return spark._jsparkSession


def start_callback_server(gw: Any) -> None:
    """Let the JVM call Python objects through ``gw`` (idempotent)."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(gw)


def local_connect_server() -> bool:
    """True while PySpark runs a Spark Connect server in this process (``remote("local[...]")``)."""
    return bool(os.environ.get("SPARK_LOCAL_REMOTE"))


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
