"""What an instrumented process does once its SparkSession exists (see ``_boot/sitecustomize.py``).

The emitter is installed with settings from ``spark.lineagewire.*`` conf keys
and ``LINEAGEWIRE_EMITTER__*`` variables (``lineagewire instrument`` sets the latter from
its options). A problem is reported on stderr and the job runs on without the
emitter: an instrumented job must never fail because of lineagewire.
"""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import sys
import threading
from typing import Any

from . import internals

log = logging.getLogger(__name__)

__all__ = ["BOOT_DIR", "INSTRUMENT_ENV", "activate_on", "on_term"]

#: The folder ``lineagewire instrument`` puts first on PYTHONPATH.
BOOT_DIR = pathlib.Path(__file__).with_name("_boot")
INSTRUMENT_ENV = "LINEAGEWIRE_INSTRUMENT"


#: seconds a local Connect client waits for the emitter's SparkListener (compiled once per machine, 2-3 s)
CONNECT_READY_TIMEOUT = 30.0


def activate_on(spark: Any) -> None:
    """Install the emitter on ``spark`` (once), and make SIGTERM end the run as CANCELED.

    A Spark Connect client session has no SparkContext of its own. With ``remote("local")``
    (``SPARK_REMOTE=local``) PySpark runs the Connect server in this process, on an ordinary
    SparkContext: the emitter goes there, and the client's actions land in the application run,
    as a classic session's do. A client of a server elsewhere is reported by that server.
    """
    from . import process_hooks
    from .emitter import install

    try:
        if _is_connect(spark):
            classic = _local_connect_server(spark)
            if classic is None or any(e.spark_context is classic.sparkContext for e in process_hooks.active()):
                return
            emitter = install(classic, connect_runs=False)
            # The SparkListener is what sees the client's session: it must be there before its first query.
            if not emitter.wait_ready(CONNECT_READY_TIMEOUT):
                log.warning("lineagewire's SparkListener was not ready within %.0fs: the first Spark Connect "
                            "actions may go unreported", CONNECT_READY_TIMEOUT)
        else:
            install(spark)
    except Exception as exc:  # noqa: BLE001 - report and let the job run
        sys.stderr.write(f"lineagewire: the emitter did not start, the job runs without it: {exc}\n")
        return
    _terminate_as_cancel()


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def _local_connect_server(client: Any) -> Any:
    """The classic SparkSession of the Connect server PySpark started in this process; None for a remote one."""
    if not internals.local_connect_server():
        sys.stderr.write("lineagewire: this Spark Connect client talks to a server elsewhere; its lineage is "
                         "reported by that server (start it with `lineagewire connect-server`, docs/emitter.md)\n")
        return None
    from pyspark import SparkContext
    from pyspark.sql.session import SparkSession

    # The server's context exists (PySpark made it for the client): getOrCreate returns it, and a
    # SparkSession on it wraps the server's default session, as PySpark's own local-server start does.
    return SparkSession(SparkContext.getOrCreate())


def _terminate_as_cancel() -> None:
    # By default SIGTERM kills Python without running atexit: the run would never end. Raising
    # KeyboardInterrupt instead unwinds the job normally and ends the run CANCELED.
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    signal.signal(signal.SIGTERM, on_term)


def on_term(signum: int, frame: Any) -> None:
    """SIGTERM's handler in an instrumented driver: the process is stopping, so its runs end CANCELED."""
    from . import process_hooks

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    interrupt = KeyboardInterrupt(f"terminated by signal {signum}")
    # The JVM got the same signal: its application-end callback can come before this exception reaches
    # sys.excepthook, and must already see the process as stopping.
    process_hooks.stopping(interrupt)
    raise interrupt


def child_environment(base: dict[str, str] | None = None, **settings: str | None) -> dict[str, str]:
    """The environment for an instrumented process: boot folder first on PYTHONPATH, settings as variables."""
    from .config import ENV_PREFIX

    env = dict(os.environ if base is None else base)
    paths = [str(BOOT_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(BOOT_DIR)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[INSTRUMENT_ENV] = "1"
    for key, value in settings.items():
        if value is not None:
            env[ENV_PREFIX + key.upper()] = value
    return env
