"""Small helpers shared by the tests: make events, read a topic back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer

from lineagewire.config import Settings
from lineagewire.schemas import Codec, header, job_status_changed


def status_event(job: str = "job", status: str = "RUNNING", old: str | None = "CREATED", run_id: str | None = None,
                 seq: int = 0, namespace: str = "test") -> dict[str, Any]:
    h = header("JobStatusChangedEvent", job_namespace=namespace, job_name=job, run_id=run_id or str(uuid.uuid4()),
               sequence=seq)
    return job_status_changed(h, status, old)  # type: ignore[arg-type]


def read_topic(settings: Settings, topic: str, expected: int, timeout: float = 30.0,
               decode: bool = True) -> list[Any]:
    """Read ``expected`` messages from the beginning of ``topic`` (fresh group), decoded unless decode=False."""
    codec = Codec()
    consumer = Consumer({**settings.as_librdkafka_dict(), "group.id": f"read-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(codec.decode(msg.value()) if decode else msg)
    finally:
        consumer.close()
    return out


def latency(seconds: float) -> None:
    """A test server's simulated processing time (a backend on a LAN answers in milliseconds, not at once): the
    one place a test server sleeps on purpose. Tests never wait for something this way: they use ``wait_for``."""
    if seconds > 0:
        time.sleep(seconds)


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")
