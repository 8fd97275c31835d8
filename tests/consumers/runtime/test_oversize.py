"""Messages the dead-letter topic cannot take as they are (issue 10.1), through the real broker.

A value larger than the dead-letter producer or topic admits is dead-lettered cut, with its size and
SHA-256 in the headers, and the consumer goes on; a dead letter that cannot be written at all is
retried (never skipped, never a crash) and turns /healthz unhealthy.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from lineagewire.consumers.runtime import DLQ_HEADERS, TRUNCATION_HEADERS, ConsumerRuntime, RetryPolicy
from lineagewire.consumers.runtime.deadletter import SMALL_FORM
from lineagewire.kafka.publisher import Publisher
from lineagewire.kafka.topics import TopicSpec, admin, create_topics, delete_topics
from tests.helpers import read_topic, wait_for

from .support import FAST, Recording, events_for, start, wait

pytestmark = pytest.mark.integration


def _headers(msg) -> dict[str, str]:  # noqa: ANN001
    return {k: v.decode() for k, v in msg.headers()}


def _publish_with_garbage(settings, events: list[dict], garbage: dict[int, bytes], *,  # noqa: ANN001
                          max_bytes: int = 2_000_000) -> None:
    """Publish ``events`` in order, with ``garbage[i]`` (raw bytes) before event i; all to partition 0."""
    with Publisher(settings, producer_config={"message.max.bytes": max_bytes}) as pub:
        for i, e in enumerate(events):
            if i in garbage:
                pub.produce_raw(settings.topics.jobs, garbage[i], key=b"big", partition=0)
            pub.publish(e)


def test_a_one_megabyte_undecodable_value_is_dead_lettered_cut_and_the_rest_flows(settings, group_id) -> None:  # noqa: ANN001
    # The broker's default limit (1 MiB) admits it; the dead-letter producer's (1,000,000 bytes) does not.
    big = b"garbage:" + os.urandom(1_000_000 - 8)
    events = events_for(2, 3)
    _publish_with_garbage(settings, events, {2: big})
    h = Recording()
    # give_up_after as in the report: today the service died with it, on this offset at every restart.
    rt = ConsumerRuntime(settings, h, group_id=group_id, service="big",
                         retry=RetryPolicy(initial=0.05, maximum=0.3, jitter=0.01, give_up_after=2))
    t = start(rt)
    wait(lambda: len(h.seen) == len(events) and rt.stats.dead_lettered == 1, runtime=rt)
    rt.stop()
    t.join(30)
    [letter] = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "big"), 1, decode=False)
    headers = _headers(letter)
    assert set(DLQ_HEADERS) | set(TRUNCATION_HEADERS) <= set(headers)
    assert headers["lineagewire.original.size"] == str(len(big))
    assert headers["lineagewire.original.sha256"] == hashlib.sha256(big).hexdigest()
    kept = int(headers["lineagewire.value.truncated"])
    assert 0 < kept < len(big) and letter.value() == big[:kept]
    assert letter.key() == b"big"
    assert headers["lineagewire.error.reason"] == "bad-magic"


def test_a_topic_with_a_lower_limit_gets_the_smaller_forms(settings, group_id, kafka_settings) -> None:  # noqa: ANN001
    # The dead-letter topic exists already, with a limit far below the producer's: the broker refuses the
    # whole value and the 16 KiB form; the letter arrives with its headers only.
    dlq = settings.topics.dlq(settings.topics.jobs, "small")
    create_topics(kafka_settings, [TopicSpec(dlq, 1, 3600_000, {"max.message.bytes": "8000"})])
    try:
        value = os.urandom(50_000)
        events = events_for(1, 2)
        _publish_with_garbage(settings, events, {1: value})
        h = Recording()
        rt = ConsumerRuntime(settings, h, group_id=group_id, service="small", retry=FAST)
        t = start(rt)
        wait(lambda: len(h.seen) == len(events) and rt.stats.dead_lettered == 1, runtime=rt)
        rt.stop()
        t.join(30)
        [letter] = read_topic(settings, dlq, 1, decode=False)
        headers = _headers(letter)
        assert headers["lineagewire.value.truncated"] == "0" and not letter.value()
        assert headers["lineagewire.original.size"] == "50000"
        assert headers["lineagewire.original.sha256"] == hashlib.sha256(value).hexdigest()
        assert SMALL_FORM > 8000  # so the 16 KiB form was tried and refused on the way
    finally:
        delete_topics(kafka_settings, [dlq], timeout=20)


def _healthz(rt: ConsumerRuntime) -> tuple[int, dict]:
    host, port = rt.metrics_address  # type: ignore[misc]
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def test_a_dead_letter_that_cannot_be_written_is_retried_unhealthy_then_written(settings, group_id,  # noqa: ANN001
                                                                                kafka_settings) -> None:
    # Not even the headers fit this topic: the dead letter fails for good until an operator raises the limit.
    dlq = settings.topics.dlq(settings.topics.jobs, "stuck")
    create_topics(kafka_settings, [TopicSpec(dlq, 1, 3600_000, {"max.message.bytes": "100"})])
    try:
        events = events_for(1, 3)
        _publish_with_garbage(settings, events, {1: b"\xc3\x01garbage"})
        h = Recording()
        rt = ConsumerRuntime(settings, h, group_id=group_id, service="stuck", metrics_port=0, unhealthy_after=1,
                             retry=RetryPolicy(initial=0.05, maximum=0.3, jitter=0.01, give_up_after=0.5))
        t = start(rt)
        wait(lambda: rt.metrics_address is not None and _healthz(rt)[0] == 503, runtime=rt)
        _, body = _healthz(rt)
        assert any("dead letter failing" in p for p in body["problems"]), body
        # Nothing after the stuck message was handled (order holds), nothing was skipped, no crash.
        assert [e["header"]["event_id"] for e in h.seen] == [events[0]["header"]["event_id"]]
        assert t.is_alive()
        res = ConfigResource(ResourceType.TOPIC, dlq, incremental_configs=[
            ConfigEntry("max.message.bytes", "1000000", incremental_operation=AlterConfigOpType.SET)])
        client = admin(kafka_settings)
        for fut in client.incremental_alter_configs([res]).values():
            fut.result(timeout=30)
        wait(lambda: len(h.seen) == len(events), runtime=rt)
        wait_for(lambda: _healthz(rt)[0] == 200, timeout=30)
        rt.stop()
        t.join(30)
        assert rt.stats.dead_lettered == 1
        [letter] = read_topic(settings, dlq, 1, decode=False)
        assert letter.value() == b"\xc3\x01garbage"
    finally:
        delete_topics(kafka_settings, [dlq], timeout=20)


@pytest.mark.slow
def test_five_5mb_values_among_5500_events_none_stalls(kafka_settings, group_id) -> None:  # noqa: ANN001
    topic = f"big.{uuid.uuid4().hex[:10]}"
    create_topics(kafka_settings, [TopicSpec(topic, 3, 3600_000, {"max.message.bytes": str(6 * 1024 * 1024)})])
    settings = kafka_settings.model_copy(update={"topics": kafka_settings.topics.model_copy(update={"jobs": topic})})
    try:
        events = events_for(10, 550)
        bigs = {i: os.urandom(5 * 1024 * 1024) for i in (10, 1200, 2400, 3600, 4800)}
        with Publisher(settings, producer_config={"message.max.bytes": 6 * 1024 * 1024}) as pub:
            for i, e in enumerate(events):
                if i in bigs:
                    pub.produce_raw(topic, bigs[i], key=f"big-{i}".encode())
                pub.publish(e)
        h = Recording()
        rt = ConsumerRuntime(settings, h, group_id=group_id, service="huge", retry=FAST)
        t = start(rt)
        wait(lambda: len(h.seen) == len(events) and rt.stats.dead_lettered == len(bigs), timeout=240, runtime=rt)
        rt.stop()
        t.join(60)
        assert sorted(e["header"]["event_id"] for e in h.seen) == sorted(e["header"]["event_id"] for e in events)
        letters = read_topic(settings, settings.topics.dlq(topic, "huge"), len(bigs), decode=False, timeout=60)
        by_key = {m.key(): _headers(m) for m in letters}
        assert set(by_key) == {f"big-{i}".encode() for i in bigs}
        for i, value in bigs.items():
            hd = by_key[f"big-{i}".encode()]
            assert hd["lineagewire.original.sha256"] == hashlib.sha256(value).hexdigest()
            assert int(hd["lineagewire.value.truncated"]) < len(value)
    finally:
        delete_topics(kafka_settings, [topic, settings.topics.dlq(topic, "huge")], timeout=20)
