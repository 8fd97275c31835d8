"""Kafka stopped in the middle of a job: the job goes on, every event arrives once when the broker is back."""

from __future__ import annotations

import collections
from collections.abc import Iterator

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.local import LocalKafka, free_port
from lineagewire.kafka.reader import TopicReader
from lineagewire.kafka.topics import TopicSpec, create_topics
from lineagewire.producers.spark import job_run
from lineagewire.schemas import Codec
from tests.helpers import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def own_broker(tmp_path) -> Iterator[LocalKafka]:  # noqa: ANN001
    """A broker of this test alone (free ports, own data folder), so it can be stopped and started."""
    broker = LocalKafka(name="outage", port=free_port(), controller_port=free_port(), base=tmp_path / "kafka")
    broker.start(timeout=180)
    try:
        yield broker
    finally:
        broker.stop()


def _read_all(settings: Settings, topic: str) -> list[dict]:
    codec = Codec()
    with TopicReader(settings, topic, start="beginning", end="end") as reader:
        return [codec.decode(m.value()) for m in reader]


def test_kafka_down_during_a_job_every_event_arrives_once(spark, make_emitter, own_broker, tmp_path) -> None:  # noqa: ANN001
    settings = Settings(bootstrap_servers=own_broker.bootstrap_servers)
    topic = "outage.jobs"
    create_topics(settings, [TopicSpec(topic, 3, 3600_000)])
    settings = settings.model_copy(update={"topics": settings.topics.model_copy(update={"jobs": topic})})
    outbox = tmp_path / "outbox"
    emitter = make_emitter(settings=settings, listeners=["kafka"],
                           config={"delivery_timeout": "2", "outbox_dir": str(outbox)})

    with job_run(spark, "outage job") as run:
        assert spark.range(3).count() == 3
        assert emitter.flush(30)
        # flush() means handed to the producer: stopped before the broker's acknowledgement, an event stays in the
        # outbox and is sent again (at least once). The claim here is about the events made during the outage.
        wait_for(lambda: not list(outbox.glob("*.evt")), timeout=60)
        own_broker.stop()
        for n in (5, 6, 7):
            assert spark.range(n).count() == n  # the job does not notice
        assert emitter.flush(30)
        assert list(outbox.glob("*.evt")), "events made while the broker is down wait in the outbox"
        own_broker.start(timeout=180)
        assert spark.range(9).count() == 9
    emitter.close(60)

    events = _read_all(settings, topic)
    ids = [e["header"]["event_id"] for e in events]
    assert len(ids) == len(set(ids)), "no event twice"
    runs = collections.defaultdict(list)
    for e in events:
        runs[e["header"]["run_id"]].append(e["header"]["sequence"])
    # job run: created, RUNNING, 5 actions, FINISHED; application run: created, RUNNING, FINISHED
    assert sorted(runs[run.run_id]) == list(range(8))
    assert sorted(runs[emitter.app_run.run_id]) == list(range(3))
    assert len(events) == emitter.events == 11
    assert not list(outbox.glob("*.evt"))
