"""The demo's steps, in the order a user would take them.

1. start the local Kafka (unless ``--bootstrap-servers`` names a cluster) and create the topics;
2. start the consumer services (OpenLineage, DataHub, alerting, archive, registry), each a separate
   process in its own consumer group, writing to this run's own folder or to a local receiver
   standing in for the OpenLineage backend and the alert webhook;
3. run an unchanged PySpark script (examples/daily_orders.py) under ``lineagewire instrument``:
   first its failing variant (a bad day: the alert fires), then the good run (the alert resolves),
   in a driver (examples/two_days.py) that then waits for day two;
4. wait until every service has committed past the job's last event (the runtime commits only
   after the output is durable, so then everything has arrived), and show what each made of it;
5. day two, in the same driver (``change.py``): a downstream job reads a column of the good run's
   output, the job's next version drops it; show the run's diff, the column's impact and the one
   page (a ``breaking_change`` incident) the alerting service sends;
6. end on the web UI (``lineagewire ui``) over the demo's registry and alerts: print its URL, save a
   screenshot of the raw orders' lineage graph into the run's folder (with chromium, where installed),
   and keep it up until Enter (``--no-wait``: stop at once).

Every run gets a fresh folder ``<out>/<UTC time>``, so the job's tables and the services' outputs
never meet those of an earlier run; ``<out>/latest`` points at the newest.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

import click

from lineagewire.processes import stop_process

from . import show
from .change import Driver, show_day_two
from .receiver import Receiver

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "daily_orders.py"
TWO_DAYS = ROOT / "examples" / "two_days.py"
VALIDATOR = ROOT.parent / "shared" / "tools" / "validate_openlineage.py"


def step(text: str) -> None:
    click.secho(f"\n== {text}", fg="cyan", bold=True)


def lw(*args: str) -> list[str]:
    return [sys.executable, "-m", "lineagewire", *args]


@dataclass
class Service:
    """One consumer service the demo runs as its own process."""

    name: str
    args: list[str]
    group: str
    topics: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None

    def start(self, run_dir: pathlib.Path, env: dict[str, str]) -> None:
        self.log = (run_dir / f"consume-{self.name}.log").open("wb")
        self.process = subprocess.Popen(lw("consume", self.name, *self.args, "--group", self.group), env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        click.echo(f"  consume {self.name:<12} pid {self.process.pid}, group {self.group}, log {self.log.name}")

    @property
    def died(self) -> bool:
        """Whether its process was started and has ended."""
        return self.process is not None and self.process.poll() is not None

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, 30)
        if self.log is not None:
            self.log.close()


def rules_file(run_dir: pathlib.Path, webhook: str) -> pathlib.Path:
    """The demo's alert rules: a failed ``daily_orders`` run, and a change of any job's output that breaks a
    job reading it, notify the local webhook at once."""
    path = run_dir / "demo-rules.yaml"
    path.write_text(
        "route: {group_by: [alertname, job], group_wait: 0s, group_interval: 0s, repeat_interval: 4h,\n"
        "        channels: [hook]}\n"
        f"channels:\n  hook: {{type: webhook, url: \"{webhook}\"}}\n"
        "rules:\n  - {name: daily-orders-failed, kind: run_failed, match: {job: daily_orders}, severity: critical}\n"
        "  - {name: breaking-change, kind: breaking_change, severity: critical}\n")
    return path


def run_job(env: dict[str, str], data: pathlib.Path, log: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    job = subprocess.run(lw("instrument", "--", sys.executable, str(EXAMPLE), str(data), *args),
                         env=env, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write_text(job.stdout)
    return job


def wait_until(predicate: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := predicate()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return result


def _prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # Linux; looked up here, not in the forked child
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _die_with_parent() -> None:
    """In the service's process, before it runs: on Linux, get SIGTERM when the demo dies, however it dies
    (a SIGKILLed demo would otherwise leave its five services running)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def new_run_dir(out: pathlib.Path) -> pathlib.Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    run_dir = out / f"{stamp}-{uuid.uuid4().hex[:4]}"
    run_dir.mkdir(parents=True)
    latest = out / "latest"
    with contextlib.suppress(OSError):
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_dir.name)
    return run_dir


def wait_caught_up(settings: object, services: list[Service], topic: str, timeout: float) -> list[str]:
    """Wait until each service's group has committed up to the topic's end; the names that did not."""
    from lineagewire.config import Settings

    assert isinstance(settings, Settings)
    conf = settings.as_librdkafka_dict()
    ends = _ends(conf, topic)
    behind = [s.name for s in services]
    deadline = time.monotonic() + timeout
    while behind and time.monotonic() < deadline:
        still = []
        for svc in services:
            if svc.name not in behind:
                continue
            if svc.died:
                continue  # reported by the caller from its log
            if _is_behind(conf, svc.group, topic, ends):
                still.append(svc.name)
        behind = still
        if behind:
            time.sleep(0.5)
    return behind


def caught_up_or_fail(settings: object, services: list[Service], topic: str, timeout: float,
                      run_dir: pathlib.Path) -> None:
    """``wait_caught_up``, and fail naming the services that were not."""
    behind = wait_caught_up(settings, services, topic, timeout)
    if behind:
        raise click.ClickException(f"{', '.join(behind)} did not handle the job's events within {timeout:.0f}s; "
                                   f"see the consume-*.log files in {run_dir}")


def _ends(conf: dict[str, Any], topic: str) -> dict[int, int]:
    """The end offset of each partition of ``topic`` now."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({**conf, "group.id": f"demo-probe-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
    try:
        meta = probe.list_topics(topic, timeout=10)
        parts = [TopicPartition(topic, p) for p in meta.topics[topic].partitions]
        return {tp.partition: probe.get_watermark_offsets(tp, timeout=10)[1] for tp in parts}
    finally:
        probe.close()


def _is_behind(conf: dict[str, Any], group: str, topic: str, ends: dict[int, int]) -> bool:
    """Whether ``group`` has committed short of ``ends`` on some partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in ends], timeout=10)
    finally:
        c.close()
    return any(ends[tp.partition] > 0 and tp.offset < ends[tp.partition] for tp in committed)


def names_a_broker(settings: object) -> bool:
    """Whether the user named a Kafka (flag, LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS or config file): else the demo
    starts one."""
    return "bootstrap_servers" in getattr(settings, "model_fields_set", ())


@click.command()
@click.option("--out", type=click.Path(file_okay=False), default="demo-output", show_default=True,
              help="Folder for the runs; each run writes to a fresh <out>/<UTC time> folder.")
@click.option("--port", type=int, default=9092, show_default=True, help="Port of the local Kafka.")
@click.option("--keep-kafka", is_flag=True, help="Leave the local Kafka running afterwards.")
@click.option("--timeout", type=float, default=120, show_default=True,
              help="Seconds to wait for the services to handle the job's events.")
@click.option("--skip-bad-day", is_flag=True, help="Skip the failing run (and so the alert) and run only the good job.")
@click.option("--ui-port", type=click.IntRange(0, 65535), default=8767, show_default=True,
              help="Port of the web UI the demo ends on (a free one if it is taken).")
@click.option("--no-wait", is_flag=True, help="Stop the web UI at once instead of waiting for Enter.")
@click.pass_context
def demo(ctx: click.Context, out: str, port: int, keep_kafka: bool, timeout: float, skip_bad_day: bool,
         ui_port: int, no_wait: bool) -> None:
    """Run a real PySpark job and show its events flowing through Kafka into the consumer services."""
    from lineagewire.cli import settings_from
    from lineagewire.kafka.local import LocalKafka
    from lineagewire.kafka.topics import create_topics

    if not EXAMPLE.is_file():
        raise click.ClickException(f"the demo needs the repository checkout ({EXAMPLE} is missing)")
    run_dir = new_run_dir(pathlib.Path(out).resolve())
    configured = settings_from(ctx)
    broker = None
    if names_a_broker(configured):
        settings = configured
    else:
        step(f"Starting the local Kafka on 127.0.0.1:{port}")
        broker = LocalKafka(port=port).start(progress=click.echo)
        settings = settings_from(ctx, bootstrap_servers=broker.bootstrap_servers)
    create_topics(settings)
    jobs_topic = settings.topics.jobs
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "LINEAGEWIRE_KAFKA__TOPICS__JOBS": jobs_topic}

    step(f"Starting the consumer services (this run's folder: {run_dir})")
    receiver = Receiver(run_dir)
    click.echo(f"  local receiver {receiver.url} stands in for the OpenLineage backend and the alert webhook")
    show.use_run_dir(run_dir)
    alerts_db, registry_db = f"sqlite:///{run_dir / 'alerts.db'}", f"sqlite:///{run_dir / 'registry.db'}"
    rules = rules_file(run_dir, receiver.url + show.ALERTS_PATH)
    services = [
        Service("openlineage", ["--url", receiver.url], "lineagewire-demo-openlineage"),
        Service("datahub", ["--file", str(run_dir / "datahub.json")], "lineagewire-demo-datahub"),
        Service("alerting", ["--rules", str(rules), "--database", alerts_db], "lineagewire-demo-alerting"),
        Service("archive", ["--to", str(run_dir / "archive"), "--roll-seconds", "2"], "lineagewire-demo-archive"),
        Service("registry", ["--db-url", registry_db], "lineagewire-demo-registry"),
    ]
    driver = None
    try:
        for svc in services:
            svc.start(run_dir, env)

        if not skip_bad_day:
            _bad_day(env, run_dir, receiver, timeout)

        good_started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        driver = _good_run(env, run_dir)

        step("Its events on Kafka: `lineagewire subscribe --from <start> --exit-at-end --format table`")
        show.show_subscribe(lw, env, good_started)

        def caught_up(*names: str) -> None:
            caught_up_or_fail(settings, [s for s in services if s.name in names], jobs_topic, timeout, run_dir)

        # The archive closes its files on a timer (every 5 s): it is waited for only where it is shown.
        caught_up(*(s.name for s in services if s.name != "archive"))
        _show_outputs(receiver, run_dir, good_started, alerts_db, registry_db, timeout, alert=not skip_bad_day,
                      archived=lambda: caught_up("archive"))
        show_day_two(driver, receiver, registry_db, run_dir / "data", timeout, lambda: caught_up("registry"))
        _web_ui(run_dir, env, registry_db, alerts_db, ui_port, timeout, wait=not no_wait)
        click.echo(f"\nEverything this run wrote is in {run_dir}")
    finally:
        if driver is not None:
            driver.stop()
        for svc in services:  # all at once: each takes a moment to commit and close
            if svc.process is not None and svc.process.poll() is None:
                svc.process.terminate()
        for svc in services:
            svc.stop()
        receiver.close()
        if broker is not None and not keep_kafka:
            broker.stop()
            click.echo("\nStopped the local Kafka (its data stays; `lineagewire kafka start` brings it back).")
        elif broker is not None:
            click.echo(f"\nKafka keeps running on {broker.bootstrap_servers}; stop it with `lineagewire kafka stop`.")


def _good_run(env: dict[str, str], run_dir: pathlib.Path) -> Driver:
    """Start the driver and wait until the good run (its day one) is done; the driver waits for day two."""
    step("The good run: examples/daily_orders.py, unchanged, under `lineagewire instrument` "
         "(examples/two_days.py runs it, and keeps the JVM for day two)")
    driver = Driver(lw("instrument", "--", sys.executable, str(TWO_DAYS), str(run_dir / "data")), env,
                    run_dir / "job.log", preexec_fn=_die_with_parent)
    code = driver.day_one()
    lines = [line for line in driver.lines if line.startswith("daily_orders")]
    click.echo("  " + ("\n  ".join(lines) or f"(job output in {run_dir / 'job.log'})"))
    if code is not None:
        raise click.ClickException(f"the job failed (exit {code}); see {run_dir / 'job.log'}")
    return driver


def _bad_day(env: dict[str, str], run_dir: pathlib.Path, receiver: Receiver, timeout: float) -> None:
    step("A bad day: examples/daily_orders.py with `fail` dies in a Python UDF, under `lineagewire instrument`")
    bad = run_job(env, run_dir / "data-bad-day", run_dir / "job-bad-day.log", "fail")
    click.echo(f"  the job exited {bad.returncode}, as it should (its log: {run_dir / 'job-bad-day.log'})")
    if bad.returncode == 0:
        raise click.ClickException("the failing variant of the job did not fail")
    if "bad amount" not in bad.stdout:  # it failed, but not where it should: show why
        tail = "\n".join(line for line in bad.stdout.splitlines()[-40:] if not line.lstrip().startswith("at "))
        raise click.ClickException(f"the failing variant failed before its Python UDF ran:\n{tail}")
    if not wait_until(lambda: show.alert_notifications(receiver, "firing"), timeout):
        raise click.ClickException(f"no alert reached the webhook within {timeout:.0f}s; "
                                   f"see {run_dir / 'consume-alerting.log'}")
    click.echo("  the alerting service notified the webhook:")
    show.show_alert(show.alert_notifications(receiver, "firing")[0])


def _show_outputs(receiver: Receiver, run_dir: pathlib.Path, started: dt.datetime, alerts_db: str, registry_db: str,
                  timeout: float, *, alert: bool, archived: Callable[[], None]) -> None:
    step("OpenLineage: what the backend received")
    if not show.show_openlineage(receiver, VALIDATOR, started):
        raise click.ClickException(f"no OpenLineage events arrived; see {run_dir / 'consume-openlineage.log'}")

    if alert:
        step("Alerting: the good run resolved the bad day's alert")
        if not wait_until(lambda: show.alert_notifications(receiver, "resolved"), timeout):
            raise click.ClickException(f"the alert was not resolved within {timeout:.0f}s; "
                                       f"see {run_dir / 'consume-alerting.log'}")
        show.show_alert(show.alert_notifications(receiver, "resolved")[0])
        click.echo("  $ lineagewire alerts list --all")
        show.show_alert_list(lw, alerts_db)

    step(f"DataHub: the metadata change proposals in {run_dir / 'datahub.json'}")
    if not show.show_datahub(run_dir / "datahub.json"):
        raise click.ClickException("DataHub's own check refused the proposals file")

    step("Job registry: what the example's raw orders feed, across jobs")
    if not show.show_registry(lw, run_dir / "data" / "raw" / "orders", registry_db):
        raise click.ClickException("the registry could not answer; see consume-registry.log")

    archived()
    step("Audit archive: every event kept as Parquet with a hash chain, queried with SQL")
    if not show.show_archive(lw, run_dir / "archive"):
        raise click.ClickException("the archive query or verify failed; see consume-archive.log")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _web_ui(run_dir: pathlib.Path, env: dict[str, str], registry_db: str, alerts_db: str, port: int, timeout: float,
            *, wait: bool) -> None:
    """Serve ``lineagewire ui`` on the demo's databases, screenshot the raw orders' graph, wait for Enter."""
    import httpx

    from lineagewire.kafka.local import free_port

    if port == 0 or not _port_free(port):
        port = free_port()
    step(f"The web UI: `lineagewire ui --db-url {registry_db} --alerts-db {alerts_db} --port {port}`")
    base = f"http://127.0.0.1:{port}"
    with (run_dir / "ui.log").open("wb") as log:
        proc = subprocess.Popen(lw("ui", "--db-url", registry_db, "--alerts-db", alerts_db, "--port", str(port)),
                                env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    try:
        def up() -> bool:
            try:
                return httpx.get(base + "/ui/jobs", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        if not wait_until(lambda: up() or proc.poll() is not None, timeout) or proc.poll() is not None:
            raise click.ClickException(f"the web UI did not start; see {run_dir / 'ui.log'}")
        found = httpx.get(f"{base}/ui/find", params={"dataset": str(run_dir / "data" / "raw" / "orders"),
                                                     "graph": "true"}, timeout=10)
        graph_url = base + found.headers.get("location", "/ui/jobs")
        click.echo(f"  open {base}/ui/jobs  (the raw orders' lineage: {graph_url})")
        shot = run_dir / "lineage-graph.png"
        why_not = _screenshot(graph_url, shot)
        click.echo(f"  screenshot of the graph: {shot}" if why_not is None else f"  no screenshot: {why_not}")
        if wait:
            with contextlib.suppress(EOFError):
                input("  press Enter to stop the web UI ")
    finally:
        stop_process(proc, 10)


def _screenshot(url: str, path: pathlib.Path) -> str | None:
    """Save the graph at ``url`` as a PNG with Debian's chromium (Playwright); None, or why it was not made."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return "chromium is not installed (make system-deps)"
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        return "Playwright is not installed (pip install -e '.[dev]')"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 700})
                page.goto(url)
                page.wait_for_selector(".graph[data-ready='1']", timeout=30_000)
                page.screenshot(path=str(path))
            finally:
                browser.close()
    except Error as exc:
        return f"chromium could not draw the graph: {exc}"
    return None
