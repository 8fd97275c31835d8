"""Fixtures of the audit tests: produce records with chosen timestamps and headers, read a topic raw."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from lineagewire.kafka.publisher import new_producer
from lineagewire.kafka.reader import TopicReader
from lineagewire.schemas import Codec, job_key
from tests.helpers import wait_for

#: the write token of the registry APIs the tests serve
REGISTRY_TOKEN = "s3cret-token-0123456789"


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """An ASGI ``app`` served by uvicorn on a thread on a free loopback port; its base URL."""
    import uvicorn

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    wait_for(lambda: srv.started, timeout=30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def registry_api(store: Any) -> Iterator[str]:
    """The registry's REST API over ``store`` (a RegistryStore), served as ``serving`` does; its base URL."""
    from lineagewire.consumers.audit.registry_api import create_app

    with serving(create_app(store, REGISTRY_TOKEN)) as url:
        yield url


@pytest.fixture
def produce(kafka_settings: Settings) -> Callable[..., None]:
    """produce(topic, events_or_bytes, timestamp_ms=None, headers=None, partition=None): write and flush."""

    def send(topic: str, items: list[Any], *, timestamps: list[int] | None = None,
             headers: list[tuple[str, bytes | None]] | None = None, partition: int | None = None) -> None:
        codec = Codec()
        producer = new_producer(kafka_settings, {"linger.ms": 20})
        for i, item in enumerate(items):
            kwargs: dict[str, Any] = {}
            if isinstance(item, bytes):
                value, key = item, b"raw"
            else:
                value, key = codec.encode(item), job_key(item).encode()
            if timestamps is not None:
                kwargs["timestamp"] = timestamps[i]
            if headers is not None:
                kwargs["headers"] = headers
            if partition is not None:
                kwargs["partition"] = partition
            producer.produce(topic, value=value, key=key, **kwargs)
            producer.poll(0)
        assert producer.flush(30) == 0
    return send


def raw_records(settings: Settings, topic: str) -> list[dict[str, Any]]:
    """Every retained record of ``topic`` as Kafka returns it, sorted by partition and offset."""
    out = []
    with TopicReader(settings, topic, start="beginning", end="end") as reader:
        for m in reader.messages():
            ts_type, ts = m.timestamp()
            out.append({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(), "timestamp_type": ts_type,
                        "timestamp": ts, "key_bytes": m.key(), "value": m.value(),
                        "headers": [{"key": k, "value": v} for k, v in (m.headers() or [])]})
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))
