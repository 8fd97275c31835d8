"""The job registry: events applied per second, and ``lineage downstream`` latency on a large graph.

    .venv/bin/python -m bench.registry [--events 3000] [--datasets 10000] [--edges 50000] [--queries 200]
        [--jobs 10000] [--runs-per-job 10] [--repeat 5]

1. ``apply``: application runs (JobCreated with lineage, status changes, actions with column lineage)
   applied one transaction per event to SQLite (WAL, synchronous=NORMAL), as ``consume registry`` does.
2. ``lineage``: a layered graph of ``--datasets`` datasets in 20 layers with ``--edges`` dataset edges
   (each edge from one layer to the next; bulk-inserted), then ``lineage(..., direction="downstream")``
   from random datasets: p50/p99 at the default depth (3: what ``lineage downstream DATASET`` does), at
   ``--depth 5`` and with no depth limit (``--depth all``: most of the graph). Target: p99 <= 50 ms.
   Wall and CPU milliseconds both: on a shared machine the wall time is mostly waiting for a core.
3. ``jobs_list`` / ``jobs_show``: ``--jobs`` jobs with ``--runs-per-job`` runs each (bulk-inserted), read through
   the read-only engine the CLI opens (``open_read_only``): ``list_jobs`` (what ``jobs list`` prints) ``--repeat``
   times, and ``job_runs`` (``jobs show JOB``) for ``--queries`` random jobs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import tempfile
import time

from bench._common import percentile, save
from lineagewire.consumers.audit import registry_model as m
from lineagewire.consumers.audit.registry_query import DEFAULT_DEPTH, job_runs, lineage, list_jobs
from lineagewire.consumers.audit.registry_store import RegistryStore, open_read_only
from tests.consumers.openlineage.samples import app_run

LAYERS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs-per-job", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as d:
        store = RegistryStore(f"sqlite:///{d}/apply.db")
        events = []
        while len(events) < args.events:
            events += app_run(f"job{len(events) % 40}", actions=3)
        events = events[:args.events]
        t = time.perf_counter()
        for e in events:
            store.apply(e)
        apply_s = time.perf_counter() - t
        store.close()
        results["apply"] = {"events": len(events), "seconds": round(apply_s, 2),
                            "events_per_s": round(len(events) / apply_s)}

        store = RegistryStore(f"sqlite:///{d}/graph.db")
        now = dt.datetime.now(dt.UTC)
        per_layer = args.datasets // LAYERS
        with store.engine.begin() as conn:
            conn.execute(m.jobs.insert(), [{"id": 1, "namespace": "bench", "name": "job", "first_seen": now,
                                            "last_seen": now}])
            conn.execute(m.datasets.insert(), [{"id": i + 1, "namespace": "file",
                                                "name": f"/data/l{i // per_layer}/d{i}", "first_seen": now,
                                                "last_seen": now} for i in range(per_layer * LAYERS)])
            edges: set[tuple[int, int]] = set()
            while len(edges) < args.edges:
                layer = rng.randrange(LAYERS - 1)
                src = layer * per_layer + rng.randrange(per_layer) + 1
                dst = (layer + 1) * per_layer + rng.randrange(per_layer) + 1
                edges.add((src, dst))
            conn.execute(m.dataset_edges.insert(), [{"source_id": s, "sink_id": t, "job_id": 1, "last_run_id": "r",
                                                     "first_seen": now, "last_seen": now} for s, t in edges])
        for name, depth in (("default", DEFAULT_DEPTH), ("5", 5), ("all", None)):
            times, cpus, sizes = [], [], []
            with store.engine.connect() as conn:
                for _ in range(args.queries):
                    i = rng.randrange(per_layer * LAYERS)
                    t, cpu = time.perf_counter(), time.process_time()
                    out = lineage(conn, f"/data/l{i // per_layer}/d{i}", direction="downstream", depth=depth)
                    times.append((time.perf_counter() - t) * 1000)
                    cpus.append((time.process_time() - cpu) * 1000)
                    sizes.append(len(out["nodes"]))
            results[f"lineage_downstream_depth_{name}"] = {"depth": depth,
                "queries": args.queries, "p50_ms": round(percentile(times, 50), 1),
                "p99_ms": round(percentile(times, 99), 1), "target_p99_ms": 50,
                "cpu_p50_ms": round(percentile(cpus, 50), 1), "cpu_p99_ms": round(percentile(cpus, 99), 1),
                "median_nodes": sorted(sizes)[len(sizes) // 2], "max_nodes": max(sizes)}
        store.close()
        results.update(_jobs_rows(f"sqlite:///{d}/jobs.db", args, rng))
    save("registry", {"load_average": [round(x, 2) for x in os.getloadavg()], "datasets": per_layer * LAYERS,
                      "edges": args.edges, **results})


def _timed(fn: object, repeat: int) -> dict[str, float]:
    times, cpus = [], []
    for _ in range(repeat):
        t, cpu = time.perf_counter(), time.process_time()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return {"p50_ms": round(percentile(times, 50), 1), "p99_ms": round(percentile(times, 99), 1),
            "cpu_p50_ms": round(percentile(cpus, 50), 1)}


def _jobs_rows(url: str, args: argparse.Namespace, rng: random.Random) -> dict[str, object]:
    """``jobs list`` and ``jobs show`` over ``--jobs`` jobs of ``--runs-per-job`` runs each."""
    store = RegistryStore(url)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    with store.engine.begin() as conn:
        conn.execute(m.jobs.insert(), [{"id": i + 1, "namespace": "bench", "name": f"job{i:05d}", "first_seen": start,
                                        "last_seen": start} for i in range(args.jobs)])
        conn.execute(m.runs.insert(), [
            {"run_id": f"r{i}-{k}", "job_id": i + 1, "status": "FAILED" if k % 7 == 3 else "SUCCEEDED",
             "lifecycle_state": "TERMINAL", "last_sequence": 4, "created_at": start + dt.timedelta(hours=k),
             "ended_at": start + dt.timedelta(hours=k, minutes=5), "duration_ms": 300_000, "restarts": 0}
            for i in range(args.jobs) for k in range(args.runs_per_job)])
    store.close()
    engine = open_read_only(url)
    try:
        with engine.connect() as conn:
            listed = list_jobs(conn)
            assert len(listed) == args.jobs and listed[0]["runs"] == args.runs_per_job
            jobs_list = _timed(lambda: list_jobs(conn), args.repeat)
            jobs_show = _timed(lambda: job_runs(conn, f"job{rng.randrange(args.jobs):05d}"), args.queries)
    finally:
        engine.dispose()
    size = {"jobs": args.jobs, "runs": args.jobs * args.runs_per_job}
    return {"jobs_list": {**size, "repeat": args.repeat, **jobs_list},
            "jobs_show": {**size, "queries": args.queries, **jobs_show}}


if __name__ == "__main__":
    main()
