"""The DataHub consumer in one process: events/s from decode to proposals written by the file sink.

    .venv/bin/python -m bench.datahub [--n 5000] [--repeat 3]

The same events as ``bench/consumers`` (an application run mix: JobCreated with lineage, status changes,
actions with column lineage, from ``tests/consumers/openlineage/samples.app_run``), encoded once, then
``Codec.decode`` -> ``DataHubHandler`` (``Translator`` -> ``FileSink``), one thread; the file is fsynced
at the end, as ``close()`` does. Target: >= 5,000 events/s. Also: wall and CPU microseconds per event of
each stage (decode, translate, choosing what changed (which renders each new aspect once with acryl-datahub's own
``to_obj``), the file's JSON lines) and a check that the file
written passes as a JSON array of as many proposals as were emitted.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import tempfile
import time
import uuid
from typing import Any

from bench._common import save
from lineagewire.consumers.datahub.config import load_config
from lineagewire.consumers.datahub.handler import DataHubHandler
from lineagewire.consumers.datahub.render import Renderer, Unchanged
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.consumers.runtime.record import Record
from lineagewire.schemas import Codec
from tests.consumers.openlineage.samples import app_run

TARGET = 5000


def _mix(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        out.extend(app_run(f"job{i % 200}", actions=2))
        i += 1
    return out[:n]


def in_process(n: int, tmp: pathlib.Path) -> dict[str, Any]:
    codec = Codec()
    blobs = [codec.encode(e) for e in _mix(n)]
    out = tmp / f"in_process-{uuid.uuid4().hex[:8]}.json"
    handler = DataHubHandler(load_config(file={"path": str(out)}))
    handler.open()
    emitted = 0
    c0, t0 = time.process_time(), time.perf_counter()
    for off, blob in enumerate(blobs):
        emitted += handler.handle(Record("bench", 0, off, None, 0, codec.decode(blob)))
    handler.close()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    written = len(json.loads(out.read_text()))

    def stage(run: Any) -> tuple[float, float]:
        c, t = time.process_time(), time.perf_counter()
        run()
        return time.perf_counter() - t, time.process_time() - c

    decoded: list[dict[str, Any]] = []
    t_decode = stage(lambda: decoded.extend(codec.decode(b) for b in blobs))
    translator = Translator()
    per_event: list[list[Any]] = []
    t_translate = stage(lambda: per_event.extend(translator.translate(e) for e in decoded))
    renderer = Renderer()
    unchanged = Unchanged(renderer)
    fresh: list[Any] = []

    def select() -> None:
        for proposals in per_event:
            chosen, marks = unchanged.select(proposals)
            unchanged.commit(marks)
            fresh.extend(chosen)

    t_select = stage(select)
    t_render = stage(lambda: [renderer.line(p) for p in fresh])
    stages = {"decode": t_decode, "translate": t_translate, "skip_unchanged": t_select, "render_lines": t_render}
    return {"events": n, "proposals": emitted, "proposals_written": written, "seconds": round(seconds, 3),
            "events_per_s": round(n / seconds), "proposals_per_s": round(emitted / seconds),
            "cpu_seconds": round(cpu, 3), "events_per_cpu_s": round(n / cpu) if cpu else None,
            "us_per_event": {k: round(wall / n * 1e6) for k, (wall, _) in stages.items()},
            "cpu_us_per_event": {k: round(c / n * 1e6) for k, (_, c) in stages.items()},
            "file_is_json_array_of_every_proposal": written == emitted,
            "target_events_per_s": TARGET, "meets_target": n / seconds >= TARGET}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000, help="events per run")
    ap.add_argument("--repeat", type=int, default=3, help="runs (the median is reported)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-datahub-") as tmp:
        runs = [in_process(args.n, pathlib.Path(tmp)) for _ in range(args.repeat)]
    runs.sort(key=lambda r: r["events_per_s"])
    best = runs[len(runs) // 2]
    save("datahub", {"in_process": best, "events_per_s_all_runs": [r["events_per_s"] for r in runs],
                     "median_events_per_s": statistics.median(r["events_per_s"] for r in runs)})


if __name__ == "__main__":
    main()
