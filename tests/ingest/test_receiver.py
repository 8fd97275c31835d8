"""The OpenLineage receiver over real HTTP into the real broker: what it takes, what it refuses, and that a refused
request publishes nothing."""

from __future__ import annotations

import gzip
import json
import pathlib
import time

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from tests.helpers import read_topic, wait_for

from .conftest import gzipped, messages_on, ol_event, post

pytestmark = pytest.mark.integration

TOKEN = "ingest-token-0123456789"


def test_events_posted_one_by_one_and_as_an_array_arrive_decoded_on_the_jobs_topic(receiver, settings: Settings):
    first = ol_event("orders", "START")
    rest = [ol_event("orders", "COMPLETE", first["run"]["runId"]), ol_event("payments", "FAIL")]
    with receiver() as url:
        one = post(url, first)
        many = post(url, rest)
    assert (one.status, one.body) == (201, b"")
    assert (many.status, many.body) == (201, b"")
    got = read_topic(settings, settings.topics.jobs, 3)
    seen = sorted((e["header"]["job_name"], e["header"]["run_id"], e["new_status"]) for e in got)
    assert seen == sorted([("orders", first["run"]["runId"], "RUNNING"), ("orders", first["run"]["runId"], "FINISHED"),
                           ("payments", rest[1]["run"]["runId"], "FAILED")])


def test_a_gzip_body_with_the_right_token_is_taken(receiver, settings: Settings):
    event = ol_event("gz")
    with receiver(token=TOKEN) as url:
        answer = post(url, gzipped(event), headers={"Content-Encoding": "gzip", "Authorization": f"Bearer {TOKEN}"})
    assert answer.status == 201
    (got,) = read_topic(settings, settings.topics.jobs, 1)
    assert got["header"]["run_id"] == event["run"]["runId"]


def _bad_requests() -> list[tuple[str, bytes, dict[str, str | None], int, str]]:
    """(case, body, headers, expected status, what the error must name)."""
    valid = json.dumps(ol_event("bad")).encode()
    no_run_id = ol_event("bad")
    del no_run_id["run"]["runId"]
    bad_time = ol_event("bad", eventTime="yesterday")
    bad_facet = ol_event("bad", outputs=[{"namespace": "s3://b", "name": "t", "facets": {"schema": {
        "_producer": "https://x", "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
        "#/$defs/SchemaDatasetFacet", "fields": [{"type": "int"}]}}}])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    return [
        ("malformed JSON", b'{"eventType": "START", ', auth, 400, "not JSON"),
        ("not an object", b'"START"', auth, 400, "expected one OpenLineage event"),
        ("missing runId", json.dumps(no_run_id).encode(), auth, 400, "runId"),
        ("bad eventTime", json.dumps(bad_time).encode(), auth, 400, "eventTime"),
        ("bad facet", json.dumps(bad_facet).encode(), auth, 400, "outputs/0/facets/schema/fields/0"),
        ("one bad event of an array", json.dumps([ol_event("ok"), bad_time]).encode(), auth, 400, "event [1]"),
        ("no token", valid, {}, 401, "Authorization"),
        ("wrong token", valid, {"Authorization": "Bearer nope"}, 401, "token is wrong"),
        ("wrong content type", valid, {**auth, "Content-Type": "text/plain"}, 415, "application/json"),
        ("no content type", valid, {**auth, "Content-Type": None}, 415, "application/json"),
        ("unknown encoding", valid, {**auth, "Content-Encoding": "br"}, 415, "gzip"),
        ("not gzip", valid, {**auth, "Content-Encoding": "gzip"}, 400, "gzip"),
        ("over the limit", json.dumps(ol_event("big", extra_padding="x" * 5000)).encode(), auth, 413,
         "max_body_bytes"),
        ("over the limit once gunzipped", gzip.compress(b"[" + b" " * 20_000 + b"]"),
         {**auth, "Content-Encoding": "gzip"}, 413, "after gunzip"),
    ]


def test_every_bad_request_gets_its_4xx_naming_the_reason_and_publishes_nothing(receiver, settings: Settings):
    cases = _bad_requests()
    with receiver(token=TOKEN, max_body_bytes=4096) as url:
        answers = {case: post(url, body, headers=headers) for case, body, headers, _s, _w in cases}
        # the receiver goes on: a good request after all the bad ones is taken, and it is all the topic holds
        good = ol_event("good")
        assert post(url, good, headers={"Authorization": f"Bearer {TOKEN}"}).status == 201
    for case, _body, _headers, status, what in cases:
        answer = answers[case]
        assert answer.status == status, f"{case}: {answer.status} {answer.body!r}"
        assert what in answer.json()["error"], f"{case}: {answer.json()}"
    (got,) = read_topic(settings, settings.topics.jobs, 1)
    assert got["header"]["job_name"] == "good"
    assert messages_on(settings, settings.topics.jobs) == 1


def test_other_paths_and_methods_are_refused_as_marquez_would(receiver):
    with receiver() as url:
        wrong_method = post(url, b"", method="GET")
        wrong_path = post(url, ol_event(), path="/api/v1/lineage/x")
        health = post(url, b"", method="GET", path="/healthz")
    assert (wrong_method.status, wrong_method.json()["error"]) == (405, "GET /api/v1/lineage: expected POST")
    assert wrong_path.status == 404
    assert health.status == 200 and health.json()["status"] == "ok"


def test_a_gzip_bomb_is_cut_at_the_limit_not_inflated(receiver):
    body = gzip.compress(b"0" * (64 << 20))  # 64 MiB of zeros in ~64 KB
    assert len(body) < 100_000
    with receiver(max_body_bytes=1 << 20) as url:
        answer = post(url, body, headers={"Content-Encoding": "gzip"})
    assert answer.status == 413


def _spooled(folder: pathlib.Path) -> int:
    return sum(1 for _ in folder.rglob("*.evt"))


def test_with_kafka_down_the_answer_waits_for_the_outbox_and_the_events_are_delivered_later(
        receiver, settings: Settings, tmp_path: pathlib.Path):
    dead = settings.model_copy(update={"bootstrap_servers": f"127.0.0.1:{free_port()}"})  # no broker there
    folder = tmp_path / "outbox"
    first, second = ol_event("outage", "START"), ol_event("outage", "COMPLETE")
    with receiver(kafka=dead, ack_timeout=1.0, outbox_dir=str(folder)) as url:
        one = post(url, first)
        in_outbox_then = _spooled(folder)
        started = time.monotonic()
        two = post(url, second)  # Kafka failed: events go straight to the outbox now, without waiting for it
        took = time.monotonic() - started
        in_outbox_later = _spooled(folder)
    assert (one.status, in_outbox_then) == (201, 1)
    assert (two.status, in_outbox_later) == (201, 2)
    assert took < 0.9, f"{took:.2f}s: the second request waited for Kafka again"
    assert messages_on(settings, settings.topics.jobs) == 0
    with receiver(outbox_dir=str(folder)):  # the cluster answers: the next start delivers what the outbox holds
        got = read_topic(settings, settings.topics.jobs, 2)
        wait_for(lambda: _spooled(folder) == 0, timeout=30)
    assert sorted(e["header"]["run_id"] for e in got) == sorted([first["run"]["runId"], second["run"]["runId"]])


def test_with_kafka_down_and_the_outbox_full_the_answer_is_503_so_the_producer_keeps_the_event(
        receiver, settings: Settings, tmp_path: pathlib.Path):
    dead = settings.model_copy(update={"bootstrap_servers": f"127.0.0.1:{free_port()}"})
    with receiver(kafka=dead, ack_timeout=1.0, outbox_max_mb=0.0001) as url:
        answer = post(url, ol_event("full"))
    assert answer.status == 503
    assert "outbox" in answer.json()["error"]


def test_a_retried_post_publishes_the_same_event_ids_with_the_real_translation(settings: Settings,
                                                                               tmp_path: pathlib.Path):
    """A producer that retries (its answer was lost) posts the same event again: the translation derives the ids
    from the event, so the copies carry the same ids and consumers drop the second."""
    from lineagewire.producers.ingest.server import serve
    from lineagewire.producers.ingest.settings import IngestSettings

    event = ol_event("retried", "COMPLETE")
    with serve(IngestSettings(port=0, outbox_dir=str(tmp_path / "outbox")), settings) as url:
        first, again = post(url, event), post(url, gzipped(event), headers={"Content-Encoding": "gzip"})
    assert (first.status, again.status) == (201, 201)
    total = messages_on(settings, settings.topics.jobs)
    got = read_topic(settings, settings.topics.jobs, total)
    ids = [e["header"]["event_id"] for e in got]
    assert total >= 2 and len(got) == total and all(ids.count(i) == 2 for i in ids), ids
    assert {e["header"]["run_id"] for e in got} == {event["run"]["runId"]}
