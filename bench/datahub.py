"""The DataHub consumer in one process: events/s from decode to proposals written by the file sink.

    .venv/bin/python -m bench.datahub [--n 5000] [--repeat 3] [--gc default|freeze|off]

The same events as ``bench/consumers`` (an application run mix: JobCreated with lineage, status changes,
actions with column lineage, from ``tests/consumers/openlineage/samples.app_run``), encoded once, then
``Codec.decode`` -> ``DataHubHandler`` (``Translator`` -> ``FileSink``), one thread; the file is fsynced
at the end, as ``close()`` does. Target: >= 5,000 events/s. Each run starts a fresh handler (cold caches).
The skip memory (100,000 (URN, aspect) per sink) is full after ~40,000 of these events: ``--n 60000`` shows
the steady state past that point too.

Also: wall and CPU microseconds per event of each stage, measured on a second pass event by event in the
handler's own order with a fresh translator and sink: decode, translate (events -> acryl-datahub proposals),
skip_unchanged (choosing what changed; renders each aspect not seen before once, or puts the time and run
ids into its content's template: ``consumers/datahub/stamp.py``), write (the file's JSON lines and the write
to the OS). And a check that the file written is a JSON array of as many proposals as were emitted.

``--gc``: ``default`` leaves Python's collector as a service runs it; ``freeze`` calls ``gc.freeze()`` after
startup (the encoded events, imports and acryl-datahub's schema objects then stay out of collections, as
the runtime could do for every service); ``off`` disables it during the timed loop (the bound on what GC
tuning can give).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import statistics
import tempfile
import time
import uuid
from typing import Any

from bench._common import save
from bench.delivery import mixed_events
from lineagewire.consumers.datahub import ids
from lineagewire.consumers.datahub.config import load_config
from lineagewire.consumers.datahub.handler import DataHubHandler
from lineagewire.consumers.datahub.sinks.file import FileSink
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.consumers.datahub.unchanged import Unchanged
from lineagewire.consumers.runtime.record import Record
from lineagewire.schemas import Codec, job_key

TARGET = 5000


def _mix(n: int) -> list[dict[str, Any]]:
    return mixed_events(n)  # the same events as bench.consumers and bench.delivery


def in_process(n: int, tmp: pathlib.Path, gc_mode: str = "default") -> dict[str, Any]:
    codec = Codec()
    blobs = [codec.encode(e) for e in _mix(n)]
    for cache in (ids.flow_urn, ids.job_urn, ids.instance_urn):  # module-wide: each run starts cold
        cache.cache_clear()
    out = tmp / f"in_process-{uuid.uuid4().hex[:8]}.json"
    handler = DataHubHandler(load_config(file={"path": str(out)}))
    handler.open()
    emitted = 0
    gc.collect()
    if gc_mode == "freeze":
        gc.freeze()
    elif gc_mode == "off":
        gc.disable()
    collections0 = sum(s["collections"] for s in gc.get_stats())
    in_gc = [0.0, 0.0]  # seconds spent collecting, start of the current collection

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            in_gc[1] = time.perf_counter()
        else:
            in_gc[0] += time.perf_counter() - in_gc[1]

    gc.callbacks.append(timed)
    c0, t0 = time.process_time(), time.perf_counter()
    for off, blob in enumerate(blobs):
        event = codec.decode(blob)
        emitted += handler.handle(Record("bench", 0, off, job_key(event), 0, event))
    handler.close()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc_passes = sum(s["collections"] for s in gc.get_stats()) - collections0
    gc.callbacks.remove(timed)
    gc.enable()
    gc.unfreeze()
    written = len(json.loads(out.read_text()))
    stages = _stages(blobs, codec, tmp)
    return {"events": n, "proposals": emitted, "proposals_written": written, "seconds": round(seconds, 3),
            "events_per_s": round(n / seconds), "proposals_per_s": round(emitted / seconds),
            "cpu_seconds": round(cpu, 3), "events_per_cpu_s": round(n / cpu) if cpu else None,
            "gc": gc_mode, "gc_collections": gc_passes, "gc_us_per_event": round(in_gc[0] / n * 1e6, 1),
            "us_per_event": {k: round(wall / n * 1e6, 1) for k, (wall, _) in stages.items()},
            "cpu_us_per_event": {k: round(c / n * 1e6, 1) for k, (_, c) in stages.items()},
            "file_is_json_array_of_every_proposal": written == emitted,
            "target_events_per_s": TARGET, "meets_target": n / seconds >= TARGET}


def _stages(blobs: list[bytes], codec: Codec, tmp: pathlib.Path) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds of each stage over all events, timed event by event as the handler runs them."""
    config = load_config(file={"path": str(tmp / f"stages-{uuid.uuid4().hex[:8]}.json")})
    translator = Translator(config)
    sink = FileSink(config.sinks.file)  # type: ignore[arg-type]
    sink.unchanged = unchanged = Unchanged(config.skip_unchanged)
    sink.open()
    names = ("decode", "translate", "skip_unchanged", "write")
    wall = dict.fromkeys(names, 0.0)
    cpu = dict.fromkeys(names, 0.0)
    clock, pclock = time.perf_counter, time.process_time

    def lap(name: str, t: float, c: float) -> tuple[float, float]:
        t2, c2 = clock(), pclock()
        wall[name] += t2 - t
        cpu[name] += c2 - c
        return t2, c2

    for off, blob in enumerate(blobs):
        t, c = clock(), pclock()
        event = codec.decode(blob)
        t, c = lap("decode", t, c)
        proposals = translator.translate(event)
        t, c = lap("translate", t, c)
        scope = job_key(event)
        fresh, marks = unchanged.select(proposals, scope)
        unchanged.commit(marks)
        t, c = lap("skip_unchanged", t, c)
        sink.write(Record("bench", 0, off, scope, 0, event), event["header"]["event_id"], fresh, scope)
        lap("write", t, c)
    sink.close()
    return {k: (wall[k], cpu[k]) for k in names}


def restart(n: int, tmp: pathlib.Path, base_events: int = 1000) -> dict[str, Any]:
    """Seconds the file sink takes to start on the file a run of ``n`` events left (one file, not rolled: the
    worst case). The first ``base_events`` go through the handler; the rest are copies of their records under
    new event ids (the file a long run leaves, made in seconds rather than minutes)."""
    base = tmp / f"base-{base_events}.json"
    if not base.exists():
        codec = Codec()
        h = DataHubHandler(load_config(file={"path": str(base)}))
        h.open()
        for off, e in enumerate(_mix(base_events)):
            event = codec.decode(codec.encode(e))
            h.handle(Record("bench", 0, off, job_key(event), 0, event))
        h.close()
    lines = [line.rstrip(",") for line in base.read_text().splitlines()[1:-1]]
    out = tmp / f"restart-{n}.json"
    key = '"lineagewire.eventId": "'
    with out.open("w") as f:
        f.write("[\n")
        copies = max(1, n // base_events)
        for i in range(copies):
            tail = ",\n" if i < copies - 1 else "\n"
            f.write(",\n".join(line.replace(key, f"{key}{i}-") if i else line for line in lines) + tail)
        f.write("]\n")
    size = out.stat().st_size
    times = []
    for _ in range(3):
        h = DataHubHandler(load_config(file={"path": str(out)}))
        t0 = time.perf_counter()
        h.open()
        times.append(time.perf_counter() - t0)
        h.close()
    out.unlink()
    return {"events": copies * base_events, "file_bytes": size, "start_seconds": round(statistics.median(times), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000, help="events per run")
    ap.add_argument("--repeat", type=int, default=3, help="runs (the median is reported)")
    ap.add_argument("--gc", choices=("default", "freeze", "off"), default="default",
                    help="the garbage collector during the timed loop (see the module docstring)")
    ap.add_argument("--restart", type=int, nargs="*", default=[1000, 100_000],
                    help="also time the file sink's start on the file of this many events (none: skip)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-datahub-") as tmp:
        runs = [in_process(args.n, pathlib.Path(tmp), args.gc) for _ in range(args.repeat)]
        restarts = [restart(n, pathlib.Path(tmp)) for n in args.restart]
        for r in restarts:
            print(f"file sink start after {r['events']:>7} events ({r['file_bytes'] / 1e6:7.1f} MB file): "
                  f"{r['start_seconds'] * 1000:7.1f} ms")
    runs.sort(key=lambda r: r["events_per_s"])
    best = runs[len(runs) // 2]
    name = "datahub" if args.gc == "default" else f"datahub-gc-{args.gc}"
    save(name, {"in_process": best, "events_per_s_all_runs": [r["events_per_s"] for r in runs],
                     "median_events_per_s": statistics.median(r["events_per_s"] for r in runs),
                     "median_events_per_cpu_s": statistics.median(r["events_per_cpu_s"] for r in runs),
                     "file_sink_restart": restarts,
                     "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
