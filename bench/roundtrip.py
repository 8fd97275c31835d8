"""Job-status events produced and consumed through a real broker: throughput and latency.

    .venv/bin/python -m bench.roundtrip [--n 100000] [--bootstrap-servers HOST:PORT]

Two runs: 100,000 events as fast as one producer can (throughput; latency then is
mostly time queued in the producer), and 20,000 paced at 5,000/s (latency when the
pipeline keeps up). Without --bootstrap-servers it starts its own local broker (lineagewire.kafka.local)
on free ports and stops it afterwards. One producer (the lineagewire Publisher:
idempotent, acks=all, lz4) and one consumer decoding every event run at the same
time; latency is the consumer's receive time minus the message's CreateTime, so it
includes encoding, batching (linger.ms=5), the broker, fetch and decoding.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
import uuid

from confluent_kafka import Consumer

from bench._common import percentile, save
from lineagewire.config import Settings
from lineagewire.kafka.publisher import Publisher
from lineagewire.kafka.topics import TopicSpec, create_topics, delete_topics
from lineagewire.schemas import Codec, header, job_status_changed


def _events(n: int) -> list[dict]:
    statuses = ["CREATED", "RUNNING", "FINISHED"]
    out = []
    for i in range(n):
        h = header("JobStatusChangedEvent", job_namespace="bench", job_name=f"job-{i % 500}",
                   run_id=str(uuid.UUID(int=i // 3)), sequence=i % 3)
        out.append(job_status_changed(h, statuses[i % 3], statuses[i % 3 - 1] if i % 3 else None))
    return out


def run(settings: Settings, n: int, rate: float | None = None) -> dict:
    """Publish n events (as fast as possible, or paced at ``rate`` per second) while a consumer decodes them."""
    topic = f"bench.roundtrip.{uuid.uuid4().hex[:8]}"
    create_topics(settings, [TopicSpec(topic, 6, 3600_000)])
    events = _events(n)
    codec = Codec()
    latencies: list[float] = []
    decoded = 0
    ready = threading.Event()
    done = threading.Event()
    consumer = Consumer({**settings.as_librdkafka_dict(), "group.id": f"bench-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10})

    def consume() -> None:
        nonlocal decoded
        consumer.subscribe([topic], on_assign=lambda c, p: ready.set())
        while decoded < n:
            batch = consumer.consume(1000, timeout=0.01)  # a short wait: batching must not add latency
            now = time.time() * 1000
            for msg in batch:
                if msg.error():
                    continue
                codec.decode(msg.value())
                latencies.append(now - msg.timestamp()[1])
                decoded += 1
        done.set()

    t_consumer = threading.Thread(target=consume, daemon=True)
    t_consumer.start()
    ready.wait(30)
    pub = Publisher(settings)
    t0 = time.perf_counter()
    for i, e in enumerate(events):
        if rate:
            ahead = i / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
        pub.publish(e, topic=topic)
    pub.flush(120)
    produce_s = time.perf_counter() - t0
    done.wait(300)
    total_s = time.perf_counter() - t0
    consumer.close()
    with contextlib.suppress(Exception):
        delete_topics(settings, [topic])
    return {
        "paced_rate_per_s": rate,
        "events": n,
        "consumed": decoded,
        "produce_events_per_s": round(n / produce_s),
        "end_to_end_events_per_s": round(decoded / total_s),
        "latency_ms_p50": round(percentile(latencies, 50), 1),
        "latency_ms_p99": round(percentile(latencies, 99), 1),
        "latency_ms_max": round(max(latencies), 1) if latencies else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--paced-n", type=int, default=20_000, help="events of the paced run")
    ap.add_argument("--paced-rate", type=float, default=5_000, help="events/s of the paced run")
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()

    def both(settings: Settings) -> dict:
        return {"saturated": run(settings, args.n), "paced": run(settings, args.paced_n, args.paced_rate)}

    if args.bootstrap_servers:
        result = both(Settings(bootstrap_servers=args.bootstrap_servers))
        broker = args.bootstrap_servers
    else:
        from lineagewire.kafka.local import LocalKafka, free_port

        with tempfile.TemporaryDirectory() as tmp:
            import pathlib

            kafka = LocalKafka("bench", port=free_port(), controller_port=free_port(), base=pathlib.Path(tmp))
            with kafka:
                result = both(Settings(bootstrap_servers=kafka.bootstrap_servers))
        broker = "local (lineagewire.kafka.local, started for the run)"
    save("roundtrip", {"broker": broker, **result})


if __name__ == "__main__":
    main()
