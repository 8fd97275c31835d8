"""openlineage-python's transports, configured as OpenLineage users do, all fed by one service."""

from __future__ import annotations

import json
import threading

import pytest

from lineagewire.consumers.openlineage.handler import OpenLineageHandler, load_openlineage_config
from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy
from lineagewire.exceptions import ConfigError
from lineagewire.kafka.publisher import Publisher
from lineagewire.kafka.topics import TopicSpec, create_topics
from tests.helpers import read_topic

from .receiver import Receiver, event_key
from .samples import app_run

pytestmark = pytest.mark.integration


def test_composite_of_http_file_and_kafka_from_openlineage_yml(settings, group_id, tmp_path) -> None:  # noqa: ANN001
    events = app_run(actions=1)
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
    ol_topic = f"{settings.topics.jobs}.openlineage"
    create_topics(settings, [TopicSpec(ol_topic, 1, 3600_000)])
    out = tmp_path / "ol.jsonl"
    with Receiver() as rx:
        cfg = tmp_path / "openlineage.yml"
        cfg.write_text(f"""
transport:
  type: composite
  continue_on_failure: false
  transports:
    backend: {{type: http, url: "{rx.url}", retry: {{total: 0}}}}
    archive: {{type: file, log_file_path: "{out}", append: true}}
    stream:
      type: kafka
      topic: {ol_topic}
      config: {{bootstrap.servers: "{settings.bootstrap_servers}"}}
""")
        handler = OpenLineageHandler(config=load_openlineage_config(cfg))
        rt = ConsumerRuntime(settings, handler, group_id=group_id, retry=RetryPolicy(initial=0.05, maximum=0.5))
        t = threading.Thread(target=rt.run, daemon=True)
        t.start()
        posted = rx.wait_for(lambda evs: len(evs) >= len(events))
        rt.stop()
        t.join(30)
    assert len(posted) == len(events)
    from_file = [json.loads(x) for x in out.read_text().splitlines()]
    from_kafka = [json.loads(m.value()) for m in read_topic(settings, ol_topic, len(events), decode=False)]
    assert sorted(map(event_key, from_file)) == sorted(map(event_key, posted))
    assert sorted(map(event_key, from_kafka)) == sorted(map(event_key, posted))


def test_openlineage_config_errors_name_the_problem(tmp_path) -> None:  # noqa: ANN001
    bad = tmp_path / "openlineage.yml"
    bad.write_text("just a string\n")
    with pytest.raises(ConfigError, match="expected a mapping with a 'transport' section"):
        load_openlineage_config(bad)
    with pytest.raises(ConfigError, match="--url 'ftp://x'"):
        load_openlineage_config(url="ftp://x")
    assert load_openlineage_config() is None
    assert load_openlineage_config(url="http://127.0.0.1:5000") == {
        "transport": {"type": "http", "url": "http://127.0.0.1:5000"}}
