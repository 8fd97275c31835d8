"""Kafka (spark-sql-kafka): ``KafkaRelation`` batch reads, ``KafkaTable`` streaming reads (DataSource V2:
a streaming query's micro-batch, seen behind ``foreachBatch``) and ``KafkaSourceProvider`` writes."""

from __future__ import annotations

import json
import re
from typing import Any

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ..context import Extraction
from ..jvm import scala_map
from ..naming import kafka_namespace
from ..plan import PlanNode

__all__ = ["kafka_relation", "kafka_save", "kafka_stream", "kafka_table", "kafka_topics", "option_topics"]


def _private_field(obj: Any, name: str) -> Any:
    """A private field of a JVM object (KafkaRelation keeps its options in constructor fields)."""
    f = obj.getClass().getDeclaredField(name)
    f.setAccessible(True)
    return f.get(obj)


def kafka_topics(strategy: str) -> list[tuple[str, dict[str, str]]]:
    """Topics of a Kafka ConsumerStrategy's toString: Subscribe[a, b], Assign[a-0, a-1], SubscribePattern[p]."""
    m = re.match(r"^(\w+)\[(.*)\]$", strategy.strip(), re.S)
    if not m:
        return [(strategy, {"strategy": strategy})]
    kind, body = m.group(1), m.group(2)
    items = [i.strip() for i in body.split(",") if i.strip()]
    if kind == "SubscribePattern":
        return [(body, {"pattern": "true"})]
    if kind == "Assign":
        items = [re.sub(r"-\d+$", "", i) for i in items]
    seen: list[str] = []
    for i in items:
        if i not in seen:
            seen.append(i)
    return [(t, {}) for t in seen]


def option_topics(subscribe: str | None, pattern: str | None, assign: str | None) -> list[tuple[str, dict[str, str]]]:
    """Topics of a Kafka source's options: ``subscribe`` (a, b), ``subscribePattern``, ``assign`` (JSON)."""
    if subscribe:
        return [(t, {}) for t in dict.fromkeys(t.strip() for t in subscribe.split(",") if t.strip())]
    if pattern:
        return [(pattern, {"pattern": "true"})]
    if assign:
        try:
            return [(t, {}) for t in json.loads(assign)]
        except (TypeError, ValueError) as exc:
            raise LookupError(f"Kafka 'assign' option {assign[:100]!r} is not the JSON Spark expects") from exc
    raise LookupError("Kafka source without 'subscribe', 'subscribePattern' or 'assign'")


def kafka_table(ctx: Extraction, node: PlanNode, options: Any, fields: list[SchemaField]) -> list[Dataset]:
    """A V2 ``KafkaTable`` read, by the relation's options (a CaseInsensitiveStringMap: only the keys that
    name the topics are read; options also hold credentials)."""
    ctx.deadline.check_essential("reading the Kafka source's options")
    got = {k: options.get(k) for k in ("kafka.bootstrap.servers", "subscribe", "subscribepattern", "assign")}
    opts = {k: str(v) for k, v in got.items() if v is not None}
    topics = option_topics(opts.get("subscribe"), opts.get("subscribepattern"), opts.get("assign"))
    return [dataset(kafka_namespace(opts.get("kafka.bootstrap.servers", "")), topic, format="kafka", fields=fields,
                    boundedness=ctx.boundedness(node), properties=props) for topic, props in topics]


def kafka_stream(ctx: Extraction, node: PlanNode, stream: Any, fields: list[SchemaField]) -> list[Dataset]:
    """A Spark 3.5 micro-batch's ``KafkaMicroBatchStream``: its topics from its strategy (the stream's
    ``toString``, ``KafkaV2[Subscribe[a, b]]``), its servers from the consumer parameters it keeps."""
    params = _private_field(stream, "executorKafkaParams")
    servers = str(params.get("bootstrap.servers") or "")
    text = str(stream.toString())
    strategy = text[len("KafkaV2["):-1] if text.startswith("KafkaV2[") and text.endswith("]") else text
    return [dataset(kafka_namespace(servers), topic, format="kafka", fields=fields,
                    boundedness=ctx.boundedness(node), properties=props)
            for topic, props in kafka_topics(strategy)]


def kafka_relation(ctx: Extraction, node: PlanNode, relation: Any, catalog_table: dict[str, Any] | None,
                   fields: list[SchemaField], symlinks: list[Symlink]) -> list[Dataset]:
    params = scala_map(_private_field(relation, "specifiedKafkaParams"))
    servers = params.get("bootstrap.servers", "")
    strategy = str(_private_field(relation, "strategy").toString())
    return [dataset(kafka_namespace(servers), topic, format="kafka", fields=fields,
                    boundedness=ctx.boundedness(node), properties=props)
            for topic, props in kafka_topics(strategy)]


def kafka_save(ctx: Extraction, node: PlanNode, query: PlanNode | None, opts: dict[str, str],
               fields: list[SchemaField], mode: str | None) -> None:
    ns = kafka_namespace(opts.get("kafka.bootstrap.servers", ""))
    topic = opts.get("topic")
    if not topic:
        ctx.mark_incomplete("Kafka sink without a 'topic' option: topics come from each row")
        return
    ctx.add_output(dataset(ns, topic, format="kafka", fields=fields, operation=mode), query, None)
