"""Fresh jobs and refresh-commands topics for a test, deleted afterwards with a bounded wait.

The shared ``topic_factory`` fixture waits on the delete futures without a
time limit, and twice its teardown hung past pytest's 300 s limit on a loaded
machine; these tests make their own topics and never wait more than 60 s
for their deletion.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from lineagewire.config import Settings
from lineagewire.kafka.topics import TopicSpec, admin, create_topics


@contextlib.contextmanager
def fresh_topics(kafka_settings: Settings) -> Iterator[Settings]:
    """Settings whose jobs and refresh-commands topics are new, 3 partitions each."""
    jobs, cmds = f"jobs.{uuid.uuid4().hex[:10]}", f"cmds.{uuid.uuid4().hex[:10]}"
    create_topics(kafka_settings, [TopicSpec(jobs, 3, 3600_000), TopicSpec(cmds, 3, 3600_000)])
    try:
        yield kafka_settings.model_copy(update={"topics": kafka_settings.topics.model_copy(
            update={"jobs": jobs, "refresh_commands": cmds})})
    finally:
        client = admin(kafka_settings)  # kept referenced until the futures are done
        futures = client.delete_topics([jobs, cmds], operation_timeout=30, request_timeout=30)
        for fut in futures.values():
            with contextlib.suppress(Exception):  # cleanup only
                fut.result(timeout=60)
