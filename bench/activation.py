"""What activation by configuration costs a driver that does not turn it on (issue 30.1: at most 50 ms).

    .venv/bin/python -m bench.activation [--starts 40] [--lookups 2000]

With lineagewire installed, every Python process of the environment runs ``lineagewire-activate.pth`` at
start-up, and every ``SparkSession.Builder.getOrCreate`` asks the session for ``spark.lineagewire.enabled``.
A driver without the key pays exactly those two things; an executor's Python worker only the first.

- ``startup_ms``: the site folder's start-up files processed as Python processes them at start-up
  (``site.addsitedir``), once with the hook's .pth and once without it, in fresh interpreters started with
  ``-S`` (so nothing ran before); the runs alternate, and the figure is the median of the per-pair
  differences.
- ``lookup_ms``: the wrapped getOrCreate's own work on a live local SparkSession without the key (the conf
  look-up through py4j), the median of ``--lookups`` calls.

Target: startup + lookup at most 50 ms. Results go to ``bench/results/activation.json``.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

from bench._common import save

_START = """
import site, sys, time
sys.path.append({purelib!r})
t = time.perf_counter()
site.addsitedir({pths!r})
print((time.perf_counter() - t) * 1000)
"""


def _pth_folders(purelib: str, tmp: pathlib.Path) -> dict[bool, pathlib.Path]:
    """Two folders with the site folder's .pth files, one without ours: the environment's other start-up
    files (an editable install's finder, setuptools' distutils shim) run in both."""
    folders = {True: tmp / "with", False: tmp / "without"}
    for with_hook, folder in folders.items():
        folder.mkdir()
        for pth in pathlib.Path(purelib).glob("*.pth"):
            if with_hook or pth.name != "lineagewire-activate.pth":
                shutil.copy(pth, folder / pth.name)
    return folders


def _startup_pair(purelib: str, folders: dict[bool, pathlib.Path]) -> tuple[float, float]:
    took = []
    for with_hook in (True, False):
        code = _START.format(purelib=purelib, pths=str(folders[with_hook]))
        out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True)
        took.append(float(out.stdout.split()[-1]))
    return took[0], took[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=40)
    ap.add_argument("--lookups", type=int, default=2000)
    args = ap.parse_args()
    purelib = sysconfig.get_paths()["purelib"]
    with tempfile.TemporaryDirectory() as tmp:
        folders = _pth_folders(purelib, pathlib.Path(tmp))
        pairs = [_startup_pair(purelib, folders) for _ in range(args.starts)]
    startup = statistics.median(a - b for a, b in pairs)

    import lineagewire_activate
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate())
    try:
        lineagewire_activate.activate_if_enabled(spark)
        times = []
        for _ in range(args.lookups):
            t = time.perf_counter()
            lineagewire_activate.activate_if_enabled(spark)
            times.append((time.perf_counter() - t) * 1000)
    finally:
        spark.stop()
    lookup = statistics.median(times)
    save("activation", {
        "startup_ms_with_hook_minus_without": round(startup, 3),
        "site_processing_ms_with_hook": round(statistics.median(a for a, _ in pairs), 3),
        "site_processing_ms_without_hook": round(statistics.median(b for _, b in pairs), 3),
        "lookup_ms_per_getOrCreate": round(lookup, 3),
        "lookup_ms_p99": round(sorted(times)[int(len(times) * 0.99) - 1], 3),
        "driver_total_ms": round(startup + lookup, 3),
        "target_ms": 50,
        "met": startup + lookup <= 50,
        "pyspark": __import__("pyspark").__version__,
    })


if __name__ == "__main__":
    main()
