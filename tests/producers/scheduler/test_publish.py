"""Publishing through the real broker: a command that can never be published does not hold back its batch."""

from __future__ import annotations

import collections
import datetime as dt
import pathlib
from collections.abc import Iterator

import pytest

from lineagewire.config import Settings
from lineagewire.producers.scheduler import (
    EmbeddedWorkflowScheduler,
    KafkaCommandSink,
    SchedulerOptions,
    TableCatalog,
)
from lineagewire.producers.scheduler.tables import parse_tables
from tests.helpers import read_topic, wait_for

from .topics import fresh_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def lw_settings(kafka_settings: Settings) -> Iterator[Settings]:
    with fresh_topics(kafka_settings) as settings:
        yield settings


def test_an_unpublishable_command_fails_alone(lw_settings: Settings, tmp_path: pathlib.Path) -> None:
    # The producer takes messages up to 100 kB here; the big table's query alone is 150 kB.
    catalog = TableCatalog(parse_tables({"tables": [
        {"identifier": "mart.small", "query": "SELECT 1 AS x"},
        {"identifier": "mart.big", "query": "SELECT '" + "x" * 150_000 + "' AS y"},
    ]}))
    sink = KafkaCommandSink(lw_settings, producer_config={"message.max.bytes": 100_000})
    sched = EmbeddedWorkflowScheduler(catalog, url=f"sqlite:///{tmp_path / 'p.db'}", sink=sink,
                                      options=SchedulerOptions(misfire_grace=30, republish_after=3))
    sched.open()
    try:
        small = sched.create_periodic("mart.small", "* * * * * *")
        big = sched.create_periodic("mart.big", "* * * * * *")
        sched.start()
        # Both workflows fire in the same rounds (same cron, same batch); at least 5 fires of each.
        wait_for(lambda: len([r for r in sched.refreshes(workflow_id=small.id, limit=1000)
                              if r.status == "QUEUED"]) >= 5, timeout=60)
        # Longer than republish_after: a held-back or re-sent command would show up as a duplicate.
        first = min(r.nominal_time for r in sched.refreshes(workflow_id=small.id, limit=1000))
        wait_for(lambda: sched.clock() > first + dt.timedelta(seconds=8), timeout=30)
        sched.suspend(small.id)
        sched.suspend(big.id)
        sched.stop()
    finally:
        sched.close()
        sink.close()
    sched.open()
    try:
        small_rows = sched.refreshes(workflow_id=small.id, limit=1000)
        big_rows = sched.refreshes(workflow_id=big.id, limit=1000)
    finally:
        sched.close()
    assert len(big_rows) >= 5
    assert {r.status for r in big_rows} == {"FAILED"}
    assert all("cannot be published" in (r.error or "") and "too large" in (r.error or "").lower()
               for r in big_rows), big_rows[0].error
    assert len(small_rows) >= 8 and {r.status for r in small_rows} == {"QUEUED"}

    published = read_topic(lw_settings, lw_settings.topics.refresh_commands, len(small_rows) + 50, timeout=10)
    per_fire = collections.Counter((e["workflow_id"], e["nominal_time"]) for e in published)
    assert {w for w, _ in per_fire} == {small.id}  # nothing of the big workflow reached the topic
    assert sorted(t for _, t in per_fire) == sorted(r.nominal_time for r in small_rows)
    assert set(per_fire.values()) == {1}, "a command of the normal workflow was published more than once"


def test_a_full_local_queue_is_bounded_and_leaves_the_commands_undelivered(tmp_path: pathlib.Path) -> None:
    # No broker behind the port, and a local queue of one message: the second command finds it full.
    from lineagewire.kafka.local import free_port
    from lineagewire.producers.scheduler.commands import build_command

    catalog = TableCatalog(parse_tables({"tables": [{"identifier": "mart.small", "query": "SELECT 1 AS x"}]}))
    table = catalog.get("mart.small")
    nominal = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    events = [build_command(table, workflow_id=f"wf-{i}", workflow_name=f"wf-{i}", nominal_time=nominal, attempt=1)
              for i in range(3)]
    sink = KafkaCommandSink(Settings(bootstrap_servers=f"127.0.0.1:{free_port()}"),
                            producer_config={"queue.buffering.max.messages": 1})
    try:
        failed = sink.deliver(events, timeout=1.0)
    finally:
        sink.publisher.purge()  # nothing can be delivered; do not wait for it on close
    assert sorted(failed) == [0, 1, 2]
    assert all(not u.permanent for u in failed.values())  # left PENDING, published again on a later tick
    assert "local queue stayed full" in failed[1].reason and "reachable" in failed[1].reason
    assert "still undelivered" in failed[0].reason
