"""Fixtures of the ingest tests: OpenLineage events, the receiver served on loopback, a raw HTTP poster.

The receiver's own tests (test_receiver*.py, test_from_topic*.py) check the
transport: what is taken, what is refused, what is durable. They translate
with ``StandInTranslator`` (one status event per RunEvent, its id derived from
the OpenLineage event) so that they do not depend on the translation's
details, which its own tests check; ``tests/ingest/producers/`` runs the real
producers through the real translation.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import http.client
import json
import pathlib
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from lineagewire.config import Settings
from lineagewire.producers.ingest.server import serve
from lineagewire.producers.ingest.settings import IngestSettings
from lineagewire.schemas import header, job_status_changed

RUN_EVENT_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
_STATUS = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "FINISHED", "FAIL": "FAILED", "ABORT": "CANCELED",
           "OTHER": "RUNNING"}


def ol_event(job: str = "job", event_type: str = "START", run_id: str | None = None, *,
             namespace: str = "ingest-test", **extra: Any) -> dict[str, Any]:
    """A spec-valid OpenLineage RunEvent."""
    return {"eventType": event_type, "eventTime": dt.datetime.now(dt.UTC).isoformat(),
            "run": {"runId": run_id or str(uuid.uuid4()), "facets": {}},
            "job": {"namespace": namespace, "name": job, "facets": {}},
            "inputs": [], "outputs": [], "producer": PRODUCER, "schemaURL": RUN_EVENT_URL, **extra}


class StandInTranslator:
    """One JobStatusChangedEvent per RunEvent; its event id derived from the OpenLineage event (duplicates share
    it), the run id and job kept."""

    def translate(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        job, run = event["job"], event["run"]
        eid = str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(event, sort_keys=True)))
        h = header("JobStatusChangedEvent", job_namespace=job["namespace"], job_name=job["name"],
                   run_id=run["runId"], event_id=eid)
        return [dict(job_status_changed(h, _STATUS[event["eventType"]], None))]  # type: ignore[arg-type]


class Answer:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def post(url: str, body: bytes | Any, *, headers: dict[str, str] | None = None, path: str = "/api/v1/lineage",
         method: str = "POST") -> Answer:
    """One request, ``body`` as JSON unless it is bytes; the default headers are an OpenLineage transport's."""
    parts = urllib.parse.urlsplit(url)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **(headers or {})}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, path, body=data, headers={k: v for k, v in sent.items() if v is not None})
        resp = conn.getresponse()
        return Answer(resp.status, resp.read())
    finally:
        conn.close()


def messages_on(settings: Settings, topic: str) -> int:
    """How many messages ``topic`` holds (its partitions' high watermarks: fresh topics start at 0)."""
    consumer = Consumer({**settings.as_librdkafka_dict(), "group.id": f"size-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions)
    finally:
        consumer.close()


def gzipped(doc: Any) -> bytes:
    return gzip.compress(json.dumps(doc).encode())


@pytest.fixture
def receiver(settings: Settings, tmp_path: pathlib.Path) -> Callable[..., contextlib.AbstractContextManager[str]]:
    """receiver(**ingest_settings): the receiver served on loopback (stand-in translation) into this test's jobs
    topic, with an outbox folder of the test's; a context manager yielding its URL."""

    @contextlib.contextmanager
    def start(kafka: Settings | None = None, **ingest: Any) -> Iterator[str]:
        cfg = IngestSettings(**{"port": 0, "outbox_dir": str(tmp_path / "outbox"), **ingest})
        with serve(cfg, kafka or settings, translator=StandInTranslator()) as url:
            yield url

    return start
