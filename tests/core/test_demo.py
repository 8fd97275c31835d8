"""`lineagewire demo` (the README's first command) works, and works again on the same checkout."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest


def _run_demo(bootstrap: str, out: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LINEAGEWIRE_BOOTSTRAP_SERVERS": bootstrap}
    return subprocess.run([sys.executable, "-m", "lineagewire", "demo", "--out", str(out), "--timeout", "180"],
                          env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_runs_twice_on_the_same_folder(kafka_bootstrap: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "demo-output"
    runs = []
    for _ in range(2):
        proc = _run_demo(kafka_bootstrap, out)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        match = re.search(r"(\d+) OpenLineage events", proc.stdout)
        assert match and int(match.group(1)) >= 3, proc.stdout[-3000:]
        assert "daily_orders: wrote" in proc.stdout
        runs.append(re.search(r"Everything this run wrote is in (\S+)", proc.stdout).group(1))  # type: ignore[union-attr]
    first, second = map(pathlib.Path, runs)
    assert first != second and first.is_dir() and second.is_dir()
    assert (out / "latest").resolve() == second.resolve()
    # each run wrote its own tables: the second did not reuse (or trip over) the first one's
    assert (first / "data" / "warehouse" / "daily_revenue_nl").is_dir()
    assert (second / "data" / "warehouse" / "daily_revenue_nl").is_dir()
