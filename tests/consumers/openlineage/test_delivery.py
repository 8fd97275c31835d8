"""Concurrent delivery of ``consume openlineage`` through the real broker and a real HTTP server on 127.0.0.1.

* the backend is killed mid-stream: nothing is committed past an event it did not confirm, and after a
  restart every event arrives (0 lost);
* one job's events arrive in the order they were published, with many requests in flight;
* a transport that cannot confirm each event (async_http) is refused at start; the kafka transport commits
  only what the broker acknowledged;
* an event the backend refuses for good (400) is dead-lettered as it was consumed, and nothing stalls;
* with ``give_up_after``, the records dead-lettered are those whose events were never confirmed (one job's
  store down), not the later records whose calls raised their failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage.handler import OpenLineageHandler
from lineagewire.consumers.openlineage.translate import Translator
from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy
from lineagewire.schemas import Codec
from tests.helpers import read_topic, wait_for

from .receiver import Receiver, event_key
from .samples import app_run
from .test_service import publish

pytestmark = pytest.mark.integration

FAST = RetryPolicy(initial=0.05, maximum=0.3, jitter=0.01)


def keys_of(event: dict) -> set[tuple[str, str, str]]:
    return {event_key(json.loads(Serde.to_json(o))) for o in Translator().translate(event)}


def committed(settings, group: str, topic: str) -> dict[int, int]:  # noqa: ANN001
    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(3)],
                                                              timeout=30)}
    finally:
        c.close()


#: runtimes a test started: stopped after it even when it failed, so none keeps retrying behind later tests
_STARTED: list[tuple[ConsumerRuntime, threading.Thread]] = []


@pytest.fixture(autouse=True)
def _stop_started_runtimes() -> Iterator[None]:
    yield
    while _STARTED:
        rt, t = _STARTED.pop()
        rt.stop()
        t.join(30)


def start(settings, group: str, url: str, *, retry: RetryPolicy = FAST,  # noqa: ANN001
          **kw: Any) -> tuple[ConsumerRuntime, threading.Thread]:
    handler = OpenLineageHandler(config={"transport": {"type": "http", "url": url, "timeout": 2}}, **kw)
    rt = ConsumerRuntime(settings, handler, group_id=group, retry=retry, commit_interval=0.1)
    t = threading.Thread(target=rt.run, daemon=True)
    t.start()
    _STARTED.append((rt, t))
    return rt, t


def test_backend_killed_mid_stream_nothing_committed_past_it_and_nothing_lost(settings) -> None:  # noqa: ANN001
    events = [e for i in range(200) for e in app_run(f"job{i:03d}", actions=1)]  # 800 events, 200 jobs
    publish(settings, events)
    topic = settings.topics.jobs
    by_offset: dict[tuple[int, int], set[Any]] = {}
    codec = Codec()
    for msg in read_topic(settings, topic, len(events), decode=False):
        by_offset[(msg.partition(), msg.offset())] = keys_of(codec.decode(msg.value()))
    want = set().union(*by_offset.values())
    group = f"ol-kill-{uuid.uuid4().hex[:8]}"
    with Receiver(delay=0.004) as rx:
        rt, t = start(settings, group, rx.url, concurrency=8, max_pending=64)
        rx.wait_for(lambda evs: len(evs) >= 40, timeout=90)
        # Mid-stream, once something is committed (so that the check below has offsets to check).
        wait_for(lambda: any(o > 0 for o in committed(settings, group, topic).values()), timeout=60, every=0.05)
        rx.kill()
        at_kill = {event_key(e) for e in rx.snapshot()}
        # The commits keep coming (every 0.1 s) while the backend is gone: each must stay below every event
        # of its partition the backend does not have.
        checked = 0
        for _ in range(5):
            done = committed(settings, group, topic)
            for (p, off), keys in by_offset.items():
                if off < done.get(p, -1):
                    checked += 1
                    assert keys <= at_kill, f"committed {topic}[{p}]@{done[p]} past offset {off}, not delivered"
        assert checked > 0, "nothing was committed, so nothing was checked"
        assert at_kill < want, "the backend was killed after everything arrived"
        rt.stop()  # with the backend still gone: the unconfirmed events stay uncommitted
        t.join(60)
        assert not t.is_alive()
        rx.restart()
        rt2, t2 = start(settings, group, rx.url, concurrency=8)
        got = rx.wait_for(lambda evs: {event_key(e) for e in evs} >= want, timeout=90)
        rt2.stop()
        t2.join(30)
    assert {event_key(e) for e in got} == want  # 0 lost
    assert rt.stats.dead_lettered == rt2.stats.dead_lettered == 0


def test_one_jobs_events_arrive_in_order_with_many_requests_in_flight(settings, group_id) -> None:  # noqa: ANN001
    runs = [app_run(f"job{i:02d}", actions=3) for i in range(24)]  # 6 events a run, one key per job
    events = [e for run in zip(*runs, strict=True) for e in run]  # the jobs interleaved, as on a busy cluster
    publish(settings, events)
    position = {k: i for i, e in enumerate(events) for k in keys_of(e)}
    job_of = {k: e["header"]["job_name"] for e in events for k in keys_of(e)}
    with Receiver(delay=0.01) as rx:
        rt, t = start(settings, group_id, rx.url, concurrency=16)
        got = rx.wait_for(lambda evs: {event_key(e) for e in evs} >= set(position), timeout=90)
        rt.stop()
        t.join(30)
        assert rx.max_in_flight > 4  # concurrent, not one at a time
    assert {event_key(e) for e in got} == set(position)
    arrivals: dict[str, list[int]] = {}
    for e in got:
        arrivals.setdefault(job_of[event_key(e)], []).append(position[event_key(e)])
    for job, order in arrivals.items():
        assert order == sorted(order), f"{job}: events arrived out of order: {order}"
    # and jobs overtook each other (they were sent concurrently)
    assert [position[event_key(e)] for e in got] != sorted(position[event_key(e)] for e in got)


def test_a_transport_that_cannot_confirm_each_event_is_refused_at_start(tmp_path) -> None:  # noqa: ANN001
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    for transport in ("{type: async_http, url: 'http://127.0.0.1:9'}",
                      "{type: composite, transports: {a: {type: console}, b: {type: async_http, "
                      "url: 'http://127.0.0.1:9'}}}"):
        cfg = tmp_path / "openlineage.yml"
        cfg.write_text(f"transport: {transport}\n")
        r = subprocess.run([sys.executable, "-m", "lineagewire", "--bootstrap-servers", "127.0.0.1:1", "consume",
                            "openlineage", "--openlineage-config", str(cfg)], capture_output=True, text=True,
                           timeout=120, env=env, cwd=tmp_path)
        assert r.returncode == 2, r.stderr[-2000:]
        lines = [x for x in r.stderr.splitlines() if "async_http" in x]
        assert len(lines) == 1 and "cannot confirm each event" in lines[0], r.stderr[-2000:]
        assert "expected one of http, kafka, file, console" in lines[0]
        assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_kafka_transport_commits_only_what_the_broker_acknowledged(settings, group_id) -> None:  # noqa: ANN001
    events = app_run(actions=1)
    publish(settings, events)
    want = set().union(*(keys_of(e) for e in events))
    # A broker that is not there: nothing is acknowledged, so nothing is committed, and the runtime retries.
    dead = {"transport": {"type": "kafka", "topic": "ol.out", "config": {
        "bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": "1000"}}}
    rt = ConsumerRuntime(settings, OpenLineageHandler(config=dead), group_id=group_id, retry=FAST,
                         commit_interval=0.1)
    t = threading.Thread(target=rt.run, daemon=True)
    t.start()
    wait_for(lambda: rt.metrics.value("lineagewire_consumer_failed_total", stage="batch") +
             rt.metrics.value("lineagewire_consumer_failed_total", stage="tick") >= 2, timeout=60)
    rt.stop()
    t.join(60)
    done = committed(settings, group_id, settings.topics.jobs)
    assert all(off <= 0 for off in done.values()), (done, rt.stats)  # 0: from the first event again
    # The same group with the real broker: everything arrives on the OpenLineage topic, then it is committed.
    ol_topic = f"{settings.topics.jobs}.ol"
    live = {"transport": {"type": "kafka", "topic": ol_topic,
                          "config": {"bootstrap.servers": settings.bootstrap_servers}}}
    rt = ConsumerRuntime(settings, OpenLineageHandler(config=live), group_id=group_id, retry=FAST,
                         commit_interval=0.1)
    t = threading.Thread(target=rt.run, daemon=True)
    t.start()
    got = read_topic(settings, ol_topic, len(want), decode=False)
    wait_for(lambda: sum(max(o, 0) for o in committed(settings, group_id, settings.topics.jobs).values())
             == len(events), timeout=30)
    rt.stop()
    t.join(30)
    assert {event_key(json.loads(m.value())) for m in got} == want
    assert all(m.key().startswith(b"run:spark/") for m in got)  # openlineage-python's kafka message keys


class Published:
    """The test topic as consumed: each record's message and the OpenLineage events it translates to."""

    def __init__(self, settings, count: int) -> None:  # noqa: ANN001
        codec = Codec()
        self.messages = {(m.partition(), m.offset()): m
                         for m in read_topic(settings, settings.topics.jobs, count, decode=False)}
        assert len(self.messages) == count
        self.events = {pos: codec.decode(m.value()) for pos, m in self.messages.items()}
        self.keys = {pos: keys_of(e) for pos, e in self.events.items()}
        #: per partition, the offset after its last record: where the group's commits must get to
        self.ends = {p: max(o for q, o in self.messages if q == p) + 1 for p, _ in self.messages}

    def where(self, pos: tuple[int, int], topic: str) -> str:
        return f"{topic}[{pos[0]}]@{pos[1]}"


def interleaved_runs(jobs: int) -> list[dict]:
    runs = [app_run(f"job{i:02d}", actions=1) for i in range(jobs)]  # 4 events a run, one key per job
    return [e for run in zip(*runs, strict=True) for e in run]


def dead_letters(settings, count: int) -> list[Any]:  # noqa: ANN001
    return read_topic(settings, settings.topics.dlq(settings.topics.jobs, "openlineage"), count, decode=False)


def test_an_event_the_backend_refuses_is_dead_lettered_as_consumed_and_nothing_stalls(settings, group_id) -> None:  # noqa: ANN001
    events = interleaved_runs(6)
    publish(settings, events)
    topic = settings.topics.jobs
    pub = Published(settings, len(events))
    # The RUNNING status event of job03: a record in the middle of its job, with records of it before and after.
    bad = next(pos for pos, e in pub.events.items()
               if e["header"]["job_name"] == "job03" and e["header"]["sequence"] == 1)
    refused = pub.keys[bad]
    want = set().union(*(k for pos, k in pub.keys.items() if pos != bad))
    with Receiver(delay=0.002, status_of=lambda ev: 400 if event_key(ev) in refused else 200) as rx:
        rt, t = start(settings, group_id, rx.url, concurrency=4)  # FAST: no give_up_after, retried forever
        got = rx.wait_for(lambda evs: {event_key(e) for e in evs} >= want, timeout=90)
        # Nothing stalls: every partition is committed to its end, the refused record's too.
        wait_for(lambda: all(committed(settings, group_id, topic).get(p) == end for p, end in pub.ends.items()),
                 timeout=60, every=0.1)
        rt.stop()
        t.join(30)
    assert {event_key(e) for e in got} == want  # every other event arrived, and none of the refused one's
    assert {event_key(e) for _, e in rx.answered} == refused
    assert rt.stats.dead_lettered == 1
    [letter] = dead_letters(settings, 1)
    original = pub.messages[bad]
    assert (letter.value(), letter.key()) == (original.value(), original.key())  # the record as consumed
    headers = {k: v.decode() for k, v in letter.headers()}
    assert headers["lineagewire.error.class"] == "lineagewire.consumers.openlineage.exceptions.RefusedError"
    message = headers["lineagewire.error.message"]
    assert message.startswith(f"{pub.where(bad, topic)}: OpenLineage backend ") and " refused the event with 400 " \
        in message and "(invalid event: status 400)" in message and "expected 2xx" in message, message
    assert (headers["lineagewire.original.partition"], headers["lineagewire.original.offset"]) == tuple(map(str, bad))


@pytest.mark.slow
def test_give_up_after_dead_letters_the_records_never_confirmed_not_later_ones(settings, group_id) -> None:  # noqa: ANN001
    events = interleaved_runs(6)
    publish(settings, events)
    topic = settings.topics.jobs
    pub = Published(settings, len(events))
    down = {pos for pos, e in pub.events.items() if e["header"]["job_name"] == "job02"}  # its store is down
    down_keys = set().union(*(pub.keys[pos] for pos in down))
    want = set().union(*(k for pos, k in pub.keys.items() if pos not in down))
    retry = RetryPolicy(initial=0.05, maximum=0.2, jitter=0.01, give_up_after=1.0)
    with Receiver(delay=0.002, status_of=lambda ev: 503 if event_key(ev) in down_keys else 200) as rx:
        rt, t = start(settings, group_id, rx.url, retry=retry, concurrency=4)
        got = rx.wait_for(lambda evs: {event_key(e) for e in evs} >= want, timeout=90)
        wait_for(lambda: all(committed(settings, group_id, topic).get(p) == end for p, end in pub.ends.items()),
                 timeout=90, every=0.1)
        rt.stop()
        t.join(30)
    assert {event_key(e) for e in got} == want
    assert rt.stats.dead_lettered == len(down) == 4
    letters = dead_letters(settings, len(down))
    # Exactly job02's records, as consumed: not the later records whose handle/tick raised their failure.
    assert {(int(dict(m.headers())["lineagewire.original.partition"]), int(dict(m.headers())[
        "lineagewire.original.offset"])) for m in letters} == down
    assert all(m.value() == pub.messages[(int(dict(m.headers())["lineagewire.original.partition"]),
                                          int(dict(m.headers())["lineagewire.original.offset"]))].value()
               for m in letters)
    messages = [dict(m.headers())["lineagewire.error.message"].decode() for m in letters]
    assert all("did not confirm its outputs" in x and "503" in x for x in messages), messages
