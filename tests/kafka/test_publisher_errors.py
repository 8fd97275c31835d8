"""Publisher errors are typed and bounded: a full queue, a message over the size limits."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import KafkaError

from lineagewire.config import Settings
from lineagewire.exceptions import MessageTooLargeError, PublishError, QueueFullError
from lineagewire.kafka.local import free_port
from lineagewire.kafka.publisher import Publisher


def test_a_full_queue_raises_queue_full_error_after_the_bound() -> None:
    # A broker nobody runs, and room for two messages: the third cannot be queued.
    pub = Publisher(Settings(bootstrap_servers=f"127.0.0.1:{free_port()}"), queue_full_timeout=0.5,
                    producer_config={"queue.buffering.max.messages": 2, "message.timeout.ms": 2000})
    pub.produce_raw("t.queue", b"1")
    pub.produce_raw("t.queue", b"2")
    with pytest.raises(QueueFullError, match=r"t\.queue: the producer's local queue stayed full \(2 messages\)") as e:
        pub.produce_raw("t.queue", b"3")
    assert e.value.topic == "t.queue" and isinstance(e.value, PublishError)
    with pytest.raises(PublishError):
        pub.flush(5)


def test_a_message_over_message_max_bytes_raises_message_too_large_error() -> None:
    pub = Publisher(Settings(bootstrap_servers=f"127.0.0.1:{free_port()}"),
                    producer_config={"message.max.bytes": 10_000})
    with pytest.raises(MessageTooLargeError, match=r"t\.big: message of 20000 bytes") as e:
        pub.produce_raw("t.big", b"x" * 20_000)
    assert e.value.code == KafkaError.MSG_SIZE_TOO_LARGE


@pytest.mark.integration
def test_a_topic_limit_raises_message_too_large_error_on_flush(kafka_settings, topic_factory) -> None:  # noqa: ANN001
    from lineagewire.kafka.topics import TopicSpec, create_topics, delete_topics

    name = f"small.{free_port()}"
    create_topics(kafka_settings, [TopicSpec(name, 1, 3600_000, {"max.message.bytes": "2000"})])
    try:
        pub = Publisher(kafka_settings)
        pub.produce_raw(name, os.urandom(50_000))  # random: lz4 cannot shrink it under the limit
        with pytest.raises(MessageTooLargeError) as e:
            pub.flush(30)
        assert e.value.code == KafkaError.MSG_SIZE_TOO_LARGE and e.value.topic == name
    finally:
        delete_topics(kafka_settings, [name], timeout=20)
