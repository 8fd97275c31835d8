"""``--from-topic``: OpenLineage JSON from a user's topic through the shared consumer runtime, against the real broker.
Valid events arrive on the jobs topic, invalid ones are dead-lettered with the reason and the partition goes on, and
the offsets are committed past them only once their events are on Kafka."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from lineagewire.cli import main_group
from lineagewire.config import Settings
from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy
from lineagewire.kafka.publisher import new_producer
from lineagewire.producers.ingest.topic import OpenLineageTopicHandler
from lineagewire.schemas import Codec
from tests.helpers import read_topic, status_event, wait_for

from .conftest import StandInTranslator, ol_event

FAST = RetryPolicy(initial=0.05, maximum=0.3, jitter=0.01)


@pytest.mark.integration
def test_invalid_events_are_dead_lettered_with_the_reason_and_the_partition_goes_on(
        settings: Settings, topic_factory, group_id: str) -> None:  # noqa: ANN001
    source = topic_factory("ol-in", partitions=1)
    first, last = ol_event("from-topic", "START"), ol_event("from-topic", "COMPLETE")
    bad_time = ol_event("from-topic", eventTime="yesterday")
    values = [json.dumps(first).encode(), b'{"eventType": "START"', json.dumps(bad_time).encode(),
              json.dumps(last).encode()]
    producer = new_producer(settings)
    for v in values:
        producer.produce(source, v, key=b"run:ns/from-topic")  # as OpenLineage's Kafka transport keys them
    wrong = Codec().encode(status_event("not-openlineage"), topic=settings.topics.jobs)
    producer.produce(source, wrong, key=b"x")  # a contract event on the wrong topic
    after = ol_event("from-topic", "RUNNING")
    producer.produce(source, json.dumps([after]).encode())  # an array, after all the bad ones
    assert producer.flush(30) == 0

    handler = OpenLineageTopicHandler(settings, translator=StandInTranslator())
    runtime = ConsumerRuntime(settings, handler, topics=[source], group_id=group_id, retry=FAST)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        got = read_topic(settings, settings.topics.jobs, 3)
        wait_for(lambda: _committed(settings, group_id, source) == 6, timeout=30)
    finally:
        runtime.stop()
        thread.join(30)
    assert sorted(e["header"]["run_id"] for e in got) == sorted(e["run"]["runId"] for e in (first, last, after))
    assert runtime.stats.dead_lettered == 3
    letters = read_topic(settings, settings.topics.dlq(source, handler.name), 3, decode=False)
    reasons = {m.offset(): dict(m.headers())["lineagewire.error.message"].decode() for m in letters}
    assert {m.offset() for m in letters} == {0, 1, 2}
    original = sorted(int(dict(m.headers())["lineagewire.original.offset"]) for m in letters)
    assert original == [1, 2, 4]
    by_original = {int(dict(m.headers())["lineagewire.original.offset"]): reasons[m.offset()] for m in letters}
    assert "not JSON" in by_original[1]
    assert "eventTime" in by_original[2] and "date-time" in by_original[2]
    assert "contract event" in by_original[4]


def _committed(settings: Settings, group: str, topic: str) -> int:
    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group})
    try:
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=10)
        return tp.offset
    finally:
        c.close()


def test_the_command_names_its_settings_variables() -> None:
    result = CliRunner().invoke(main_group, ["ingest", "openlineage", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for name in ("LINEAGEWIRE_INGEST__TOKEN", "LINEAGEWIRE_INGEST__PORT", "LINEAGEWIRE_INGEST__FROM_TOPIC",
                 "LINEAGEWIRE_INGEST__MAX_BODY_BYTES", "YAML ingest.host"):
        assert name in text.replace("- ", "-"), name
