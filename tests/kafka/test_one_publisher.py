"""Every message the product sends to Kafka goes through one component (``lineagewire.kafka.publisher``).

Three ways of producing (the emitter's own delivery thread, the scheduler's queue-full loop, the
dead-letter writer's Publisher) meant a fix in one never reached the others; this keeps it one.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PUBLISHER = ROOT / "lineagewire" / "kafka" / "publisher.py"
#: confluent-kafka's Producer built, or subclassed, anywhere
_PRODUCER = re.compile(r"(?<!class )\bProducer\(|confluent_kafka\s+import[^\n]*\bProducer\b")


def test_only_the_publisher_makes_a_kafka_producer() -> None:
    sources = [p for d in ("lineagewire", "producers", "consumers", "schemas", "bench")
               for p in (ROOT / d).rglob("*.py")]
    assert PUBLISHER in sources and len(sources) > 100
    makers = sorted(str(p.relative_to(ROOT)) for p in sources if _PRODUCER.search(p.read_text()))
    assert makers == ["lineagewire/kafka/publisher.py"]
