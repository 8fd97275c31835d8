"""What an instrumented process does once its SparkSession exists (see ``_boot/sitecustomize.py``).

The emitter is installed with settings from ``spark.lineagewire.*`` conf keys
and ``LINEAGEWIRE_*`` variables (``lineagewire instrument`` sets the latter from
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

log = logging.getLogger(__name__)

__all__ = ["BOOT_DIR", "INSTRUMENT_ENV", "activate_on"]

#: The folder ``lineagewire instrument`` puts first on PYTHONPATH.
BOOT_DIR = pathlib.Path(__file__).with_name("_boot")
INSTRUMENT_ENV = "LINEAGEWIRE_INSTRUMENT"


def activate_on(spark: Any) -> None:
    """Install the emitter on ``spark`` (once), and make SIGTERM end the run as CANCELED."""
    from .emitter import install

    try:
        install(spark)
    except Exception as exc:  # noqa: BLE001 - report and let the job run
        sys.stderr.write(f"lineagewire: the emitter did not start, the job runs without it: {exc}\n")
        return
    _terminate_as_cancel()


def _terminate_as_cancel() -> None:
    # By default SIGTERM kills Python without running atexit: the run would never end. Raising
    # KeyboardInterrupt instead unwinds the job normally and ends the run CANCELED.
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt(f"terminated by signal {signum}")

    signal.signal(signal.SIGTERM, on_term)


def child_environment(base: dict[str, str] | None = None, **settings: str | None) -> dict[str, str]:
    """The environment for an instrumented process: boot folder first on PYTHONPATH, settings as variables."""
    env = dict(os.environ if base is None else base)
    paths = [str(BOOT_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(BOOT_DIR)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[INSTRUMENT_ENV] = "1"
    for key, value in settings.items():
        if value is not None:
            env["LINEAGEWIRE_" + key.upper()] = value
    return env
