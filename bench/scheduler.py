"""The refresh scheduler under load: 10,000 workflows firing every minute.

    .venv/bin/python -m bench.scheduler [--workflows 10000] [--minutes 3] [--sink kafka|counting]
                                        [--bootstrap-servers HOST:PORT]

The embedded scheduler (SQLite file in a temporary folder) runs its real loop
thread; every workflow has the cron ``0 * * * * *`` (second 0 of every
minute), spread over 100 declared tables with a ``yyyy-MM-dd``/``HH:mm``
partition each. With ``--sink kafka`` (default) commands go to a real broker
(the local one started for the run unless --bootstrap-servers) through the
KafkaCommandSink (idempotent producer, acks=all); with ``counting`` they are
only counted.

The scheduler runs with ``lead=2``: it claims fires (database work, building
the commands) up to 2 s ahead and holds them, so at the nominal time only
encoding and sending is left; this is what ``lineagewire scheduler serve`` does.

* fire lag = the moment the sink confirmed delivery of the command's batch
  (Kafka acks) minus the command's nominal time; p50/p99/max over every fire.
* CPU = process CPU seconds (all threads of this process: scheduler loop,
  SQLite, Avro encoding, librdkafka; not the broker) per measured minute.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import pathlib
import tempfile
import threading
import time
import uuid
from typing import Any

from bench._common import percentile, save
from lineagewire.config import Settings
from lineagewire.producers.scheduler import (
    CommandSink,
    EmbeddedWorkflowScheduler,
    KafkaCommandSink,
    SchedulerOptions,
    TableCatalog,
)
from lineagewire.producers.scheduler.tables import parse_tables


class TimingSink(CommandSink):
    """Wraps a sink and records, per command, when its delivery was confirmed."""

    def __init__(self, inner: CommandSink | None) -> None:
        self.inner = inner
        self._batch: list[dt.datetime] = []
        self.lags: list[float] = []
        self.per_minute: dict[str, int] = {}
        self._lock = threading.Lock()

    def send(self, events: list[dict[str, Any]]) -> None:
        if self.inner is not None:
            self.inner.send(events)
        self._batch.extend(e["nominal_time"] for e in events if "nominal_time" in e)

    def flush(self, timeout: float = 30.0) -> None:
        if self.inner is not None:
            self.inner.flush(timeout)
        done = dt.datetime.now(dt.UTC)
        with self._lock:
            for t in self._batch:
                self.lags.append((done - t).total_seconds())
                key = t.strftime("%H:%M")
                self.per_minute[key] = self.per_minute.get(key, 0) + 1
            self._batch = []

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def run(settings: Settings | None, workflows: int, minutes: int, tmp: pathlib.Path) -> dict[str, Any]:
    tables = [{"identifier": f"bench.t{i}", "query": f"SELECT {i} AS x",
               "partition_fields": {"dt": "yyyy-MM-dd", "hm": "HH:mm"}} for i in range(100)]
    catalog = TableCatalog(parse_tables({"tables": tables}))
    inner: CommandSink | None = None
    if settings is not None:
        from lineagewire.kafka.topics import TopicSpec, create_topics

        topic = f"bench.refresh-commands.{uuid.uuid4().hex[:8]}"
        create_topics(settings, [TopicSpec(topic, 3, 3600_000)])
        settings = settings.model_copy(update={"topics": settings.topics.model_copy(
            update={"refresh_commands": topic})})
        inner = KafkaCommandSink(settings)
    sink = TimingSink(inner)
    sched = EmbeddedWorkflowScheduler(catalog, url=f"sqlite:///{tmp / 'bench.db'}", sink=sink,
                                      options=SchedulerOptions(misfire_grace=60, poll_interval=1.0, lead=2.0))
    sched.open()
    # Every workflow starts at the same minute boundary, far enough ahead for creating them all.
    first = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=workflows / 500 + 20)).replace(second=0, microsecond=0)
    first += dt.timedelta(minutes=1)
    t0 = time.perf_counter()
    for i in range(workflows):
        sched.create_periodic(f"bench.t{i % 100}", "0 * * * * *", name=f"wf{i}", start=first)
    create_s = time.perf_counter() - t0
    time.sleep(max(0.0, (first - dt.datetime.now(dt.UTC)).total_seconds() - 5))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    sched.start()
    target = workflows * minutes
    deadline = time.monotonic() + minutes * 60 + 90
    while len(sink.lags) < target and time.monotonic() < deadline:
        time.sleep(0.5)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    sched.close()
    sink.close()
    lags = sink.lags
    return {
        "workflows": workflows,
        "minutes": minutes,
        "fires": len(lags),
        "fires_per_minute": sink.per_minute,
        "create_workflows_s": round(create_s, 2),
        "fire_lag_s": {"p50": round(percentile(lags, 50), 3), "p90": round(percentile(lags, 90), 3),
                       "p99": round(percentile(lags, 99), 3), "max": round(max(lags, default=float("nan")), 3)},
        "cpu_s_per_minute": round(cpu / (wall / 60), 2),
        "cpu_s_total": round(cpu, 2),
        "wall_s": round(wall, 1),
        "target": "p99 fire lag <= 1 s",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workflows", type=int, default=10_000)
    ap.add_argument("--minutes", type=int, default=3)
    ap.add_argument("--sink", choices=["kafka", "counting"], default="kafka")
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        if args.sink == "counting":
            result, sink = run(None, args.workflows, args.minutes, tmp), "counting sink (no broker)"
        elif args.bootstrap_servers:
            result = run(Settings(bootstrap_servers=args.bootstrap_servers), args.workflows, args.minutes, tmp)
            sink = f"kafka at {args.bootstrap_servers}"
        else:
            from lineagewire.kafka.local import LocalKafka, free_port

            kafka = LocalKafka("bench-scheduler", port=free_port(), controller_port=free_port(), base=tmp / "kafka")
            with kafka, contextlib.suppress(KeyboardInterrupt):
                result = run(Settings(bootstrap_servers=kafka.bootstrap_servers), args.workflows, args.minutes, tmp)
            sink = "kafka (local broker started for the run, acks=all)"
    save("scheduler", {"sink": sink, **result})


if __name__ == "__main__":
    main()
