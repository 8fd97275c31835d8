"""The product's topics, created idempotently.

=============================  ==========  =========  ==========================================
topic                          partitions  retention  key
=============================  ==========  =========  ==========================================
lineage.jobs                   6           30 days    job namespace/name (one job, one partition)
lineage.refresh-commands       3           7 days     materialized table identifier
<topic>.dlq.<service>          1           30 days    the original key
=============================  ==========  =========  ==========================================

Retention bounds Kafka's copy only; the audit archive keeps events for longer.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field

from confluent_kafka import KafkaError as _CKError
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from lineagewire.config import Settings
from lineagewire.exceptions import KafkaError

from .cluster import admin, connect

log = logging.getLogger(__name__)

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    retention_ms: int
    config: dict[str, str] = field(default_factory=dict)

    def new_topic(self, replication_factor: int) -> NewTopic:
        cfg = {"retention.ms": str(self.retention_ms), "cleanup.policy": "delete", **self.config}
        return NewTopic(self.name, num_partitions=self.partitions, replication_factor=replication_factor, config=cfg)


def standard_topics(settings: Settings) -> list[TopicSpec]:
    return [
        TopicSpec(settings.topics.jobs, 6, 30 * DAY_MS),
        TopicSpec(settings.topics.refresh_commands, 3, 7 * DAY_MS),
    ]


def dlq_topic(settings: Settings, topic: str, service: str) -> TopicSpec:
    return TopicSpec(settings.topics.dlq(topic, service), 1, 30 * DAY_MS)


def list_topics(settings: Settings, *, timeout: float | None = None) -> dict[str, int]:
    """{topic: partition count} of the cluster's topics, internal ones (``__*``) left out.

    Raises ``BrokerUnavailableError`` when no broker answers within ``timeout`` seconds (default
    ``settings.connect_timeout``).
    """
    _, md = connect(settings, timeout=timeout)
    return {name: len(t.partitions) for name, t in md.topics.items() if not name.startswith("__")}


def create_topics(settings: Settings, specs: list[TopicSpec] | None = None, *, timeout: float = 30.0,
                  connect_timeout: float | None = None, replication_factor: int | None = None) -> dict[str, str]:
    """Create topics that do not exist yet; returns {name: 'created' | 'exists'}.

    The replication factor defaults to min(3, number of brokers). Raises ``BrokerUnavailableError`` when no
    broker answers within ``connect_timeout`` seconds (default ``timeout``): the one-shot ``topics create``
    passes ``settings.connect_timeout``; a service creating its dead-letter topics in the background keeps
    the longer ``timeout``, so one started before Kafka waits for it as long as before.
    """
    specs = specs if specs is not None else standard_topics(settings)
    client, md = connect(settings, timeout=timeout if connect_timeout is None else connect_timeout)
    rf = replication_factor or min(3, max(1, len(md.brokers)))
    result: dict[str, str] = {}
    todo = []
    for spec in specs:
        if spec.name in md.topics:
            result[spec.name] = "exists"
        else:
            todo.append(spec.new_topic(rf))
    if todo:
        result.update(_created(client.create_topics(todo, operation_timeout=timeout, request_timeout=timeout),
                               timeout + 5))
    return result


def _created(futures: dict[str, Future[None]], timeout: float) -> dict[str, str]:
    """{name: 'created' | 'exists'} once the admin client's topic creations are answered; a topic another process
    created meanwhile exists. KafkaError names a topic whose creation failed or was not answered in time."""
    result: dict[str, str] = {}
    for name, fut in futures.items():
        try:
            fut.result(timeout=timeout)
            result[name] = "created"
            log.info("created topic %s", name)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == _CKError.TOPIC_ALREADY_EXISTS:  # another process won the race
                result[name] = "exists"
            else:
                raise KafkaError(f"creating topic {name!r} failed: {err.str()}") from exc
        except TimeoutError as exc:
            raise KafkaError(f"creating topic {name!r}: no answer within {timeout:.0f}s") from exc
    return result


def delete_topics(settings: Settings, names: list[str], timeout: float = 30.0) -> None:
    client = admin(settings)  # held until the futures are done: a destroyed client fails them
    futures = client.delete_topics(names, operation_timeout=timeout, request_timeout=timeout)
    for name, fut in futures.items():
        try:
            # A bound on the wait too: under load the request can outlive its own timeouts.
            fut.result(timeout=timeout + 5)
        except KafkaException as exc:
            raise KafkaError(f"deleting topic {name!r} failed: {exc.args[0].str()}") from exc
        except TimeoutError as exc:
            raise KafkaError(f"deleting topic {name!r}: no answer within {timeout + 5:.0f}s") from exc
