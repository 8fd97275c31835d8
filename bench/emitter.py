"""The emitter's cost to the job, its extraction time on a wide plan, and its publishing rate.

    .venv/bin/python -m bench.emitter [--actions 50] [--rounds 15] [--variants emitter,...]
                                      [--bootstrap-servers HOST:PORT]
    .venv-spark35/bin/python -m bench.emitter ...   # the same on PySpark 3.5 (tests/spark_line.sh 3.5 --setup-only)

(a) overhead: a workload of ``--actions`` short SQL actions (aggregations,
    joins, writes to the noop sink) run without and with the emitter (kafka
    listener to a real broker), each variant right next to its own base run,
    alternating which goes first, ``--rounds`` times in one SparkSession after a
    warm-up; the median of the per-round wall-time ratios (target <= 1.05) and a
    bootstrap 90 % interval for it, since one round on 2 shared cores varies by
    +-10 %. Variants: ``emitter`` (the default settings: the JVM SparkListener),
    ``py4j_spark_listener`` (the fallback without a JDK compiler),
    ``without_spark_listener``, to show each one's share, and
    ``openlineage_spark``: openlineage-spark's own listener (the published
    ``io.openlineage:openlineage-spark_2.13`` jar through ``spark.jars.packages``,
    file transport into a temporary folder) on the same workload, for comparison
    (target: the emitter's median ratio at most openlineage-spark's).
(b) extraction: ``extract_action_lineage`` on the QueryExecutions of real
    actions over a 300-column plan, p50 / p99 (target p99 <= 100 ms).
(c) events published per second through the kafka listener (encode, outbox
    write, produce, acknowledgement, outbox delete), to a real broker.

Without --bootstrap-servers a local broker is started on free ports and stopped afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import random
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any
from unittest import mock

from bench._common import percentile, save
from lineagewire.config import Settings
from lineagewire.kafka.topics import TopicSpec, create_topics, delete_topics

#: openlineage-spark's newest release on Maven Central (checked 2026-11-23), built for the Scala of the installed
#: PySpark's jars (2.13 on Spark 4, 2.12 on 3.5).
OPENLINEAGE_SPARK = "io.openlineage:openlineage-spark_{scala}:1.53.0"


def _scala_binary() -> str:
    """'2.12' or '2.13': the Scala of the installed PySpark's jars (before any session exists)."""
    import pyspark

    jar = next((pathlib.Path(pyspark.__file__).parent / "jars").glob("scala-library-*.jar"))
    return ".".join(jar.stem.removeprefix("scala-library-").split(".")[:2])
OPENLINEAGE_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
#: Maven Central only, as the tests resolve Spark packages.
IVY_SETTINGS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "producers" / "ivysettings.xml"


def _session(openlineage_events: str | None = None) -> Any:
    """The one SparkSession of the run; with openlineage-spark's jar on its class path when asked."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[2]").appName("bench-emitter")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2"))
    if openlineage_events:
        # The jar only: its listener is added for the openlineage_spark runs and removed after each,
        # so the base runs in between have none (spark.extraListeners would put it under every run).
        builder = (builder.config("spark.jars.packages", OPENLINEAGE_SPARK.format(scala=_scala_binary()))
                   .config("spark.jars.ivySettings", str(IVY_SETTINGS))
                   .config("spark.openlineage.transport.type", "file")
                   .config("spark.openlineage.transport.location", openlineage_events)
                   .config("spark.openlineage.namespace", "bench"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _workload(spark: Any, actions: int) -> float:
    """``actions`` short SQL actions; their wall time in seconds."""
    kinds = [
        lambda i: spark.sql(f"SELECT id % 7 AS k, sum(id) AS s FROM range({1000 + i}) GROUP BY id % 7").count(),
        lambda i: spark.sql(f"SELECT a.id, b.id AS b FROM range({500 + i}) a JOIN range(300) b ON a.id = b.id"
                            ).count(),
        lambda i: spark.range(2000 + i).selectExpr("id", "id * 2 AS x", "cast(id AS string) AS s")
        .write.format("noop").mode("overwrite").save(),
        lambda i: spark.sql(f"SELECT * FROM range({100 + i}) WHERE id % 3 = 0 ORDER BY id DESC").count(),
    ]
    started = time.perf_counter()
    for i in range(actions):
        kinds[i % len(kinds)](i)
    return time.perf_counter() - started


#: The emitter's settings per variant; "emitter" is the default configuration, the one the target is for.
VARIANTS: dict[str, dict[str, str]] = {
    "emitter": {},
    # /bin/false as javac, with an empty cache: the compile fails and the Python listener takes over.
    "py4j_spark_listener": {"javac": "/bin/false"},
    "without_spark_listener": {"spark_listener": "false"},
    "openlineage_spark": {},  # not ours: see with_openlineage
}


def _median_interval(values: list[float], level: float = 0.90, resamples: int = 4000) -> list[float]:
    """A bootstrap interval for the median: how far the figure could move on another day of the same machine."""
    rng = random.Random(7)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - level) / 2
    return [round(medians[int(tail * resamples)], 4), round(medians[int((1 - tail) * resamples) - 1], 4)]


def overhead(spark: Any, settings: Settings, actions: int, rounds: int, outbox: str,
             variants: list[str]) -> dict[str, Any]:
    from lineagewire.producers.spark import install, internals

    def with_openlineage() -> float:
        # As spark.extraListeners would create it: with the SparkConf, whose spark.openlineage.* it reads.
        sc = internals.java_spark_context(spark)
        listener = internals.context_jvm(spark).io.openlineage.spark.agent.OpenLineageSparkListener(sc.conf())
        sc.addSparkListener(listener)
        try:
            took = _workload(spark, actions)
            t = time.perf_counter()
            sc.listenerBus().waitUntilEmpty(30_000)  # its events written, as close() flushes ours
            flush_s.append(time.perf_counter() - t)
        finally:
            sc.removeSparkListener(listener)
        kinds.setdefault("openlineage_spark", OPENLINEAGE_LISTENER)
        return took

    def with_emitter(name: str) -> float:
        if name == "openlineage_spark":
            return with_openlineage()
        config = {"outbox_dir": outbox, "streaming_listener": "false", **VARIANTS[name]}
        with _empty_jvm_cache(name == "py4j_spark_listener"):
            emitter = install(spark, settings=settings, listeners=["kafka"], config=config)
            emitter._hooks.spark_listener_ready.wait(120)  # on a new machine the first one compiles (once)
        kinds.setdefault(name, emitter._hooks.spark_listener_kind)
        took = _workload(spark, actions)
        t = time.perf_counter()
        emitter.close(30)
        flush_s.append(time.perf_counter() - t)
        counts["events"] += emitter.events
        return took

    kinds: dict[str, str | None] = {}
    flush_s: list[float] = []
    counts = {"events": 0}
    # Warm-up, both ways: JIT, code generation caches, first-query costs; the base times still
    # fell for some 200 actions after a single warm-up workload.
    for _ in range(2):
        _workload(spark, actions)
        with_emitter("emitter")
        if "openlineage_spark" in variants:
            with_openlineage()
    ratios: dict[str, list[float]] = {k: [] for k in variants}
    load_before = os.getloadavg()[0]
    for r in range(rounds):
        for name in variants:
            # Each variant against a base run right next to it, alternating which goes first.
            if r % 2 == 0:
                base, measured = _workload(spark, actions), with_emitter(name)
            else:
                measured, base = with_emitter(name), _workload(spark, actions)
            ratios[name].append(measured / base)
    out: dict[str, Any] = {"actions_per_run": actions, "rounds": rounds, "target_median_ratio": 1.05,
                           "load_average_before": round(load_before, 2),
                           "load_average_after": round(os.getloadavg()[0], 2)}
    for name in variants:
        out[name] = {"spark_listener": kinds.get(name),
                     "median_ratio": round(statistics.median(ratios[name]), 4),
                     "median_ratio_90pct_interval": _median_interval(ratios[name]),
                     "ratios": [round(x, 4) for x in ratios[name]]}
    out["close_flush_s_p50"] = round(percentile(flush_s, 50), 4)
    out["events_published"] = counts["events"]
    return out


@contextlib.contextmanager
def _empty_jvm_cache(active: bool) -> Any:
    """While ``active``: LINEAGEWIRE_HOME is an empty folder, so the emitter finds no compiled listener."""
    if not active:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="bench-emitter-home-") as home, \
            mock.patch.dict(os.environ, {"LINEAGEWIRE_HOME": home}):
        yield


class _Capture:
    """A QueryExecutionListener that keeps the QueryExecutions of the actions it sees."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:  # noqa: N802,N803
        self.seen.append((funcName, qe))

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:  # noqa: N802,N803
        self.seen.append((funcName, qe))

    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:  # noqa: N802
        return id(self) & 0x7FFFFFFF

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]


def extraction(spark: Any, columns: int, calls: int, tmp: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from lineagewire.producers.spark import internals
    from lineagewire.producers.spark.lineage import extract_action_lineage

    gateway = internals.gateway(spark)
    internals.start_callback_server(gateway)
    capture = _Capture()
    holder = gateway.jvm.java.util.ArrayList()
    holder.add(capture)
    jlistener = holder.get(0)
    manager = internals.java_session(spark).listenerManager()
    manager.register(jlistener)
    try:
        src = f"{tmp}/wide_src"
        spark.range(100).selectExpr(*[f"id * {i} AS c{i}" for i in range(columns)]).write.mode("overwrite") \
            .parquet(src)
        wide = spark.read.parquet(src)
        lookup = spark.range(50).selectExpr("id AS c0", "id % 5 AS tag")
        plans = [
            wide.where("c1 > 10").selectExpr(*[f"c{i} + c{(i + 1) % columns} AS d{i}" for i in range(columns)]),
            wide.join(lookup, "c0").groupBy("tag").agg(*[F.sum(f"c{i}").alias(f"s{i}") for i in range(1, columns)]),
        ]
        for i, df in enumerate(plans):
            df.write.mode("overwrite").parquet(f"{tmp}/wide_out_{i}")
            df.write.format("noop").mode("overwrite").save()
        internals.java_spark_context(spark).listenerBus().waitUntilEmpty(30_000)
    finally:
        manager.unregister(jlistener)
    seen = list(capture.seen)
    for name, qe in seen:  # warm-up, as the emitter's first action would be
        extract_action_lineage(qe, name, budget_s=10)
    times: list[float] = []
    complete = 0
    columns_found = 0
    for k in range(calls):
        name, qe = seen[k % len(seen)]
        t = time.perf_counter()
        result = extract_action_lineage(qe, name, budget_s=10)  # budget out of the way: this measures the cost
        times.append((time.perf_counter() - t) * 1000)
        complete += bool(result.complete)
        columns_found = max(columns_found, len(result.column_lineage))
    return {"columns": columns, "actions_captured": len(seen), "calls": calls,
            "p50_ms": round(percentile(times, 50), 2), "p99_ms": round(percentile(times, 99), 2),
            "max_ms": round(max(times), 2), "complete_ratio": round(complete / calls, 3),
            "max_column_lineage_entries": columns_found, "target_p99_ms": 100}


def publish_rate(settings: Settings, n: int, tmp: str) -> dict[str, Any]:
    from lineagewire.kafka.outbox import Outbox
    from lineagewire.producers.spark.listeners.kafka import KafkaListener
    from lineagewire.schemas import header, job_status_changed

    events = []
    for i in range(n):
        h = header("JobStatusChangedEvent", job_namespace="bench", job_name=f"job-{i % 50}",
                   run_id=str(uuid.UUID(int=i // 3)), sequence=i % 3)
        events.append(job_status_changed(h, "RUNNING", "CREATED"))
    listener = KafkaListener(settings, Outbox(f"{tmp}/rate-outbox", 1 << 30), delivery_timeout=60)
    started = time.perf_counter()
    for e in events:
        listener.on_event(e)
    handed = time.perf_counter() - started
    while len(listener.outbox) and time.perf_counter() - started < 120:
        time.sleep(0.005)
    took = time.perf_counter() - started
    left = len(listener.outbox)
    listener.close(10)
    return {"events": n, "acknowledged": n - left, "seconds": round(took, 3),
            "events_per_s": round((n - left) / took), "on_event_per_s": round(n / handed)}


def _openlineage_summary(events: str | None) -> dict[str, Any] | None:
    """Which jar ran, and proof that its listener did its work: the events it wrote."""
    if events is None:
        return None
    lines = pathlib.Path(events).read_text().splitlines() if os.path.exists(events) else []
    return {"package": OPENLINEAGE_SPARK.format(scala=_scala_binary()), "transport": "file",
            "events_written": len(lines)}


def _quietly(fn: Any, *args: Any) -> None:
    with contextlib.suppress(Exception):  # cleanup of a throw-away topic
        fn(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, of {', '.join(VARIANTS)} (default: all)")
    parser.add_argument("--columns", type=int, default=300)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--bootstrap-servers", default=None)
    args = parser.parse_args()
    if args.actions < 50:
        parser.error("--actions must be at least 50")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        parser.error(f"--variants {args.variants!r}: expected a comma-separated list of {', '.join(VARIANTS)}")

    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-emitter-"))
        servers = args.bootstrap_servers
        if servers is None:
            from lineagewire.kafka.local import LocalKafka, free_port

            broker = LocalKafka(name="bench-emitter", port=free_port(), controller_port=free_port(),
                                base=pathlib.Path(tmp))
            broker.start(timeout=180)
            stack.callback(broker.stop)
            servers = broker.bootstrap_servers
        settings = Settings(bootstrap_servers=servers)
        topic = f"bench.emitter.{uuid.uuid4().hex[:8]}"
        create_topics(settings, [TopicSpec(topic, 3, 3600_000)])
        stack.callback(lambda: _quietly(delete_topics, settings, [topic]))
        settings = settings.model_copy(update={"topics": settings.topics.model_copy(update={"jobs": topic})})

        ol_events = f"{tmp}/openlineage-events.jsonl" if "openlineage_spark" in variants else None
        spark = _session(ol_events)
        stack.callback(spark.stop)
        results = {
            "overhead": overhead(spark, settings, args.actions, args.rounds, f"{tmp}/outbox", variants),
            "openlineage_spark": _openlineage_summary(ol_events),
            "extraction": extraction(spark, args.columns, args.calls, tmp),
            "publish": publish_rate(settings, args.events, tmp),
        }
        import pyspark

        # Spark 3.5's results beside Spark 4's: bench/results/emitter-spark3.5.json
        line = ".".join(pyspark.__version__.split(".")[:2])
        save("emitter" if pyspark.__version__.startswith("4.") else f"emitter-spark{line}",
             {"pyspark": pyspark.__version__, **results})


if __name__ == "__main__":
    main()
