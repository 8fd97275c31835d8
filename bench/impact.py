"""``lineagewire impact``: its time at ``--depth all`` on a registry of 100k datasets and 500k edges.

    .venv/bin/python -m bench.impact [--datasets 100000] [--edges 500000] [--jobs 20000] [--queries 7]

1. A registry (SQLite, as ``consume registry`` makes it, through ``RegistryStore``), generated with plain bulk
   SQL inserts: ``--datasets`` datasets in 20 layers; ``--edges`` dataset edges, each from one layer to the next,
   by the job that writes its sink (each job writes ``datasets / jobs`` datasets of one layer, as a pipeline
   does); a column edge per dataset edge (four columns a dataset, DIRECT or INDIRECT), each job with a spec
   (``owner`` and ``team`` tags), three runs, the newest run's action event (one job in 50 with incomplete
   lineage), every run's inputs (``run_datasets``), and one job in 100 a refresh of the scheduler.
2. ``impact`` as the CLI and REST call it, through the read-only engine the CLI opens (``open_read_only``), at
   ``--depth all``: from a dataset of the first layer (its downstream is most of the registry: the worst case a
   random layered graph gives), from one of the middle layer, and from a column of the first layer. p50 and p99
   of ``--queries`` runs each, wall and CPU milliseconds (on a shared machine the wall time is mostly waiting for
   a core). Target: under a second. Results in ``bench/results/impact.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import tempfile
import time
from typing import Any

import sqlalchemy as sa

from bench._common import percentile, save
from lineagewire.consumers.audit.impact import impact
from lineagewire.consumers.audit.registry_store import RegistryStore, open_read_only

LAYERS = 20
TARGET_MS = 1000


def _insert(conn: sa.Connection, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Plain ``INSERT`` of ``rows`` in batches (executemany on the driver: the fastest bulk path of SQLite)."""
    marks = ", ".join("?" for _ in columns)
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
    for i in range(0, len(rows), 50_000):
        cur.executemany(sql, rows[i:i + 50_000])
    cur.close()


def generate(url: str, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """Fill the registry at ``url`` (migrated first by ``RegistryStore``); returns what it holds."""
    RegistryStore(url).close()
    per_layer = args.datasets // LAYERS
    n_ds = per_layer * LAYERS
    per_job = max(1, n_ds // args.jobs)
    now = dt.datetime(2026, 11, 1, tzinfo=dt.UTC).replace(tzinfo=None).isoformat(sep=" ")
    engine = sa.create_engine(url)
    spec: dict[str, Any] = {"app_name": "bench", "conf": {}, "job_type": "BATCH", "sql": None, "tags": {}}
    with engine.begin() as conn:
        jobs = (n_ds + per_job - 1) // per_job
        _insert(conn, "jobs", ["id", "namespace", "name", "first_seen", "last_seen"],
                [(j + 1, "spark", f"refresh db.t{j}" if j % 100 == 7 else f"job_{j:06d}", now, now)
                 for j in range(jobs)])
        _insert(conn, "specs", ["id", "job_id", "sha256", "spec_json", "first_run_id", "first_seen"],
                [(j + 1, j + 1, f"{j:064d}", json.dumps({**spec, "tags": {"owner": f"user{j % 97}",
                                                                          "team": f"team{j % 13}"}},
                                                        sort_keys=True, indent=1), f"run-{j}-0", now)
                 for j in range(jobs)])
        _insert(conn, "datasets", ["id", "namespace", "name", "format", "first_seen", "last_seen"],
                [(i + 1, "file", f"/data/l{i // per_layer}/d{i}", "parquet", now, now) for i in range(n_ds)])
        edges: set[tuple[int, int]] = set()
        while len(edges) < args.edges:
            layer = rng.randrange(LAYERS - 1)
            edges.add((layer * per_layer + rng.randrange(per_layer) + 1,
                       (layer + 1) * per_layer + rng.randrange(per_layer) + 1))
        ordered = sorted(edges)
        _insert(conn, "dataset_edges", ["source_id", "sink_id", "job_id", "last_run_id", "first_seen", "last_seen"],
                [(s, t, (t - 1) // per_job + 1, "r", now, now) for s, t in ordered])
        _insert(conn, "column_edges", ["source_id", "source_field", "sink_id", "sink_field", "job_id",
                                       "transformation", "last_run_id", "first_seen", "last_seen"],
                [(s, f"c{n % 4}", t, f"c{(n + s) % 4}", (t - 1) // per_job + 1,
                  "INDIRECT/FILTER" if n % 5 == 0 else "DIRECT/IDENTITY", "r", now, now)
                 for n, (s, t) in enumerate(ordered)])
        reads: dict[int, set[int]] = {}
        for s, t in ordered:
            reads.setdefault((t - 1) // per_job + 1, set()).add(s)
        runs, io, events = [], [], []
        for j in range(1, jobs + 1):
            for k in range(3):
                run_id = f"run-{j}-{k}"
                runs.append((run_id, j, "FINISHED", "TERMINAL", 3, f"2026-11-0{k + 1} 00:00:00", 0, j,
                             f"wf-{j}" if j % 100 == 8 else None))
                io += [(run_id, ds, "in", now) for ds in reads.get(j, ())]
            body = {"header": {"run_id": f"run-{j}-2"}, "lineage_complete": j % 50 != 3,
                    "incomplete_reason": "column lineage cut at 10000 fields" if j % 50 == 3 else None,
                    "inputs": [], "outputs": [], "column_lineage": []}
            events.append((f"e-{j}", f"run-{j}-2", "ActionLineageEvent", 2, now, json.dumps(body, sort_keys=True)))
        _insert(conn, "runs", ["run_id", "job_id", "status", "lifecycle_state", "last_sequence", "created_at",
                               "restarts", "spec_id", "workflow_id"], runs)
        _insert(conn, "run_datasets", ["run_id", "dataset_id", "direction", "seen_at"], io)
        _insert(conn, "run_events", ["event_id", "run_id", "kind", "sequence", "event_time", "body"], events)
    engine.dispose()
    return {"datasets": n_ds, "dataset_edges": len(ordered), "column_edges": len(ordered), "jobs": jobs,
            "runs": len(runs), "run_datasets": len(io), "per_layer": per_layer}


def timed(conn: sa.Connection, queries: int, dataset: str, column: str | None) -> dict[str, Any]:
    times, cpus = [], []
    out: dict[str, Any] = {}
    for _ in range(queries):
        t, cpu = time.perf_counter(), time.process_time()
        out = impact(conn, dataset, column=column, depth=None)
        times.append((time.perf_counter() - t) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return {"root": dataset, "column": column, "queries": queries, "datasets": len(out["datasets"]),
            "columns": len(out["columns"]), "jobs": len(out["jobs"]),
            "materialized_tables": len(out["materialized_tables"]), "incomplete_jobs": len(out["incomplete_jobs"]),
            "p50_ms": round(percentile(times, 50), 1), "p99_ms": round(percentile(times, 99), 1),
            "cpu_p50_ms": round(percentile(cpus, 50), 1), "cpu_p99_ms": round(percentile(cpus, 99), 1),
            "target_ms": TARGET_MS, "met": percentile(times, 99) <= TARGET_MS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=500_000)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(40)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-impact-") as d:
        url = f"sqlite:///{d}/registry.db"
        t = time.perf_counter()
        facts = generate(url, args, rng)
        facts["generate_s"] = round(time.perf_counter() - t, 1)
        print(f"registry: {facts}", flush=True)
        per_layer = facts["per_layer"]
        engine = open_read_only(url)
        try:
            with engine.connect() as conn:
                impact(conn, "/data/l0/d0", depth=None)  # warm the page cache, as a serving process has it
                cases = {"dataset_first_layer": (f"/data/l0/d{rng.randrange(per_layer)}", None),
                         "dataset_middle_layer": (f"/data/l10/d{10 * per_layer + rng.randrange(per_layer)}", None),
                         "column_first_layer": (f"/data/l0/d{rng.randrange(per_layer)}", "c1")}
                for name, (dataset, column) in cases.items():
                    results[name] = timed(conn, args.queries, dataset, column)
                    print(f"{name}: p50 {results[name]['p50_ms']} ms, p99 {results[name]['p99_ms']} ms, CPU p50 "
                          f"{results[name]['cpu_p50_ms']} ms; {results[name]['datasets']} datasets, "
                          f"{results[name]['jobs']} jobs, {results[name]['columns']} columns", flush=True)
        finally:
            engine.dispose()
    save("impact", {"load_average": [round(x, 2) for x in os.getloadavg()], "registry": facts,
                    "all_targets_met": all(r["met"] for r in results.values()), **results})


if __name__ == "__main__":
    main()
