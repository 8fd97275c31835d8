"""``lineagewire demo``: the main job, end to end, on this machine.

1. starts the local Kafka (unless ``--bootstrap-servers`` names a cluster) and creates the topics;
2. starts a small OpenLineage HTTP receiver on 127.0.0.1 standing in for a backend
   such as Marquez (which needs Docker), and ``lineagewire consume openlineage``
   posting to it, as a separate process in its own consumer group;
3. runs an unchanged PySpark script (examples/daily_orders.py) under
   ``lineagewire instrument``, so its run status and lineage go to Kafka;
4. shows the run's events with ``lineagewire subscribe`` and what the backend
   received: OpenLineage runs with inputs, outputs and column lineage.

Everything it writes goes under ``--out`` (default ./demo-output).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "daily_orders.py"
VALIDATOR = ROOT.parent / "shared" / "tools" / "validate_openlineage.py"


class Receiver:
    """Accepts OpenLineage POSTs (``/api/v1/lineage``) and keeps them in memory and in a JSON-lines file."""

    def __init__(self, path: pathlib.Path) -> None:
        self.events: list[dict[str, Any]] = []
        self.path = path
        path.write_text("")
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                event = json.loads(body)
                receiver.events.append(event)
                with receiver.path.open("a") as f:
                    f.write(json.dumps(event) + "\n")
                self.send_response(201)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _step(text: str) -> None:
    click.secho(f"\n== {text}", fg="cyan", bold=True)


def _lw(*args: str) -> list[str]:
    return [sys.executable, "-m", "lineagewire", *args]


def _summarise(events: list[dict[str, Any]]) -> None:
    for ev in events:
        run = ev["run"]
        parent = run.get("facets", {}).get("parent", {}).get("run", {}).get("runId")
        ins = ", ".join(d["name"] for d in ev.get("inputs", [])) or "-"
        outs = ", ".join(d["name"] for d in ev.get("outputs", [])) or "-"
        click.echo(f"  {ev['eventType']:<9} {ev['job']['name'][:58]:<58} run {run['runId'][:8]}"
                   f"{' parent ' + parent[:8] if parent else ''}")
        if ev.get("inputs") or ev.get("outputs"):
            click.echo(f"            {ins}  ->  {outs}")
        for out in ev.get("outputs", []):
            cl = out.get("facets", {}).get("columnLineage", {}).get("fields", {})
            for field, spec in list(cl.items())[:6]:
                kinds: dict[str, list[str]] = {"DIRECT": [], "INDIRECT": []}
                for i in spec.get("inputFields", []):
                    types = {t.get("type", "DIRECT") for t in i.get("transformations", [])} or {"DIRECT"}
                    for t in types & set(kinds):
                        kinds[t].append(f"{i['name'].rsplit('/', 1)[-1]}.{i['field']}")
                click.echo(f"              column {field} <- {', '.join(kinds['DIRECT']) or '-'}"
                           f"   (indirect: {', '.join(kinds['INDIRECT']) or '-'})")


@click.command()
@click.option("--out", type=click.Path(file_okay=False), default="demo-output", show_default=True)
@click.option("--port", type=int, default=9092, show_default=True, help="Port of the local Kafka.")
@click.option("--keep-kafka", is_flag=True, help="Leave the local Kafka running afterwards.")
@click.option("--timeout", type=float, default=120, show_default=True,
              help="Seconds to wait for the OpenLineage events to arrive.")
@click.pass_context
def demo(ctx: click.Context, out: str, port: int, keep_kafka: bool, timeout: float) -> None:
    """Run a real PySpark job and show its events flowing through Kafka into OpenLineage."""
    from lineagewire.cli import settings_from
    from lineagewire.kafka.local import LocalKafka
    from lineagewire.kafka.topics import create_topics

    if not EXAMPLE.is_file():
        raise click.ClickException(f"the demo needs the repository checkout ({EXAMPLE} is missing)")
    out_dir = pathlib.Path(out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    explicit = (ctx.find_root().obj or {}).get("bootstrap_servers") or os.environ.get("LINEAGEWIRE_BOOTSTRAP_SERVERS")
    broker = None
    if explicit:
        settings = settings_from(ctx)
    else:
        _step(f"Starting the local Kafka on 127.0.0.1:{port}")
        broker = LocalKafka(port=port).start(progress=click.echo)
        settings = settings_from(ctx, bootstrap_servers=broker.bootstrap_servers)
    create_topics(settings)
    env = {**os.environ, "LINEAGEWIRE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "LINEAGEWIRE_TOPICS__JOBS": settings.topics.jobs}

    _step("Starting an OpenLineage receiver and `lineagewire consume openlineage`")
    receiver = Receiver(out_dir / "openlineage-received.jsonl")
    consumer_log = (out_dir / "consume-openlineage.log").open("w")
    consumer = subprocess.Popen(_lw("consume", "openlineage", "--url", receiver.url, "--group", "lineagewire-demo"),
                                env=env, stdout=consumer_log, stderr=subprocess.STDOUT)
    click.echo(f"  receiver {receiver.url}, consumer pid {consumer.pid} (log {consumer_log.name})")
    started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    try:
        _step("Running examples/daily_orders.py, unchanged, under `lineagewire instrument`")
        job = subprocess.run(_lw("instrument", "--", sys.executable, str(EXAMPLE), str(out_dir / "data")),
                             env=env, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        (out_dir / "job.log").write_text(job.stdout)
        lines = [line for line in job.stdout.splitlines() if line.startswith("daily_orders")]
        click.echo("  " + ("\n  ".join(lines) or f"(job output in {out_dir / 'job.log'})"))
        if job.returncode != 0:
            raise click.ClickException(f"the job failed (exit {job.returncode}); see {out_dir / 'job.log'}")

        _step("Its events on Kafka: `lineagewire subscribe --from <start> --exit-at-end --format table`")
        sub = subprocess.run(_lw("subscribe", "--from", started.isoformat(), "--exit-at-end", "--format", "table",
                                 "--job", "daily_orders"), env=env, check=False, capture_output=True, text=True)
        click.echo(sub.stdout.rstrip())

        _step("What the OpenLineage backend received")
        run_ids = set()
        for line in sub.stdout.splitlines()[1:]:
            parts = line.split()
            if len(parts) > 5:
                run_ids.add(parts[5])
        deadline = time.monotonic() + timeout
        wanted: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            wanted = [e for e in receiver.events if e["job"]["name"].startswith("daily_orders")
                      and e["eventTime"] >= started.isoformat()[:19]]
            if any(e["eventType"] in ("COMPLETE", "FAIL") and "parent" not in e["run"].get("facets", {})
                   for e in wanted):
                break
            time.sleep(0.5)
        time.sleep(2)  # the last actions' events may trail the run's COMPLETE by a moment
        wanted = [e for e in receiver.events if e["job"]["name"].startswith("daily_orders")
                  and e["eventTime"] >= started.isoformat()[:19]]
        _summarise(wanted)
        click.echo(f"\n  {len(wanted)} OpenLineage events, all in {receiver.path}")
        if VALIDATOR.is_file():
            check = subprocess.run([sys.executable, str(VALIDATOR), str(receiver.path)], capture_output=True,
                                   text=True, check=False)
            verdict = "valid against the OpenLineage spec" if check.returncode == 0 else check.stdout[-2000:]
            click.echo(f"  spec check: {verdict}")
        if not wanted:
            raise click.ClickException(f"no OpenLineage events arrived within {timeout:.0f}s; see {consumer_log.name}")
    finally:
        consumer.send_signal(signal.SIGTERM)
        try:
            consumer.wait(30)
        except subprocess.TimeoutExpired:
            consumer.kill()
            consumer.wait()
        consumer_log.close()
        receiver.close()
        if broker is not None and not keep_kafka:
            broker.stop()
            click.echo("\nStopped the local Kafka (its data stays; `lineagewire kafka start` brings it back).")
        elif broker is not None:
            click.echo(f"\nKafka keeps running on {broker.bootstrap_servers}; stop it with `lineagewire kafka stop`.")
