"""Handlers and helpers shared by the runtime's integration tests."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from lineagewire.config import Settings
from lineagewire.consumers.runtime import ConsumerRuntime, Handler, OutputError, PermanentError, RetryPolicy
from lineagewire.kafka.publisher import Publisher
from tests.helpers import status_event, wait_for

FAST = RetryPolicy(initial=0.05, maximum=0.3, jitter=0.01)


class Recording(Handler):
    """Keeps every handled event; ``fail_until`` (monotonic time) makes the output 'down' until then."""

    name = "recording"

    def __init__(self, fail_until: float = 0.0, poison: set[str] | None = None) -> None:
        self.seen: list[dict[str, Any]] = []
        self.fail_until = fail_until
        self.poison = poison or set()
        self.failures = 0
        self.closed = False

    def handle(self, record: Any) -> int:
        if record.event["header"]["event_id"] in self.poison:
            raise PermanentError(f"{record.where}: cannot handle this one")
        if time.monotonic() < self.fail_until:
            self.failures += 1
            raise OutputError("backend down")
        self.seen.append(record.event)
        return 1

    def close(self) -> None:
        self.closed = True


def publish(settings, events: list[dict]) -> None:  # noqa: ANN001
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)


def events_for(jobs: int, per_job: int) -> list[dict]:
    out = []
    for s in range(per_job):
        for j in range(jobs):
            out.append(status_event(job=f"job-{j}", run_id=f"00000000-0000-0000-0000-00000000000{j}", seq=s))
    return out


def start(runtime: ConsumerRuntime) -> threading.Thread:
    """Run in a thread; an exception in the loop fails the waiting test instead of vanishing."""
    def run() -> None:
        try:
            runtime.run()
        except BaseException as exc:
            runtime.crashed = exc  # type: ignore[attr-defined]
            raise

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def wait(predicate: Any, timeout: float = 60.0, runtime: Any = None) -> None:
    def ready() -> Any:
        assert getattr(runtime, "crashed", None) is None, f"runtime crashed: {runtime.crashed!r}"
        return predicate()

    wait_for(ready, timeout, every=0.05)


def committed(settings: Settings, group: str, topic: str, partitions: int = 1) -> list[int]:
    """The group's committed offsets of ``topic``'s partitions (-1001 when none)."""
    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)]
    finally:
        c.close()
