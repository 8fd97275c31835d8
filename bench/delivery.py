"""Delivery to real backends, as users deploy it: ``lineagewire consume openlineage --url`` and ``lineagewire consume
datahub --gms-url`` against a local backend.

    .venv/bin/python -m bench.delivery [--n 20000] [--repeat 2] [--latency 0 5] [--outage 30]
                                       [--before-seconds 20] [--no-before] [--bootstrap-servers HOST:PORT]

1. **The backend**: ``bench/receiver`` (Go, built here from its source with ``go build`` into
   ``~/.cache/lineagewire/bench``), which counts every OpenLineage event by identity (so lost and duplicated
   events are counted), and DataHub proposals on ``POST /aspects?action=ingestProposalBatch``. Its ceiling is
   measured first with its own load generator (``receiver -blast``) and printed.
2. **Rows**: ``--n`` mixed events (application runs: JobCreated with lineage, status changes, actions with
   column lineage) are published once to a topic of a real broker; each row starts the service as a user does
   (``python -m lineagewire consume openlineage --url ... --group <new>``) and reads, at the backend, the time
   from its first event to its last; events/s = events / that time, CPU µs per event = the service process's
   CPU time (``/proc``) over the same window / events. Injected latency per request: ``--latency`` (ms).
   ``before`` rows run the code of ``--before`` (default e05f85c, the aiohttp delivery; extracted with
   ``git archive``) the same way, interleaved with ``after`` rows (after, before, after, before...), and stop
   after ``--before-seconds`` (its rate is then over what arrived).
3. **Outage**: the same service; once a third of the events arrived the backend goes down (connection
   refused) for ``--outage`` seconds, then comes back. Printed: events lost (published events that never
   arrived: must be 0), whether the group committed anything while it was down (from 2 s after it went down to
   when it came back: must not), and the duplicates the backend received.

**DataHub** (``--paths datahub``): the same rows and outage for ``consume datahub --gms-url`` (batches of
``ingestProposalBatch``; the receiver answers ``GET /config`` as GMS does). The receiver counts proposals by
their bytes; the proposals the service sends for the events are computed first (its skip memory is per job,
so their number does not depend on how partitions interleave), all arrived when that many distinct texts
did; events/s and CPU µs per event are per lineagewire event (proposals × events / proposals expected).
Duplicates: proposals received more than once beyond the identical texts the events themselves give.

Results go to ``bench/results/delivery.json``. Reusable for other services: ``Backend`` (start, latency,
down/up, stats) and ``run_service(argv, ...)`` / ``outage(argv, ...)`` take any ``lineagewire consume ...``
command line; a service posting DataHub proposals is counted by ``Backend.stats()["proposals"]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from bench._common import save
from bench.consumers import _mix as mixed_events
from lineagewire.config import Settings
from lineagewire.kafka.publisher import Publisher
from lineagewire.kafka.topics import TopicSpec, create_topics
from lineagewire.processes import stop_process

ROOT = pathlib.Path(__file__).resolve().parent.parent
RECEIVER_SRC = pathlib.Path(__file__).resolve().parent / "receiver"
CACHE = pathlib.Path.home() / ".cache" / "lineagewire" / "bench"


def build_receiver() -> pathlib.Path:
    """The receiver binary, built from ``bench/receiver`` (once per version of its source)."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(RECEIVER_SRC.glob("*.go")))).hexdigest()[:12]
    binary = CACHE / f"receiver-{digest}"
    if not binary.exists():
        go = shutil.which("go")
        if go is None:
            raise SystemExit("bench.delivery needs Go to build its backend (bench/receiver); expected `go` on PATH")
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([go, "build", "-o", str(binary), "."], cwd=RECEIVER_SRC, check=True)
    return binary


class Backend:
    """The Go receiver on 127.0.0.1: ``url`` for the service, ``stats()``, ``latency(ms)``, ``down()``, ``up()``."""

    def __init__(self, latency_ms: float = 0.0, *, keys: bool = False) -> None:
        self.binary = build_receiver()
        args = [str(self.binary), "-latency", f"{latency_ms}ms"] + (["-keys"] if keys else [])
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None  # noqa: S101 - PIPE
        line = self.proc.stdout.readline().split()
        if len(line) != 4 or line[0] != "listening":
            self.proc.kill()
            raise RuntimeError(f"the receiver did not start: {line}")
        self.address, self.control = line[1], line[3]
        self.url = f"http://{self.address}"

    def _post(self, path: str) -> None:
        urllib.request.urlopen(urllib.request.Request(f"http://{self.control}{path}", method="POST"), timeout=10)

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{self.control}/stats", timeout=10) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def keys(self) -> list[str]:
        """The OpenLineage events in arrival order ("runId eventType eventTime"; needs keys=True)."""
        with urllib.request.urlopen(f"http://{self.control}/keys", timeout=30) as r:
            return r.read().decode().splitlines()

    def latency(self, ms: float) -> None:
        self._post(f"/latency?ms={ms}")

    def down(self) -> None:
        self._post("/down")

    def up(self) -> None:
        self._post("/up")

    def reset(self) -> None:
        self._post("/reset")

    def ceiling(self, n: int = 20_000, concurrency: int = 64) -> dict[str, Any]:
        """Requests/s this receiver takes from its own Go load generator (which shares the machine with it), and
        the receiver's CPU µs per request: 1e6 / that is what it takes per core of its own."""
        cpu = cpu_seconds(self.proc.pid)
        out = subprocess.run([str(self.binary), "-blast", f"{self.url}/api/v1/lineage", "-n", str(n), "-c",
                              str(concurrency)], capture_output=True, text=True, check=True).stdout
        cpu = cpu_seconds(self.proc.pid) - cpu
        self.reset()
        result = json.loads(out)
        result["receiver_cpu_us_per_request"] = round(cpu / n * 1e6, 1)
        result["receiver_per_core_per_s"] = round(n / cpu) if cpu else None
        return result  # type: ignore[no-any-return]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def committed(settings: Settings, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                              timeout=10)}
    finally:
        c.close()


@contextlib.contextmanager
def service(argv: list[str], settings: Settings, *, pythonpath: str | None = None) -> Iterator[subprocess.Popen]:
    """``python -m lineagewire <argv>`` against ``settings``' broker; stopped with SIGTERM on exit."""
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers, "PYTHONUNBUFFERED": "1"}
    for var in [v for v in env if v.startswith("OPENLINEAGE")]:
        env.pop(var)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, "-m", "lineagewire", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=log, cwd=tempfile.gettempdir())
    try:
        yield proc
    finally:
        stop_process(proc, 60)
        if proc.returncode not in (0, -signal.SIGTERM):
            log.seek(0)
            print(f"service exited {proc.returncode}: {log.read()[-3000:]}", file=sys.stderr)
        log.close()


def run_service(argv: list[str], settings: Settings, backend: Backend, expected: int, *,
                count: Callable[[dict[str, Any]], int] = lambda s: int(s["distinct"]),
                max_seconds: float = 600.0, pythonpath: str | None = None) -> dict[str, Any]:
    """Run a service until the backend counted ``expected`` (``count`` of its stats) or ``max_seconds`` after the
    first arrived; events/s and CPU µs per event between the first and the last arrival."""
    backend.reset()
    with service(argv, settings, pythonpath=pythonpath) as proc:
        started = time.monotonic()
        while count(backend.stats()) == 0:
            if proc.poll() is not None or time.monotonic() - started > 120:
                raise RuntimeError(f"the service {' '.join(argv[:3])} delivered nothing (exit {proc.returncode})")
            time.sleep(0.01)
        t0, c0, n0 = time.monotonic(), cpu_seconds(proc.pid), count(backend.stats())
        t1, c1, n1 = t0, c0, n0
        while n1 < expected and time.monotonic() - t0 < max_seconds and proc.poll() is None:
            time.sleep(0.05)
            n = count(backend.stats())
            if n != n1:
                t1, c1, n1 = time.monotonic(), cpu_seconds(proc.pid), n
    stats = backend.stats()
    seconds = max(t1 - t0, 1e-6)
    return {"events": n1 - n0, "seconds": round(seconds, 2), "events_per_s": round((n1 - n0) / seconds),
            "cpu_us_per_event": round((c1 - c0) / max(n1 - n0, 1) * 1e6), "all_arrived": n1 >= expected,
            "duplicates": stats["duplicates"], "order_violations": stats["order_violations"]}


def outage(argv: list[str], settings: Settings, backend: Backend, expected: int, topic: str, group: str,
           partitions: int, *, down_seconds: float = 30.0,
           count: Callable[[dict[str, Any]], int] = lambda s: int(s["distinct"]),
           duplicates: Callable[[dict[str, Any]], int] = lambda s: int(s["duplicates"])) -> dict[str, Any]:
    """The backend goes down for ``down_seconds`` once a third of ``expected`` arrived; lost, committed-while-down
    and duplicates. ``argv`` must consume ``topic`` in consumer group ``group``."""
    backend.reset()
    with service(argv, settings) as proc:
        deadline = time.monotonic() + 300
        while count(backend.stats()) < expected // 3:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the service stopped before the outage")
            time.sleep(0.01)
        backend.down()
        went_down = time.monotonic()
        at_down = count(backend.stats())
        time.sleep(2.0)  # what was confirmed just before it went down may still be committed in this second
        before = committed(settings, group, topic, partitions)
        time.sleep(max(down_seconds - 2.0, 0))
        after = committed(settings, group, topic, partitions)
        backend.up()
        back = time.monotonic()
        while count(backend.stats()) < expected and time.monotonic() - back < 300 and proc.poll() is None:
            time.sleep(0.1)
        recovered = time.monotonic() - back
    stats = backend.stats()
    return {"down_seconds": round(back - went_down, 1), "arrived_before_down": at_down,
            "committed_2s_after_down": before, "committed_when_back": after,
            "committed_during_outage": before != after, "lost": expected - count(stats),
            "duplicates": duplicates(stats), "seconds_to_catch_up": round(recovered, 1)}


def before_tree(commit: str) -> pathlib.Path:
    """The code of ``commit`` as an importable ``lineagewire`` package (the layout the editable install maps)."""
    target = CACHE / f"before-{commit}"
    pkg = target / "lineagewire"
    if pkg.exists():
        return target
    src = target / "src"
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    shutil.copytree(src / "lineagewire", pkg)
    for sub, name in (("schemas", "schemas"), ("producers", "producers"), ("consumers", "consumers")):
        shutil.copytree(src / sub, pkg / name)
    # The compiled Avro reader of this worktree's build (the same source at that commit), if there is one.
    for so in (ROOT / "schemas").glob("_avro*.so"):
        shutil.copy2(so, pkg / "schemas" / so.name)
    shutil.rmtree(src)
    return target


def datahub_expected(events: list[dict[str, Any]], partitions: int) -> dict[str, int]:
    """The proposals ``consume datahub --gms-url`` sends for ``events`` (its skip memory is per job, so this does
    not depend on how partitions interleave): their number, and how many distinct request texts they are (the
    receiver counts proposals by their bytes; two jobs' identical aspects at the same time have the same)."""
    from datahub.cli.cli_utils import ensure_has_system_metadata
    from datahub.emitter.serialization_helper import pre_json_transform

    from lineagewire.consumers.datahub.sinks.delivery import for_emitter
    from lineagewire.consumers.datahub.translate import Translator
    from lineagewire.consumers.datahub.unchanged import Unchanged
    from lineagewire.schemas import Codec, job_key

    codec, translator, unchanged = Codec(), Translator(), Unchanged()
    texts: list[str] = []
    for e in events:
        event = codec.decode(codec.encode(e))
        fresh, marks = unchanged.select(translator.translate(event), job_key(event))
        unchanged.commit(marks)
        for p in for_emitter(fresh):
            ensure_has_system_metadata(p)
            texts.append(json.dumps(pre_json_transform(p.to_obj())))
    return {"proposals": len(texts), "distinct": len(set(texts))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000, help="events published and delivered per row")
    ap.add_argument("--repeat", type=int, default=2, help="runs per row (interleaved with the before code)")
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 5.0], help="injected ms per request")
    ap.add_argument("--outage", type=float, default=30.0, help="seconds the backend is down (0: no outage run)")
    ap.add_argument("--before", default="e05f85c", help="commit of the code before")
    ap.add_argument("--no-before", action="store_true", help="only the code of this worktree")
    ap.add_argument("--before-seconds", type=float, default=20.0, help="stop a before run after this long")
    ap.add_argument("--concurrency", type=int, default=32, help="--concurrency of the service")
    ap.add_argument("--bootstrap-servers", default=None)
    ap.add_argument("--paths", nargs="+", choices=("openlineage", "datahub"), default=["openlineage", "datahub"],
                    help="which services: consume openlineage --url, consume datahub --gms-url")
    args = ap.parse_args()

    with contextlib.ExitStack() as stack:
        if args.bootstrap_servers:
            settings = Settings(bootstrap_servers=args.bootstrap_servers)
            broker = args.bootstrap_servers
        else:
            from lineagewire.kafka.local import LocalKafka, free_port

            tmp = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory()))
            kafka = stack.enter_context(LocalKafka("bench-delivery", port=free_port(), controller_port=free_port(),
                                                   base=tmp / "kafka"))
            settings = Settings(bootstrap_servers=kafka.bootstrap_servers)
            broker = "local (lineagewire.kafka.local, started for the run)"
        backend = stack.enter_context(Backend())
        ceiling = backend.ceiling()
        print(f"backend ceiling: {ceiling['per_s']:.0f} requests/s from the Go load generator on the same cores "
              f"({ceiling['concurrency']} in flight); the receiver's own CPU: {ceiling['receiver_cpu_us_per_request']} "
              f"µs per request, {ceiling['receiver_per_core_per_s']} requests/s per core", file=sys.stderr)

        partitions = 3
        topic = f"bench.delivery.{uuid.uuid4().hex[:8]}"
        create_topics(settings, [TopicSpec(topic, partitions, 3600_000)])
        events = mixed_events(args.n)
        with Publisher(settings) as pub:
            for e in events:
                pub.publish(e, topic=topic)
            pub.flush()
        expected = args.n  # one OpenLineage event per lineagewire event in this mix
        before = None if args.no_before else str(before_tree(args.before))

        def argv(group: str, *, concurrency: bool = True) -> list[str]:
            extra = ["--concurrency", str(args.concurrency)] if concurrency else []
            return ["consume", "openlineage", "--url", backend.url, "--topic", topic, "--group", group, *extra]

        def datahub_argv(group: str, *, concurrency: bool = True) -> list[str]:
            # The DataHub service's lanes and batches are its defaults (sinks.rest in its YAML).
            return ["consume", "datahub", "--gms-url", backend.url, "--topic", topic, "--group", group]

        # Per path: its command, what the backend counts (OpenLineage: distinct events; DataHub: distinct
        # proposals), how many that is when everything arrived, and events per counted unit.
        paths: dict[str, dict[str, Any]] = {}
        if "openlineage" in args.paths:
            paths["openlineage http"] = {"argv": argv, "count": lambda s: int(s["distinct"]), "expected": expected,
                                         "per_unit": 1.0, "duplicates": lambda s: int(s["duplicates"]),
                                         "targets": {0.0: 3000, 5.0: 2000}}
        if "datahub" in args.paths:
            dh = datahub_expected(events, partitions)
            same = dh["proposals"] - dh["distinct"]  # identical texts that are not duplicates (see datahub_expected)
            paths["datahub rest"] = {"argv": datahub_argv, "count": lambda s: int(s["proposal_distinct"]),
                                     "expected": dh["distinct"], "per_unit": args.n / dh["distinct"],
                                     "duplicates": lambda s, same=same: int(s["proposal_duplicates"]) - same,
                                     "targets": {0.0: 1500, 5.0: 1000}, "proposals": dh}
            print(f"datahub: {dh['proposals']} proposals ({dh['distinct']} distinct texts) for {args.n} events",
                  file=sys.stderr)

        rows: list[dict[str, Any]] = []
        for name, path in paths.items():
            for latency in args.latency:
                backend.latency(latency)
                for run in range(args.repeat):
                    for code in ("after", "before"):
                        if code == "before" and before is None:
                            continue
                        group = f"bench-{code}-{uuid.uuid4().hex[:8]}"
                        r = run_service(path["argv"](group, concurrency=code == "after"), settings, backend,
                                        path["expected"], count=path["count"],
                                        max_seconds=args.before_seconds if code == "before" else 600,
                                        pythonpath=before if code == "before" else None)
                        if path["per_unit"] != 1.0:  # counted in proposals: per event
                            r["proposals"] = r["events"]
                            r["events"] = round(r["events"] * path["per_unit"])
                            r["events_per_s"] = round(r["events_per_s"] * path["per_unit"])
                            r["cpu_us_per_event"] = round(r["cpu_us_per_event"] / path["per_unit"])
                            stats = backend.stats()
                            # (a run stopped before everything arrived has no baseline to count duplicates from)
                            r["duplicates"] = path["duplicates"](stats) if r["all_arrived"] else None
                            r["proposals_per_request"] = round(stats["proposals"] / max(stats["requests"], 1), 1)
                        row = {"path": name, "code": code, "latency_ms": latency, "run": run, **r}
                        rows.append(row)
                        print(f"{name:17} {code:6} {latency:3.0f} ms: {r['events_per_s']:6} events/s, "
                              f"{r['cpu_us_per_event']:5} CPU µs/event ({r['events']} events, duplicates "
                              f"{r['duplicates']}, order violations {r['order_violations']}"
                              + (f", {r['proposals_per_request']} proposals a request" if "proposals" in r else "")
                              + ")", file=sys.stderr)
        backend.latency(0)
        result: dict[str, Any] = {"broker": broker, "events": args.n, "backend_ceiling": ceiling, "rows": rows}
        if args.outage > 0:
            for name, path in paths.items():
                group = f"bench-outage-{uuid.uuid4().hex[:8]}"
                o = outage(path["argv"](group), settings, backend, path["expected"], topic, group, partitions,
                           down_seconds=args.outage, count=path["count"], duplicates=path["duplicates"])
                key = "outage" if name == "openlineage http" else f"outage {name}"
                result[key] = {"path": name, **o}
                print(f"{name} outage {o['down_seconds']} s: lost {o['lost']}, committed during the outage: "
                      f"{o['committed_during_outage']}, duplicates {o['duplicates']}", file=sys.stderr)
        summary: dict[str, Any] = {}
        for row in rows:
            prefix = "" if row["path"] == "openlineage http" else "datahub_"
            key = f"{prefix}{row['code']}_{row['latency_ms']:g}ms"
            summary.setdefault(key, []).append(row["events_per_s"])
        result["events_per_s"] = summary
        result["targets"] = {}
        for name, path in paths.items():
            prefix = "" if name == "openlineage http" else "datahub_"
            for lat, t in path["targets"].items():
                runs = summary.get(f"{prefix}after_{lat:g}ms")
                if runs:
                    result["targets"][f"{prefix}{lat:g}ms"] = {"target": t, "met": min(runs) >= t}
    save("delivery", result)


if __name__ == "__main__":
    main()
