"""The refresh scheduler under load: 10,000 workflows firing every minute; and its lineage-aware side.

    .venv/bin/python -m bench.scheduler [--part fires|upstream|all] [--workflows 10000] [--minutes 3]
                                        [--sink kafka|counting] [--bootstrap-servers HOST:PORT]
                                        [--writes 20] [--debounce 2] [--events 3000]

``--part upstream`` (bench/results/scheduler_upstream.json), on a real broker:

* upstream latency: a ``trigger: upstream`` table; an upstream run's write (its ActionLineageEvent and
  FINISHED status) is published to ``lineage.jobs``; the inputs tracker stores it, the loop fires after
  ``--debounce`` and the command is acknowledged by Kafka. Latency = that ack minus the publish, ``--writes``
  times (each after the previous refresh finished). Target: within 1 s + debounce.
* inputs follower vs the registry: ``--events`` job events (application runs with 3 actions, as
  ``bench.registry``) put on a topic, then each consumer (the scheduler's ``InputsHandler``, then the job
  registry's ``RegistryHandler``, one after the other, on SQLite) catches up from the start in its own group
  on ``ConsumerRuntime``: events per second and the largest consumer lag seen (the runtime's
  ``lineagewire_consumer_lag``, sampled every 0.2 s).

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


def run(settings: Settings | None, workflows: int, minutes: int, tmp: pathlib.Path, *,
        holds: bool = True) -> dict[str, Any]:
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
    # holds: every fire is checked against its table's inputs (issue 41), as the service does
    sched = EmbeddedWorkflowScheduler(catalog, url=f"sqlite:///{tmp / 'bench.db'}", sink=sink,
                                      options=SchedulerOptions(misfire_grace=60, poll_interval=1.0, lead=2.0),
                                      inputs=True if holds else None)
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
        "holds_checked": holds,
        "target": "p99 fire lag <= 1 s",
    }


# -- trigger: upstream ------------------------------------------------------------------------------------------------


class AckSink(CommandSink):
    """A Kafka sink that records when each command's delivery was confirmed, by command id."""

    def __init__(self, inner: CommandSink) -> None:
        self.inner = inner
        self.acked: dict[str, tuple[float, dict[str, Any]]] = {}

    def deliver(self, events: list[dict[str, Any]], timeout: float = 30.0) -> dict[int, Any]:
        failed = self.inner.deliver(events, timeout)
        done = time.monotonic()
        for i, e in enumerate(events):
            if i not in failed:
                self.acked[e["command_id"]] = (done, e)
        return failed

    def close(self) -> None:
        self.inner.close()


def _fresh(settings: Settings, *names: str) -> Settings:
    from lineagewire.kafka.topics import TopicSpec, create_topics

    topics = {n: f"bench.{n}.{uuid.uuid4().hex[:8]}" for n in names}
    create_topics(settings, [TopicSpec(t, 3, 3600_000) for t in topics.values()])
    return settings.model_copy(update={"topics": settings.topics.model_copy(update=topics)})


def _wait(predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.02)
    raise TimeoutError(f"not within {timeout}s")


def upstream_latency(settings: Settings, tmp: pathlib.Path, writes: int, debounce: float) -> dict[str, Any]:
    from lineagewire.producers.scheduler.inputs import InputTracker
    from lineagewire.schemas import header, job_status_changed
    from tests.producers.scheduler.ha import publish_write

    settings = _fresh(settings, "jobs", "refresh_commands")
    catalog = TableCatalog(parse_tables({"tables": [{"identifier": "mart.by_customer", "trigger": "upstream",
                                                     "debounce": f"{debounce:g}s",
                                                     "query": "SELECT c, sum(a) FROM raw.orders GROUP BY c"}]}))
    sink = AckSink(KafkaCommandSink(settings))
    # the service's defaults: poll_interval 1 s (the loop also wakes at the debounce's end), lead 2 s
    sched = EmbeddedWorkflowScheduler(catalog, url=f"sqlite:///{tmp / 'upstream.db'}", sink=sink,
                                      options=SchedulerOptions(lead=2.0))
    sched.open()
    assert sched.engine is not None
    tracker = InputTracker(settings, sched.engine, group_id=f"bench-inputs-{uuid.uuid4().hex[:8]}")
    tracker.start()
    sched.start()
    sched.create_upstream("mart.by_customer")
    lags: list[float] = []
    try:
        for i in range(writes + 1):  # the first one warms the tracker's assignment up and is not counted
            t0 = time.monotonic()
            run = publish_write(settings, "raw.orders")
            got = _wait(lambda rid=run["run_id"]: next(
                (v for v in sink.acked.values() if v[1]["header"]["schedule"]["trigger_run"]["run_id"] == rid),
                None), timeout=120)
            if i:
                lags.append(got[0] - t0)
            h = got[1]["header"]  # the refresh finished: the table is free for the next write
            sched.apply_status(job_status_changed(header("JobStatusChangedEvent", job_namespace=h["job_namespace"],
                                                         job_name=h["job_name"], run_id=h["run_id"],
                                                         schedule=h["schedule"]), "FINISHED", duration_ms=1))
    finally:
        sched.close()
        tracker.stop()
        sink.close()
    over = [x - debounce for x in lags]
    return {"writes": len(lags), "debounce_s": debounce,
            "write_to_command_s": {"p50": round(percentile(lags, 50), 3), "p90": round(percentile(lags, 90), 3),
                                   "max": round(max(lags), 3)},
            "beyond_debounce_s": {"p50": round(percentile(over, 50), 3), "p90": round(percentile(over, 90), 3),
                                  "max": round(max(over), 3)},
            "target": "write to command within 1 s + debounce"}


def _catch_up(settings: Settings, handler: Any, n: int) -> dict[str, Any]:
    """``handler`` on ConsumerRuntime from the start of the jobs topic until it consumed ``n`` events."""
    from lineagewire.consumers.runtime import ConsumerRuntime

    runtime = ConsumerRuntime(settings, handler, topics=[settings.topics.jobs],
                              group_id=f"bench-follow-{uuid.uuid4().hex[:8]}")
    thread = threading.Thread(target=runtime.run, daemon=True)
    t0 = time.monotonic()
    thread.start()
    most = 0.0
    try:
        while runtime.stats.consumed < n and time.monotonic() - t0 < 600:
            for metric in runtime.metrics.registry.collect():
                if metric.name == "lineagewire_consumer_lag":
                    most = max(most, sum(x.value for x in metric.samples))
            time.sleep(0.2)
        seconds = time.monotonic() - t0
    finally:
        runtime.stop()
        thread.join(60)
    return {"events": runtime.stats.consumed, "seconds": round(seconds, 2),
            "events_per_s": round(runtime.stats.consumed / seconds), "max_lag": int(most)}


def follower(settings: Settings, tmp: pathlib.Path, events: int) -> dict[str, Any]:
    import sqlalchemy as sa

    from lineagewire.consumers.audit.registry import RegistryHandler
    from lineagewire.db import upgrade
    from lineagewire.kafka.publisher import Publisher
    from lineagewire.producers.scheduler.inputs import InputsHandler
    from lineagewire.producers.scheduler.store import STORE, make_engine
    from tests.consumers.openlineage.samples import app_run

    settings = _fresh(settings, "jobs")
    evs: list[dict[str, Any]] = []
    while len(evs) < events:
        evs += app_run(f"job{len(evs) % 40}", actions=3)
    with Publisher(settings) as pub:
        for e in evs[:events]:
            pub.publish(e)
        pub.flush(60)
    engine: sa.Engine = make_engine(f"sqlite:///{tmp / 'inputs.db'}")
    upgrade(engine, STORE)
    inputs = _catch_up(settings, InputsHandler(engine), events)
    engine.dispose()
    registry = _catch_up(settings, RegistryHandler(f"sqlite:///{tmp / 'registry.db'}"), events)
    return {"events": events, "inputs_follower": inputs, "registry": registry,
            "target": "the scheduler follows lineage.jobs at the rate the registry does"}


def run_upstream(settings: Settings, tmp: pathlib.Path, args: argparse.Namespace) -> dict[str, Any]:
    return {"upstream": upstream_latency(settings, tmp, args.writes, args.debounce),
            "follower": follower(settings, tmp, args.events)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["fires", "upstream", "all"], default="fires")
    ap.add_argument("--workflows", type=int, default=10_000)
    ap.add_argument("--minutes", type=int, default=3)
    ap.add_argument("--sink", choices=["kafka", "counting"], default="kafka")
    ap.add_argument("--bootstrap-servers", default=None)
    ap.add_argument("--writes", type=int, default=20, help="upstream writes timed (--part upstream)")
    ap.add_argument("--debounce", type=float, default=2.0, help="debounce of the upstream table, seconds")
    ap.add_argument("--events", type=int, default=3000, help="job events the followers catch up on")
    ap.add_argument("--no-holds", action="store_true", help="fires part: no inputs check (before issue 41)")
    args = ap.parse_args()
    if args.part in ("upstream", "all"):
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = pathlib.Path(tmp_name)
            if args.bootstrap_servers:
                result = run_upstream(Settings(bootstrap_servers=args.bootstrap_servers), tmp, args)
            else:
                from lineagewire.kafka.local import LocalKafka, free_port

                kafka = LocalKafka("bench-upstream", port=free_port(), controller_port=free_port(),
                                   base=tmp / "kafka")
                with kafka:
                    result = run_upstream(Settings(bootstrap_servers=kafka.bootstrap_servers), tmp, args)
        save("scheduler_upstream", result)
        if args.part == "upstream":
            return
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        if args.sink == "counting":
            result = run(None, args.workflows, args.minutes, tmp, holds=not args.no_holds)
            sink = "counting sink (no broker)"
        elif args.bootstrap_servers:
            result = run(Settings(bootstrap_servers=args.bootstrap_servers), args.workflows, args.minutes, tmp,
                         holds=not args.no_holds)
            sink = f"kafka at {args.bootstrap_servers}"
        else:
            from lineagewire.kafka.local import LocalKafka, free_port

            kafka = LocalKafka("bench-scheduler", port=free_port(), controller_port=free_port(), base=tmp / "kafka")
            with kafka, contextlib.suppress(KeyboardInterrupt):
                result = run(Settings(bootstrap_servers=kafka.bootstrap_servers), args.workflows, args.minutes, tmp,
                             holds=not args.no_holds)
            sink = "kafka (local broker started for the run, acks=all)"
    save("scheduler", {"sink": sink, **result})


if __name__ == "__main__":
    main()
