"""Replay across archive and topic after retention really deleted the old segments.

A broker of its own (retention checked every 500 ms instead of every 5 minutes; that setting is not
dynamic), a topic with ``segment.ms=100``: a year of history with 2025 timestamps, then today's runs.
The archive takes everything; then ``retention.ms`` drops to one day and the broker deletes the 2025
segments. ``replay --from 2025-01-01 --archive`` must give exactly what the topic gave before.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from lineagewire.cli import main_group
from lineagewire.config import Settings
from lineagewire.consumers.audit.archive import ArchiveHandler
from lineagewire.consumers.audit.manifest import verify
from lineagewire.consumers.audit.storage import Storage
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.exceptions import LocalKafkaError
from lineagewire.kafka.local import LocalKafka, free_port
from lineagewire.kafka.publisher import new_producer
from lineagewire.kafka.reader import TopicReader
from lineagewire.kafka.topics import TopicSpec, admin, create_topics
from lineagewire.schemas import Codec, job_key
from tests.consumers.openlineage.receiver import Receiver, event_key
from tests.consumers.openlineage.samples import app_run
from tests.helpers import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

YEAR = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


class _QuickRetentionKafka(LocalKafka):
    def _write_config(self):  # noqa: ANN202
        props = super()._write_config()
        props.write_text(props.read_text() + "log.retention.check.interval.ms=500\n")
        return props


@pytest.fixture(scope="module")
def retention_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    broker = _QuickRetentionKafka(name=f"retention-{uuid.uuid4().hex[:6]}", port=free_port(),
                                  controller_port=free_port(), base=tmp_path_factory.mktemp("kafka-retention"))
    try:
        broker.start(timeout=120)
    except LocalKafkaError as exc:
        pytest.skip(f"a second local broker could not start here: {exc}")
    try:
        yield Settings(bootstrap_servers=broker.bootstrap_servers)
    finally:
        broker.stop()


def produce(settings: Settings, topic: str, runs: list[tuple[int, list[dict], int | None]]) -> None:
    codec = Codec()
    producer = new_producer(settings, {"linger.ms": 20})
    for partition, events, start_ms in runs:
        for i, e in enumerate(events):
            kwargs = {"timestamp": start_ms + i} if start_ms is not None else {}
            producer.produce(topic, value=codec.encode(e), key=job_key(e).encode(), partition=partition, **kwargs)
    assert producer.flush(30) == 0


def low_watermarks(settings: Settings, topic: str) -> dict[int, int]:
    with TopicReader(settings, topic, start="beginning", end="end") as r:
        return dict(r.start_offsets)


def replay(settings: Settings, topic: str, *args: str):  # noqa: ANN201
    return CliRunner().invoke(main_group, ["--bootstrap-servers", settings.bootstrap_servers, "replay",
                                           "--topic", topic, "--from", "2025-01-01", "--no-progress", *args],
                              catch_exceptions=False)


def test_replay_from_the_first_day_is_the_same_after_retention_deleted_it(retention_settings, tmp_path) -> None:  # noqa: ANN001
    s = retention_settings
    topic = f"jobs.{uuid.uuid4().hex[:8]}"
    create_topics(s, [TopicSpec(topic, 2, -1, {"segment.ms": "100"})])
    month = dt.timedelta(days=30)
    old = [(m % 2, app_run(f"job{m % 3}"), int((YEAR + m * month).timestamp() * 1000)) for m in range(12)]
    produce(s, topic, old)
    old_count = {p: sum(len(ev) for q, ev, _ in old if q == p) for p in (0, 1)}
    produce(s, topic, [(0, app_run("today"), None), (1, app_run("job1", fail=True), None)])

    before_ol = replay(s, topic, "--format", "openlineage")
    before_events = replay(s, topic)
    before_job = replay(s, topic, "--job", "spark/job1")
    assert before_ol.exit_code == 0 and before_events.exit_code == 0, before_ol.stderr
    total = len(before_events.stdout.splitlines())
    assert total == sum(old_count.values()) + 10

    archive = tmp_path / "archive"
    ConsumerRuntime(s, ArchiveHandler(str(archive)), topics=[topic], group_id=f"archive-{topic}",
                    dedup_window=0).run(max_events=total)
    client = admin(s)  # kept alive until the futures resolve
    futures = client.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", str(24 * 3600 * 1000), incremental_operation=AlterConfigOpType.SET)])])
    for f in futures.values():
        f.result(30)
    wait_for(lambda: low_watermarks(s, topic) == old_count, timeout=120, every=0.5)
    # The topic alone has lost the year.
    assert len(replay(s, topic).stdout.splitlines()) == 10

    after_ol = replay(s, topic, "--archive", str(archive), "--format", "openlineage")
    assert after_ol.exit_code == 0, after_ol.stderr
    assert sorted(after_ol.stdout.splitlines()) == sorted(before_ol.stdout.splitlines())
    after_events = replay(s, topic, "--archive", str(archive))
    seen = [(e["partition"], e["offset"]) for e in map(json.loads, after_events.stdout.splitlines())]
    assert len(seen) == len(set(seen)) == total  # no duplicate at the seam
    assert sorted(seen) == sorted((e["partition"], e["offset"])
                                  for e in map(json.loads, before_events.stdout.splitlines()))  # no gap
    assert f"replayed {total} events" in after_events.stderr and "0 errors" in after_events.stderr
    after_job = replay(s, topic, "--archive", str(archive), "--job", "spark/job1")
    assert sorted(after_job.stdout.splitlines()) == sorted(before_job.stdout.splitlines())
    assert len(after_job.stdout.splitlines()) == 4 * 5 + 5
    # Time and offset ranges reaching into the archive: the first three months, offsets 5..14.
    r = replay(s, topic, "--archive", str(archive), "--to", "2025-03-15")
    assert len(r.stdout.splitlines()) == 3 * 5
    r = CliRunner().invoke(main_group, ["--bootstrap-servers", s.bootstrap_servers, "replay", "--topic", topic,
                                        "--archive", str(archive), "--from", "5", "--to", "15"])
    assert sorted({(e["partition"], e["offset"]) for e in map(json.loads, r.stdout.splitlines())}) == \
        [(p, o) for p in (0, 1) for o in range(5, 15)]

    with Receiver() as rx:
        cfg = tmp_path / "openlineage.yml"
        cfg.write_text(f"transport:\n  type: http\n  url: {rx.url}\n")
        r = replay(s, topic, "--archive", str(archive), "--into", "openlineage", "--openlineage-config", str(cfg))
        assert r.exit_code == 0, r.stderr
        posted = rx.snapshot()
    for e in posted:
        e["run"]["facets"].pop("tags")
    assert sorted(posted, key=event_key) == sorted(map(json.loads, before_ol.stdout.splitlines()), key=event_key)
    assert verify(Storage(str(archive))).ok

    # Without the archive's copy the seam has a hole: replay says where, and fails.
    r = replay(s, topic, "--archive", str(tmp_path / "empty"))
    assert r.exit_code == 1
    for p in (0, 1):
        assert f"{topic}[{p}]: offsets 0..{old_count[p] - 1} are neither in the archive nor on the topic" in r.stderr
