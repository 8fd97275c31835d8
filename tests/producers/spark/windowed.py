"""What the emitter's streaming tests and the streaming-sink lineage tests share: a streaming job, and reading the
file listener's events."""

from __future__ import annotations

import json
import pathlib
from typing import Any


def windowed_totals(spark: Any, folder: pathlib.Path) -> Any:
    """A file source of events (in ``folder/in``) summed per 5-second window and user, with a watermark on the
    event time."""
    from pyspark.sql import functions as F

    source = folder / "in"
    source.mkdir()
    rows = [{"ts": f"2026-01-01 00:00:0{i}", "user": f"u{i % 2}", "amount": i} for i in range(6)]
    (source / "part-0.json").write_text("\n".join(json.dumps(r) for r in rows))
    events = spark.readStream.schema("ts timestamp, user string, amount int").json(str(source))
    return (events.withWatermark("ts", "10 seconds").groupBy(F.window("ts", "5 seconds"), "user")
            .agg(F.sum("amount").alias("total")))


def read_events(path: pathlib.Path) -> list[dict[str, Any]]:
    """The events the file listener wrote to ``path`` (JSON lines)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def micro_batch_written(path: pathlib.Path, run_id: str) -> bool:
    """Whether the file listener has written a ``microBatch`` event of the query run ``run_id``."""
    return path.exists() and any(e["header"]["run_id"] == run_id and e.get("action_name") == "microBatch"
                                 for e in read_events(path))
