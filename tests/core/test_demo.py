"""`lineagewire demo` (the README's first command) works, and works again on the same checkout."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest


def _run_demo(bootstrap: str, out: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": bootstrap}
    return subprocess.run([sys.executable, "-m", "lineagewire", "demo", "--out", str(out), "--timeout", "180",
                           "--no-wait", "--ui-port", "0", *args],
                          env=env, capture_output=True, text=True, timeout=600, check=False)


def _section(stdout: str, title: str) -> str:
    """The text of the demo's ``== title`` section, up to the next one."""
    match = re.search(rf"^== {re.escape(title)}.*?$(.*?)(?=^== |\Z)", stdout, re.M | re.S)
    assert match, f"no section {title!r} in:\n{stdout[-3000:]}"
    return match.group(1)


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1200)  # two drivers (the bad day; the good run and day two), then one, and five services, twice
def test_the_demo_runs_twice_on_the_same_folder(kafka_bootstrap: str, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "demo-output"
    runs = []
    # The second run skips the failing job: what it proves is that a run on the same folder works again.
    for args in ((), ("--skip-bad-day",)):
        proc = _run_demo(kafka_bootstrap, out, *args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        match = re.search(r"(\d+) OpenLineage events", proc.stdout)
        assert match and int(match.group(1)) >= 3, proc.stdout[-3000:]
        assert "daily_orders: wrote" in proc.stdout
        if not args:
            _check_every_service(proc.stdout)
        _check_day_two(proc.stdout)
        runs.append(re.search(r"Everything this run wrote is in (\S+)", proc.stdout).group(1))  # type: ignore[union-attr]
    first, second = map(pathlib.Path, runs)
    assert first != second and first.is_dir() and second.is_dir()
    assert (out / "latest").resolve() == second.resolve()
    # each run wrote its own tables: the second did not reuse (or trip over) the first one's
    assert (first / "data" / "warehouse" / "daily_revenue_nl").is_dir()
    assert (second / "data" / "warehouse" / "daily_revenue_nl").is_dir()


def _check_every_service(stdout: str) -> None:
    """The first run's output shows each consumer service's own result, not only that it ran."""
    bad_day = _section(stdout, "A bad day")
    assert "FIRING   daily-orders-failed [critical] job daily_orders" in bad_day
    assert "ValueError: bad amount" in bad_day  # the traceback's last line, not the Python worker's preamble
    resolved = _section(stdout, "Alerting")
    assert "RESOLVED daily-orders-failed" in resolved and re.search(r"\bresolved\b.*daily-orders-failed", resolved)
    datahub = _section(stdout, "DataHub")
    assert "DataFlow urn:li:dataFlow:(spark,daily_orders," in datahub
    assert re.search(r"column \$RUN/data/marts/daily_revenue\.revenue <- \$RUN/data/raw/orders\.amount", datahub)
    assert "COMPLETE FAILURE" in datahub and "COMPLETE SUCCESS" in datahub  # the bad day's and the good run's
    assert "`datahub check metadata-file datahub.json`: passed" in datahub
    registry = _section(stdout, "Job registry")
    assert "$RUN/data/marts/daily_revenue  [spark/daily_orders]" in registry
    archive = _section(stdout, "Audit archive")
    assert re.search(r"daily_orders\s+FAILED\s+1", archive) and re.search(r"daily_orders\s+FINISHED\s+1", archive)
    assert re.search(r"verify ok: \d+ files, \d+ records", archive) and ", 0 problems" in archive
    ui = _section(stdout, "The web UI")
    assert re.search(r"open http://127\.0\.0\.1:\d+/ui/jobs", ui)
    shot = re.search(r"screenshot of the graph: (\S+\.png)", ui)
    assert shot, ui  # chromium is installed by make system-deps
    assert pathlib.Path(shot.group(1)).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _check_day_two(stdout: str) -> None:
    """Day two shows the change's diff, its impact and its one page, each with what it is about: the column
    daily_orders v2 dropped, and orders_report, the job that reads it."""
    day_two = _section(stdout, "Day two")
    assert "orders_report: wrote" in day_two and "daily_orders: wrote" in day_two, day_two
    diff = _section(stdout, "What changed")
    assert "of spark/daily_orders (FINISHED) against run" in diff, diff
    assert "schema of file $RUN/data/marts/daily_revenue: column removed: orders" in diff, diff
    impact = _section(stdout, "Who it breaks")
    assert "impact of file $RUN/data/marts/daily_revenue column orders: 1 jobs" in impact, impact
    assert re.search(r"^\s+1\s+spark/orders_report\s+\(DIRECT", impact, re.M), impact
    page = _section(stdout, "The one page it causes")
    assert "the webhook got 1 page(s) for the change" in page, page
    assert "FIRING   breaking-change [critical] job daily_orders" in page, page
    assert "spark/daily_orders removed orders on file/$RUN/data/marts/daily_revenue: breaks 1 reader(s)" in page, page
    assert "breaking: spark/orders_report reads orders" in page, page
    assert re.search(r"incident [0-9a-f]+: affects spark/orders_report$", page, re.M), page
