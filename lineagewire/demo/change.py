"""The demo's day two: a job's change, its diff, its impact and the one page it causes.

The good run's driver (examples/two_days.py) waits after day one while the demo shows that day's
results, then runs day two in the same JVM: orders_report reads the ``orders`` column of
daily_orders' output, and daily_orders' next version stops writing it. The registry diffs the
changed run against the good one, ``lineagewire impact`` names the job that reads the column, and
the alerting service sends one ``breaking_change`` page, an incident naming what it affects.
"""

from __future__ import annotations

import pathlib
import subprocess
import threading
from collections.abc import Callable
from typing import IO, Any

import click

from lineagewire.processes import stop_process

from . import show
from .receiver import Receiver

#: the line examples/two_days.py prints when day one is done and it waits for day two
DAY_ONE_DONE = "two_days: day one done"


class Driver:
    """The day-one-and-two Spark driver: its output is copied to a log as it comes, and it waits between
    the days until ``day_two`` starts the second."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: pathlib.Path, **popen: Any) -> None:
        self.log = log
        self.lines: list[str] = []
        self.waiting = False  # day one is done and the driver waits for day two
        self._day_one = threading.Event()
        self.process = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, **popen)
        assert self.process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,), name="demo-driver",
                                        daemon=True)
        self._reader.start()

    def _read(self, stdout: IO[str]) -> None:
        with self.log.open("w") as log:
            for line in stdout:
                log.write(line)
                log.flush()
                self.lines.append(line.rstrip("\n"))
                if line.startswith(DAY_ONE_DONE):
                    self.waiting = True
                    self._day_one.set()
        self._day_one.set()  # it ended before day two: whoever waits learns it from the exit code

    def day_one(self, timeout: float | None = None) -> int | None:
        """Wait until day one is done: None then, else the driver's exit code (it ended first, or was
        stopped when it was still not done after ``timeout`` seconds)."""
        self._day_one.wait(timeout)
        if self.waiting:
            return None
        self.stop()
        return self.process.returncode

    def day_two(self, timeout: float) -> int:
        """Start day two and wait until the driver ends; its exit code."""
        assert self.process.stdin is not None
        self.waiting = False
        self.process.stdin.write("\n")
        self.process.stdin.close()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            stop_process(self.process, 10)
            raise click.ClickException(f"day two did not end within {timeout:.0f}s; see {self.log}") from None
        self._reader.join(5)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            stop_process(self.process, 10)
        self._reader.join(5)


def show_day_two(driver: Driver, receiver: Receiver, registry_db: str, data: pathlib.Path, timeout: float,
                 caught_up: Callable[[], None]) -> None:
    """Run day two, then print its diff, its impact and its page. ``caught_up()`` waits until the registry
    has handled every event on the topic (and fails if it does not in time)."""
    from .command import lw, step, wait_until

    step("Day two: orders_report reads daily_revenue's `orders`; then daily_orders v2 stops writing it")
    start = len(driver.lines)
    code = driver.day_two(timeout)
    shown = [line for line in driver.lines[start:] if line.startswith(("orders_report:", "daily_orders:"))]
    show.echo("  " + "\n  ".join(shown or [f"(output in {driver.log})"]))
    if code != 0:
        raise click.ClickException(f"day two failed (exit {code}); see {driver.log}")
    pages = wait_until(lambda: show.breaking_pages(receiver), timeout)
    if not pages:
        raise click.ClickException(f"no breaking_change page reached the webhook within {timeout:.0f}s; "
                                   f"see {driver.log.parent / 'consume-alerting.log'}")
    caught_up()
    page = pages[0]
    run_id = next(a for a in page["alerts"] if a["labels"]["kind"] == "breaking_change")["annotations"]["writer_run"]

    step("What changed: the registry's diff of the v2 run against the job's previous good run")
    if not show.show_diff_and_impact(lw, run_id, data / "marts" / "daily_revenue", "orders", registry_db,
                                     lambda: step("Who it breaks: everything downstream of the dropped column")):
        raise click.ClickException("`lineagewire runs diff` or `lineagewire impact` failed; see consume-registry.log")

    step("The one page it causes: the alerting service's breaking_change notification, an incident")
    show.show_page(page, len(show.breaking_pages(receiver)))
