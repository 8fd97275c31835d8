"""Shared bits of the benchmarks: machine facts and saving results as JSON."""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import platform
import statistics
import sys
from typing import Any

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "machine": platform.machine()}


def percentile(values: list[float], q: float) -> float:
    """q in [0, 100]; nearest-rank on the sorted values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


def median(values: list[float]) -> float:
    return statistics.median(values)


def save(name: str, results: dict[str, Any]) -> pathlib.Path:
    """Print the results and write them to bench/results/<name>.json."""
    RESULTS.mkdir(exist_ok=True)
    doc = {"benchmark": name, "when": dt.datetime.now(dt.UTC).isoformat(), "machine": machine(), **results}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    print(f"saved {path}", file=sys.stderr)
    return path
