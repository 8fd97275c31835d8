"""The consumer runtime against the real broker: at-least-once, retries, DLQ, dedup, shutdown, metrics."""

from __future__ import annotations

import time
import urllib.request
from collections import defaultdict
from typing import Any

import pytest

from lineagewire.consumers.runtime import DLQ_HEADERS, ConsumerRuntime, OutputError, RetryPolicy
from lineagewire.kafka.publisher import Publisher
from tests.helpers import read_topic, status_event

from .support import FAST, Recording, events_for, publish, start, wait

pytestmark = pytest.mark.integration

def assert_in_order_per_key(seen: list[dict]) -> None:
    by_job: dict[str, list[int]] = defaultdict(list)
    for e in seen:
        by_job[e["header"]["job_name"]].append(e["header"]["sequence"])
    for job, seqs in by_job.items():
        assert seqs == sorted(seqs), f"{job} out of order: {seqs}"


def test_every_event_handled_then_committed(settings, group_id) -> None:  # noqa: ANN001
    events = events_for(3, 10)
    publish(settings, events)
    h = Recording()
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=FAST)
    t = start(rt)
    wait(lambda: len(h.seen) >= 30, runtime=rt)
    rt.stop()
    t.join(30)
    assert not t.is_alive() and h.closed
    assert sorted(e["header"]["event_id"] for e in h.seen) == sorted(e["header"]["event_id"] for e in events)
    assert_in_order_per_key(h.seen)
    # The same group again: everything was committed, nothing comes back.
    h2 = Recording()
    stats = ConsumerRuntime(settings, h2, group_id=group_id).run(idle_timeout=3)
    assert h2.seen == [] and stats.consumed == 0


def test_output_down_retries_keep_order_and_lose_nothing(settings, group_id) -> None:  # noqa: ANN001
    events = events_for(3, 8)
    publish(settings, events)
    h = Recording(fail_until=time.monotonic() + 2.0)
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=FAST)
    t = start(rt)
    wait(lambda: len(h.seen) >= len(events))
    rt.stop()
    t.join(30)
    assert h.failures > 1 and rt.stats.retries == h.failures
    assert rt.metrics.value("lineagewire_consumer_failed_total", stage="output") == h.failures
    assert len(h.seen) == len(events)
    assert_in_order_per_key(h.seen)


def test_poison_messages_go_to_the_dlq_with_headers_and_the_rest_flows(settings, group_id) -> None:  # noqa: ANN001
    events = events_for(2, 3)
    bad_event = events[2]
    with Publisher(settings) as pub:
        pub.publish(events[0])
        pub.produce_raw(settings.topics.jobs, b"\xc3\x01not an event", key=b"job-0", partition=0)
        for e in events[1:]:
            pub.publish(e)
    h = Recording(poison={bad_event["header"]["event_id"]})
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=FAST, service="rec")
    t = start(rt)
    wait(lambda: len(h.seen) >= len(events) - 1)
    rt.stop()
    t.join(30)
    assert len(h.seen) == len(events) - 1
    dlq = settings.topics.dlq(settings.topics.jobs, "rec")
    letters = read_topic(settings, dlq, 2, decode=False)
    assert len(letters) == 2
    by_reason = {}
    for m in letters:
        headers = {k: v.decode() for k, v in m.headers()}
        assert set(DLQ_HEADERS) <= set(headers)
        assert headers["lineagewire.original.topic"] == settings.topics.jobs
        assert headers["lineagewire.service"] == "rec"
        by_reason[headers["lineagewire.error.reason"]] = (m, headers)
    garbage, gh = by_reason["unknown-fingerprint"]
    assert garbage.value() == b"\xc3\x01not an event" and garbage.key() == b"job-0"
    assert gh["lineagewire.error.class"] == "lineagewire.exceptions.DecodeError"
    assert gh["lineagewire.original.partition"] == "0"
    _, ph = by_reason["permanent"]
    assert "cannot handle this one" in ph["lineagewire.error.message"]
    assert rt.stats.dead_lettered == 2


@pytest.mark.slow
def test_redelivered_event_is_handled_once(settings, group_id) -> None:  # noqa: ANN001
    e = status_event()
    publish(settings, [e, e, status_event()])
    h = Recording()
    stats = ConsumerRuntime(settings, h, group_id=group_id).run(idle_timeout=4)
    assert stats.consumed == 3 and stats.duplicates == 1 and len(h.seen) == 2


@pytest.mark.slow
def test_stop_while_output_down_leaves_the_event_for_the_next_run(settings, group_id) -> None:  # noqa: ANN001
    events = events_for(1, 3)
    publish(settings, events)
    down = Recording(fail_until=time.monotonic() + 3600)
    rt = ConsumerRuntime(settings, down, group_id=group_id, retry=FAST)
    t = start(rt)
    wait(lambda: down.failures >= 2)
    rt.stop()
    t.join(30)
    assert not t.is_alive() and down.seen == []
    up = Recording()
    ConsumerRuntime(settings, up, group_id=group_id).run(idle_timeout=4)
    assert [e["header"]["event_id"] for e in up.seen] == [e["header"]["event_id"] for e in events]


def test_metrics_and_healthz_on_loopback(settings, group_id) -> None:  # noqa: ANN001
    publish(settings, events_for(1, 4))
    h = Recording()
    rt = ConsumerRuntime(settings, h, group_id=group_id, metrics_port=0)
    t = start(rt)
    wait(lambda: len(h.seen) >= 4 and rt.metrics_address is not None)
    host, port = rt.metrics_address  # type: ignore[misc]
    assert host == "127.0.0.1"
    with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=10) as r:
        assert r.status == 200 and b'"status": "ok"' in r.read()
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    rt.stop()
    t.join(30)
    assert 'lineagewire_consumer_consumed_total{service="recording",topic="' + settings.topics.jobs + '"} 4.0' in text
    assert 'lineagewire_consumer_emitted_total{service="recording"} 4.0' in text
    assert "lineagewire_consumer_handler_latency_seconds_bucket" in text
    assert "lineagewire_consumer_lag{" in text


@pytest.mark.slow
def test_give_up_after_dead_letters_and_goes_on(settings, group_id) -> None:  # noqa: ANN001
    events = events_for(1, 2)
    publish(settings, events)

    class FirstAlwaysDown(Recording):
        def handle(self, record: Any) -> int:
            if record.event["header"]["event_id"] == events[0]["header"]["event_id"]:
                self.failures += 1
                raise OutputError("backend refuses this one")
            return super().handle(record)

    h = FirstAlwaysDown()
    rt = ConsumerRuntime(settings, h, group_id=group_id, service="giveup",
                         retry=RetryPolicy(initial=0.05, maximum=0.1, jitter=0.0, give_up_after=0.5))
    stats = rt.run(idle_timeout=4)
    assert [e["header"]["event_id"] for e in h.seen] == [events[1]["header"]["event_id"]]
    assert stats.dead_lettered == 1 and h.failures >= 2
    [letter] = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "giveup"), 1, decode=False)
    headers = {k: v.decode() for k, v in letter.headers()}
    assert "still failing after 0.5s" in headers["lineagewire.error.message"]
    assert "backend refuses this one" in headers["lineagewire.error.message"]
