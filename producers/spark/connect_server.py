"""``lineagewire connect-server``: a shared Spark Connect server whose clients' work is reported.

Spark's own ``start-connect-server.sh`` runs ``SparkConnectServer``, a JVM
program: nothing of the emitter (Python) would run in it. This is the same
server started from Python instead: an ordinary SparkSession (every ``--conf``
applies to it, ``spark.jars.packages`` included), the emitter installed on it,
then ``SparkConnectService.start``, the call ``SparkConnectServer`` makes. The
emitter's SparkListener is registered before the server takes its first client,
so every client session is seen (``hooks.py``) and becomes a run of its own
(``connect.py``).

On Spark 3.5 the Connect server is a package (``spark-connect_2.12``), not in PySpark's ``jars/``:
``serve`` adds it to ``spark.jars.packages`` (``versions.connect_package``), so the same command runs on both.

The server binds to 127.0.0.1 unless ``--host`` says otherwise. SIGTERM or
Ctrl-C stops it: the open client sessions' runs and the server's application
run end FINISHED, and the events are flushed (``flush_timeout``).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from . import internals, versions
from .emitter import install

log = logging.getLogger(__name__)

__all__ = ["CONNECT_SERVICE", "serve"]

CONNECT_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService"
#: seconds the server waits for the emitter's SparkListener (compiled once per machine: 2-3 s)
READY_TIMEOUT = 60.0


def serve(conf: Mapping[str, str], *, host: str = "127.0.0.1", port: int = 15002,
          stop: threading.Event | None = None) -> None:
    """Run a Spark Connect server with the emitter on it until ``stop`` is set (default: SIGTERM / SIGINT)."""
    from pyspark.sql import SparkSession

    stop = stop or _stop_on_signals()
    settings = {"spark.app.name": "lineagewire-connect-server", **conf,
                "spark.connect.grpc.binding.address": host, "spark.connect.grpc.binding.port": str(port)}
    if package := versions.connect_package(settings.get("spark.jars.packages", "")):
        settings["spark.jars.packages"] = ",".join(filter(None, (settings.get("spark.jars.packages"), package)))
    spark = SparkSession.builder.config(map=dict(settings)).getOrCreate()
    try:
        emitter = install(spark)
        if not emitter.wait_ready(READY_TIMEOUT):
            log.warning("lineagewire's SparkListener was not ready within %.0fs: sessions opened before it is "
                        "will not be reported", READY_TIMEOUT)
        service = getattr(internals.context_jvm(spark), CONNECT_SERVICE)
        service.start(internals.java_spark_context(spark))
        print(f"lineagewire connect-server: listening on sc://{host}:{port} "
              f"(application run {emitter.app_run.run_id})", flush=True)
        stop.wait()
        service.stop(_none(spark), _none(spark))
    finally:
        spark.stop()  # closes the emitter first (process_hooks): the runs end and the events are flushed


def _none(spark: Any) -> Any:
    return internals.context_jvm(spark).scala.Option.empty()


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        log.info("signal %d: stopping the Spark Connect server", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    else:  # pragma: no cover - serve() from a thread: the caller passes its own event
        sys.stderr.write("lineagewire connect-server: not on the main thread, signals do not stop it\n")
    return stop
