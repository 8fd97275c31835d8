"""The OpenLineage receiver over HTTP into a real broker, with durable acknowledgement, as users deploy it.

    .venv/bin/python -m bench.ingest [--seconds 4] [--concurrency 32] [--array 50] [--client go|aiohttp]
                                     [--bootstrap-servers HOST:PORT]

The receiver runs as users start it, in its own process: ``python -m lineagewire ingest openlineage --port P``
against a real broker (the local one, started for the run, unless ``--bootstrap-servers``). Every answer is a
201 given only once the request's events were confirmed by Kafka (or spooled in the outbox): the run checks
that every answer was 201, that nothing was spooled, and that the topic holds exactly the contract events the
posted events translate into.

The load generator: ``bench/ingest_load`` (Go, built here with ``go build`` into ``~/.cache/lineagewire/bench``),
``--concurrency`` requests in flight over keep-alive connections. It shares the 2 cores with the receiver and the
broker, so it is the cheapest client at hand: a few tens of µs per request, where aiohttp, the cheapest Python
client (the shared notes' table), takes 100-170. The one-event row is repeated with aiohttp for comparison
(``--client aiohttp`` uses it for every row, where Go is missing).

Events: the translation's corpus (``tests/ingest/corpus``: openlineage-spark, dbt-ol, Airflow, static
DatasetEvent and JobEvent, 0.3 to 6 KB), each posted with a fresh run id and time, so every event is new to the
receiver (1.65 contract events each, on average).

Rows:

1. ``one_event_per_post``: openlineage-python's HTTP transport (and Airflow's provider and dbt-ol, which use it)
   posts one event per request: that is the shape users deploy, measured as fast as the receiver answers.
2. ``arrays``: ``--array`` events per request (a JSON array), for producers that batch.
3. ``null_endpoint``: the same requests to a Marquez-shaped null endpoint (an ASGI app answering 201 to
   ``POST /api/v1/lineage``, on the same uvicorn + httptools + uvloop): the ceiling of the HTTP stack and the
   load generator on this machine; the receiver's rate is read against it.
4. ``latency_at_half``: one event per request, paced (open loop) at half the 5,000 events/s target; each
   request's answer time is counted from when it was due, so a stall is not hidden by the requests that
   waited behind it.
5. ``*_2_workers``: rows 1 and 2 with ``--workers 2`` (two receiver processes on the port), for a host whose
   cores are the receiver's; on this machine the load generator and the broker want them too.

The load average before and after is saved with the results: the machine is shared, and a busy one lowers
every row but the null endpoint's.
CPU µs per event are the receiver process's CPU time (``/proc``) over the row's window, divided by its events.
Results: ``bench/results/ingest.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

from bench._common import percentile, save

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "ingest" / "corpus"
GO_CLIENT = pathlib.Path(__file__).resolve().parent / "ingest_load"
CACHE = pathlib.Path.home() / ".cache" / "lineagewire" / "bench"
TARGET_EVENTS_PER_S = 5000
TARGET_P99_MS = 50.0
_HEADERS = {"Content-Type": "application/json"}


async def null_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A Marquez-shaped null endpoint: reads the body, answers 201 (``python -m uvicorn bench.ingest:null_app``)."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 201, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


# -- events ---------------------------------------------------------------------------------------------------


def _templates() -> list[dict[str, Any]]:
    files = sorted(CORPUS.glob("*.json"))
    if not files:
        raise SystemExit(f"bench.ingest reads its events from {CORPUS}; expected OpenLineage events there")
    return [json.loads(f.read_text()) for f in files]


def _fresh(template: dict[str, Any], i: int, now: dt.datetime) -> dict[str, Any]:
    """``template`` as a new event: a new run id and time (and the parent's, when it has one)."""
    event = json.loads(json.dumps(template))
    event["eventTime"] = (now + dt.timedelta(microseconds=i)).isoformat()
    if isinstance(event.get("run"), dict):
        event["run"]["runId"] = str(uuid.uuid4())
    return event


def bodies(n: int, per_request: int) -> tuple[list[bytes], int]:
    """``n`` events as request bodies of ``per_request`` events each (one event: a JSON object, as
    openlineage-python posts it); and how many contract events they translate into."""
    templates = _templates()
    per_template = _translated_per_template(templates)
    now = dt.datetime.now(dt.UTC)
    events = [_fresh(templates[i % len(templates)], i, now) for i in range(n)]
    translated = sum(per_template[i % len(templates)] for i in range(n))
    if per_request == 1:
        return [json.dumps(e).encode() for e in events], translated
    return [json.dumps(events[i:i + per_request]).encode() for i in range(0, n, per_request)], translated


def _translated_per_template(templates: list[dict[str, Any]]) -> list[int]:
    """How many contract events each template translates into (the run id and time do not change that)."""
    from lineagewire.config import Settings
    from lineagewire.producers.ingest.intake import Intake

    intake = Intake(Settings())
    return [len(intake.messages([t])) for t in templates]


# -- processes ------------------------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and its children alive now (the receiver's worker processes)."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        with contextlib.suppress(OSError):
            fields = pathlib.Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                found += [int(child), *_children(int(child))]
    return found


def _free_port() -> int:
    from lineagewire.kafka.local import free_port

    return free_port()


@contextlib.contextmanager
def _process(argv: list[str], port: int, health: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_") or k == "LINEAGEWIRE_HOME"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"{' '.join(argv)} exited: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{health}", timeout=2):
                    break
            except urllib.error.HTTPError:
                break  # it answers: serving
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{' '.join(argv)} did not serve on port {port} within 60 s") from None
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def receiver(bootstrap: str, topic: str, outbox: pathlib.Path,
             workers: int = 1) -> contextlib.AbstractContextManager[Any]:
    port = _free_port()
    argv = [sys.executable, "-m", "lineagewire", "--bootstrap-servers", bootstrap, "ingest", "openlineage",
            "--port", str(port), "--topic", topic, "--outbox-dir", str(outbox), "--workers", str(workers)]
    return _serving(argv, port, "/healthz")


def null_endpoint() -> contextlib.AbstractContextManager[Any]:
    port = _free_port()
    argv = [sys.executable, "-m", "uvicorn", "bench.ingest:null_app", "--port", str(port), "--http", "httptools",
            "--loop", "uvloop", "--no-access-log", "--log-level", "warning", "--lifespan", "off",
            "--timeout-keep-alive", "30"]
    return _serving(argv, port, "/")


@contextlib.contextmanager
def _serving(argv: list[str], port: int, health: str) -> Iterator[tuple[str, int]]:
    with _process(argv, port, health) as proc:
        yield f"http://127.0.0.1:{port}/api/v1/lineage", proc.pid


# -- load -----------------------------------------------------------------------------------------------------


def build_go_client() -> pathlib.Path | None:
    """The Go load generator (``bench/ingest_load``), built once per version of its source; None without Go."""
    go = shutil.which("go")
    if go is None:
        return None
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(GO_CLIENT.glob("*.go")))).hexdigest()[:12]
    binary = CACHE / f"ingest_load-{digest}"
    if not binary.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_CLIENT, check=True)
    return binary


def _post_go(client: pathlib.Path, url: str, payloads: list[bytes], concurrency: int, rate: float | None,
             tmp: pathlib.Path) -> dict[str, Any]:
    file = tmp / "bodies.txt"
    file.write_bytes(b"\n".join(payloads) + b"\n")
    argv = [str(client), "-url", url, "-bodies", str(file), "-c", str(concurrency)]
    if rate:
        argv += ["-rate", str(rate)]
    out = json.loads(subprocess.run(argv, capture_output=True, check=True, timeout=600).stdout)
    return {"seconds": out["seconds"], "latencies_ms": out["latencies_ms"],
            "statuses": {int(k): v for k, v in out["statuses"].items()}, "failed": out["failed"]}


async def _post_aiohttp(url: str, payloads: list[bytes], concurrency: int, rate: float | None) -> dict[str, Any]:
    """Post every payload, ``concurrency`` at a time; paced at ``rate`` requests/s when given (open loop)."""
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    next_i = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()

        async def worker() -> None:
            nonlocal next_i
            while next_i < len(payloads):
                i = next_i
                next_i += 1
                due = start + i / rate if rate else time.perf_counter()
                if rate and due > time.perf_counter():
                    await asyncio.sleep(due - time.perf_counter())
                async with session.post(url, data=payloads[i], headers=_HEADERS) as resp:
                    await resp.read()
                    statuses[resp.status] = statuses.get(resp.status, 0) + 1
                latencies.append((time.perf_counter() - due) * 1000)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "latencies_ms": latencies, "statuses": statuses, "failed": 0}


class Load:
    """Posts request bodies with the Go client (``go``) or aiohttp (``aiohttp``) and measures one row."""

    def __init__(self, client: str, tmp: pathlib.Path) -> None:
        self.client = client
        self.tmp = tmp
        self._go = build_go_client() if client == "go" else None
        if client == "go" and self._go is None:
            raise SystemExit("bench.ingest --client go needs Go to build bench/ingest_load; expected `go` on PATH "
                             "(or use --client aiohttp)")

    def row(self, url: str, pid: int, payloads: list[bytes], events: int, concurrency: int,
            rate: float | None = None) -> dict[str, Any]:
        """Post ``payloads`` (``events`` events in all): the rate, the answer times and the server's CPU."""
        cpu0 = _cpu_seconds(pid)
        if self._go is not None:
            out = _post_go(self._go, url, payloads, concurrency, rate, self.tmp)
        else:
            import uvloop

            out = uvloop.run(_post_aiohttp(url, payloads, concurrency, rate))
        cpu = _cpu_seconds(pid) - cpu0
        lat = out["latencies_ms"]
        return {"client": self.client, "requests": len(payloads), "events": events,
                "events_per_request": events // len(payloads), "concurrency": concurrency,
                "seconds": round(out["seconds"], 3), "events_per_s": round(events / out["seconds"]),
                "requests_per_s": round(len(payloads) / out["seconds"]),
                "answer_ms_p50": round(percentile(lat, 50), 2), "answer_ms_p99": round(percentile(lat, 99), 2),
                "answer_ms_max": round(max(lat), 2), "failed": out["failed"],
                "statuses": {str(k): v for k, v in out["statuses"].items()},
                "server_cpu_us_per_event": round(cpu / events * 1e6)}


def _messages_on(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
    finally:
        c.close()


# -- the run --------------------------------------------------------------------------------------------------


def run(bootstrap: str, tmp: pathlib.Path, seconds: float, concurrency: int, array: int,
        client: str) -> dict[str, Any]:
    from lineagewire.config import Settings
    from lineagewire.kafka.topics import TopicSpec, create_topics

    topic = f"bench.ingest.{uuid.uuid4().hex[:8]}"
    create_topics(Settings(bootstrap_servers=bootstrap), [TopicSpec(topic, 6, 3600_000)])
    load = Load(client, tmp)
    # Sized so that each row lasts about ``seconds`` on this machine.
    warm, warm_msgs = bodies(500, 1)
    one, one_msgs = bodies(int(3000 * seconds), 1)
    arrays, array_msgs = bodies(int(6000 * seconds) // array * array, array)
    half = TARGET_EVENTS_PER_S / 2
    paced, paced_msgs = bodies(int(half * min(seconds, 6)), 1)
    result: dict[str, Any] = {"events_from": str(CORPUS.relative_to(ROOT)), "load_average_before":
                              [round(x, 2) for x in os.getloadavg()], "target_events_per_s": TARGET_EVENTS_PER_S,
                              "target_p99_ms_at_half": TARGET_P99_MS}
    with null_endpoint() as (url, pid):
        load.row(url, pid, warm, len(warm), concurrency)
        result["null_endpoint"] = {"one_event_per_post": load.row(url, pid, one, len(one), concurrency),
                                   "arrays": load.row(url, pid, arrays, len(arrays) * array, concurrency)}
    with receiver(bootstrap, topic, tmp / "outbox") as (url, pid):
        load.row(url, pid, warm, len(warm), concurrency)  # the producer's id and the partitions' leaders, first
        result["one_event_per_post"] = load.row(url, pid, one, len(one), concurrency)
        result["arrays"] = load.row(url, pid, arrays, len(arrays) * array, concurrency)
        result["latency_at_half"] = {"rate_per_s": half, **load.row(url, pid, paced, len(paced), 64, rate=half)}
        if client == "go":  # the Python client, for comparison (the shared notes' table: aiohttp is the cheapest)
            result["one_event_per_post_aiohttp"] = Load("aiohttp", tmp).row(url, pid, one, len(one), concurrency)
        with urllib.request.urlopen(url.replace("/api/v1/lineage", "/healthz"), timeout=10) as resp:
            health = json.loads(resp.read())
    with receiver(bootstrap, topic, tmp / "outbox", workers=2) as (url, pid):
        # both cores for the receiver (two processes on the port), as a host that runs only the receiver would
        load.row(url, pid, warm, len(warm), concurrency)
        result["one_event_per_post_2_workers"] = load.row(url, pid, one, len(one), concurrency)
        result["arrays_2_workers"] = load.row(url, pid, arrays, len(arrays) * array, concurrency)
    expected = (2 * warm_msgs + 2 * one_msgs + 2 * array_msgs + paced_msgs + (one_msgs if client == "go" else 0))
    result["durability"] = {
        "contract_events_expected": expected, "contract_events_on_topic": _messages_on(bootstrap, topic),
        "spooled_to_outbox": health.get("spooled"), "left_in_outbox": len(list((tmp / "outbox").rglob("*.evt"))),
        "every_answer_201": all(set(r["statuses"]) == {"201"} for r in _rows(result))}
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    one_rate = max(result["one_event_per_post"]["events_per_s"], result["one_event_per_post_2_workers"]["events_per_s"])
    array_rate = max(result["arrays"]["events_per_s"], result["arrays_2_workers"]["events_per_s"])
    result["summary"] = {
        "one_event_per_post_events_per_s": one_rate,
        "arrays_events_per_s": array_rate,
        "null_endpoint_one_event_per_post_events_per_s": result["null_endpoint"]["one_event_per_post"]["events_per_s"],
        "null_endpoint_arrays_events_per_s": result["null_endpoint"]["arrays"]["events_per_s"],
        "one_event_per_post_2_workers_events_per_s": result["one_event_per_post_2_workers"]["events_per_s"],
        "arrays_2_workers_events_per_s": result["arrays_2_workers"]["events_per_s"],
        "p99_ms_at_half_target": result["latency_at_half"]["answer_ms_p99"],
        "meets_rate_target_one_event_per_post": one_rate >= TARGET_EVENTS_PER_S,
        "meets_rate_target_arrays": array_rate >= TARGET_EVENTS_PER_S,
        "meets_p99_target": result["latency_at_half"]["answer_ms_p99"] < TARGET_P99_MS,
    }
    return result


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [v for k, v in result.items() if isinstance(v, dict) and "statuses" in v]
    return rows + [v for v in result["null_endpoint"].values()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="about how long each row lasts")
    ap.add_argument("--concurrency", type=int, default=32, help="connections of the load generator")
    ap.add_argument("--array", type=int, default=50, help="events per request of the arrays row")
    ap.add_argument("--client", choices=["go", "aiohttp"], default="go" if shutil.which("go") else "aiohttp",
                    help="load generator (default: go where Go is installed)")
    ap.add_argument("--bootstrap-servers", default=None, help="a running cluster (default: a local broker, started "
                    "for the run)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        if args.bootstrap_servers:
            result = run(args.bootstrap_servers, tmp, args.seconds, args.concurrency, args.array, args.client)
            broker = args.bootstrap_servers
        else:
            from lineagewire.kafka.local import LocalKafka, free_port

            with LocalKafka("bench-ingest", port=free_port(), controller_port=free_port(), base=tmp / "kafka") as kafka:
                result = run(kafka.bootstrap_servers, tmp, args.seconds, args.concurrency, args.array,
                             args.client)
            broker = "local (lineagewire.kafka.local, started for the run)"
    save("ingest", {"broker": broker, **result})


if __name__ == "__main__":
    main()
