"""The audit archive: archiving, bytes per event, verify, query, and replay from the archive.

    .venv/bin/python -m bench.archive [--events 1000000] [--partitions 6]

Synthetic history (application runs of 50 jobs: JobCreated with lineage, status changes, actions with
column lineage) spread over ``--days`` (3) is encoded once, then:

1. ``archive``: ``ArchiveHandler.handle`` of each decoded record, files closed by size/hour, written with
   fsync + rename and hash-chained. One process, one thread, no broker (the broker's own fetch rate is
   measured by bench/consumers). Target: >= 50,000 events/s. Timed apart: ``runtime_decode``, the decode
   the runtime does before the handler sees a record (``ArchiveHandler.decoder``: only the fields the
   archive's columns need, ``decode_fields``), and both together.
2. ``bytes_per_event`` on disk (zstd Parquet, raw value bytes kept plus decoded columns).
3. ``verify``: ``audit verify`` over the whole archive, MB/s and files/s.
4. ``query``: "runs of one job in a month with final status" (the docs/audit.md SQL), seconds.
5. ``replay``: ``read_archive`` over everything, each value decoded to an event. Target: >= 100,000 events/s.

Decoding uses the compiled Avro reader where it is built, else fastavro (``reader`` in the output says which).
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import gc
import os
import pathlib
import sys
import tempfile
import time
import uuid

from bench._common import save
from lineagewire.consumers.audit.archive import ArchiveHandler
from lineagewire.consumers.audit.archive_read import read_archive
from lineagewire.consumers.audit.manifest import verify
from lineagewire.consumers.audit.query import run_query
from lineagewire.consumers.audit.storage import Storage
from lineagewire.consumers.runtime.record import Record
from lineagewire.schemas import Codec, _native, job_key
from tests.consumers.openlineage.samples import app_run

TOPIC = "lineage.jobs"
CHUNK = 10_000
DEFAULT_SWITCH_INTERVAL = sys.getswitchinterval()
DEFAULT_GC_YOUNG = gc.get_threshold()[0]
START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def history(n: int, partitions: int, days: float) -> list[tuple[int, int, bytes, bytes]]:
    """(partition, timestamp ms, key, value) of ``n`` encoded events spread over ``days``."""
    codec = Codec()
    template = app_run("job", actions=3)  # 6 events a run
    out: list[tuple[int, int, bytes, bytes]] = []
    runs = n // len(template) + 1
    step = dt.timedelta(days=days) / runs
    for r in range(runs):
        job = f"job{r % 50}"
        when = START + r * step
        run_id = str(uuid.uuid4())
        for i, tmpl in enumerate(template):
            e = copy.copy(tmpl)
            h = dict(e["header"], job_name=job, run_id=run_id, event_id=str(uuid.uuid4()),
                     event_time=when + dt.timedelta(seconds=i))
            e["header"] = h
            out.append(((r % 50) % partitions, int(h["event_time"].timestamp() * 1000), job_key(e).encode(),
                        codec.encode(e)))
            if len(out) == n:
                return out
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--days", type=float, default=3.0,
                        help="Span of the history; each UTC hour of each partition is at least one file.")
    args = parser.parse_args()

    t = time.perf_counter()
    msgs = history(args.events, args.partitions, args.days)
    generate_s = time.perf_counter() - t
    # What ``consume archive`` does at startup (ArchiveHandler.prepare_process: tune_gc); it also keeps the
    # million encoded messages, which are the bench's and not the service's, out of the collector's passes.
    ArchiveHandler.prepare_process()
    offsets = [0] * args.partitions
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as root:
        decode = ArchiveHandler.decoder(Codec())
        handler = ArchiveHandler(root, roll_records=200_000)
        decode_s = decode_cpu = handle_s = handle_cpu = 0.0
        for lo in range(0, len(msgs), CHUNK):  # decode a chunk (the runtime's part), then archive it (the handler's)
            t, cpu = time.perf_counter(), time.process_time()
            records = []
            for p, ts, key, value in msgs[lo:lo + CHUNK]:
                records.append(Record(TOPIC, p, offsets[p], key.decode(), ts, decode(value), value=value,
                                      timestamp_type=0, key_bytes=key))
                offsets[p] += 1
            decode_s += time.perf_counter() - t
            decode_cpu += time.process_time() - cpu
            t, cpu = time.perf_counter(), time.process_time()
            for rec in records:
                handler.handle(rec)
            handle_s += time.perf_counter() - t
            handle_cpu += time.process_time() - cpu
        t, cpu = time.perf_counter(), time.process_time()
        handler.close()
        handle_s += time.perf_counter() - t
        handle_cpu += time.process_time() - cpu
        archive_s = decode_s + handle_s
        files = list(pathlib.Path(root).rglob("*.parquet"))
        disk = sum(f.stat().st_size for f in files)

        storage = Storage(root)
        t = time.perf_counter()
        report = verify(storage)
        verify_s = time.perf_counter() - t
        assert report.ok and report.records == len(msgs), report.problems[:3]

        sql = ("SELECT run_id, min(event_time) AS started, arg_max(status, sequence) FILTER "
               "(WHERE kind = 'JobStatusChangedEvent') AS final_status FROM events WHERE job_namespace = 'spark' "
               "AND job_name = 'job7' AND event_time >= TIMESTAMPTZ '2025-01-01' "
               "AND event_time < TIMESTAMPTZ '2025-02-01' GROUP BY run_id ORDER BY started")
        t = time.perf_counter()
        result = run_query(storage, sql)
        query_s = time.perf_counter() - t

        # ``lineagewire replay`` does not run the archive's process set-up: Python's default thread switch
        # interval and young-generation GC threshold, as there.
        sys.setswitchinterval(DEFAULT_SWITCH_INTERVAL)
        gc.set_threshold(DEFAULT_GC_YOUNG, *gc.get_threshold()[1:])
        t, cpu = time.perf_counter(), time.process_time()
        replayed = sum(1 for _ in read_archive(storage, TOPIC, start="beginning", end="end", codec=Codec()))
        replay_s, replay_cpu = time.perf_counter() - t, time.process_time() - cpu
        assert replayed == len(msgs)

    n = len(msgs)
    save("archive", {
        "events": n, "days": args.days, "partitions": args.partitions, "generate_s": round(generate_s, 1),
        "reader": "native" if _native.AVAILABLE else "fastavro",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "archive": {"seconds": round(handle_s, 2), "events_per_s": round(n / handle_s), "target": 50_000,
                    "files": len(files), "cpu_seconds": round(handle_cpu, 2),
                    "events_per_cpu_s": round(n / handle_cpu)},
        "runtime_decode": {"seconds": round(decode_s, 2), "events_per_s": round(n / decode_s),
                           "cpu_seconds": round(decode_cpu, 2), "events_per_cpu_s": round(n / decode_cpu)},
        "archive_with_runtime_decode": {"seconds": round(archive_s, 2), "events_per_s": round(n / archive_s),
                                        "cpu_seconds": round(decode_cpu + handle_cpu, 2),
                                        "events_per_cpu_s": round(n / (decode_cpu + handle_cpu))},
        "bytes_per_event": round(disk / n, 1), "disk_bytes": disk,
        "verify": {"seconds": round(verify_s, 2), "mb_per_s": round(disk / verify_s / 1e6, 1),
                   "files_per_s": round(report.files / verify_s, 1)},
        "query_runs_of_one_job_in_a_month": {"seconds": round(query_s, 3), "rows": len(result.rows)},
        "replay_from_archive": {"seconds": round(replay_s, 2), "events_per_s": round(n / replay_s),
                                "events_per_cpu_s": round(n / replay_cpu), "target": 100_000},
    })


if __name__ == "__main__":
    main()
