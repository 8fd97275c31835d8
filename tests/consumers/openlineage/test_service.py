"""``lineagewire consume openlineage`` end to end: real broker, real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage.handler import OpenLineageHandler
from lineagewire.consumers.openlineage.translate import Translator
from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import Codec
from tests.helpers import wait_for

from .receiver import Receiver, event_key
from .samples import LIFECYCLE_STEPS, app_run, lifecycle_run, refresh_run

pytestmark = pytest.mark.integration

FAST = RetryPolicy(initial=0.05, maximum=0.5, jitter=0.01)


def expected_keys(events: list[dict]) -> set[tuple[str, str, str]]:
    return {event_key(json.loads(Serde.to_json(o))) for e in events for o in Translator().translate(e)}


def publish(settings, events: list[dict]) -> None:  # noqa: ANN001
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)


def http_config(url: str) -> dict[str, Any]:
    # No retries inside the transport: the runtime's backoff is what is under test.
    return {"transport": {"type": "http", "url": url, "timeout": 5, "retry": {"total": 0}}}


def failures(rt: ConsumerRuntime) -> float:
    """Failed attempts of the runtime at the output, whichever call reported them."""
    return sum(rt.metrics.value("lineagewire_consumer_failed_total", stage=s) for s in ("output", "batch", "tick"))


def run_in_thread(rt: ConsumerRuntime) -> threading.Thread:
    t = threading.Thread(target=rt.run, daemon=True)
    t.start()
    return t


def test_every_event_arrives_valid(settings, group_id, receiver: Receiver, assert_valid_openlineage) -> None:  # noqa: ANN001
    events = app_run() + app_run("hourly", fail=True) + refresh_run()
    publish(settings, events)
    want = expected_keys(events)
    rt = ConsumerRuntime(settings, OpenLineageHandler(config=http_config(receiver.url)), group_id=group_id,
                         retry=FAST)
    t = run_in_thread(rt)
    got = receiver.wait_for(lambda evs: {event_key(e) for e in evs} >= want)
    rt.stop()
    t.join(30)
    assert {event_key(e) for e in got} == want
    assert_valid_openlineage(got)
    actions = [e for e in got if ".insert_into_hadoop_fs_relation_command." in e["job"]["name"]]
    assert len(actions) == 5
    for a in actions:
        assert a["inputs"] and a["outputs"][0]["facets"]["columnLineage"]["fields"]
        assert a["run"]["facets"]["parent"]["run"]["runId"]
    assert any(e["eventType"] == "FAIL" and "errorMessage" in e["run"]["facets"] for e in got)
    assert sum("nominalTime" in e["run"]["facets"] for e in got) == 4


def test_receiver_down_for_a_while_then_everything_arrives(settings, group_id, receiver: Receiver) -> None:  # noqa: ANN001
    events = [e for i in range(4) for e in app_run(f"job{i}", actions=1)]
    publish(settings, events)
    want = expected_keys(events)
    receiver.down = True
    # A bug budget of 1: a backend that is down (EmitError, an OutputError) is retried past it, forever.
    rt = ConsumerRuntime(settings, OpenLineageHandler(config=http_config(receiver.url)), group_id=group_id,
                         retry=RetryPolicy(initial=0.05, maximum=0.5, jitter=0.01, max_handler_retries=1))
    t = run_in_thread(rt)
    def rejected_five() -> bool:
        assert t.is_alive(), "the runtime thread died"
        # Five attempts of the runtime (the first requests go out concurrently, one per job in flight; the
        # failures come back from handle, batch_done or tick).
        return failures(rt) >= 5

    wait_for(rejected_five, timeout=60, every=0.05)
    assert receiver.snapshot() == []
    receiver.down = False
    got = receiver.wait_for(lambda evs: {event_key(e) for e in evs} >= want)
    rt.stop()
    t.join(30)
    assert {event_key(e) for e in got} == want
    assert failures(rt) >= 5
    assert rt.stats.dead_lettered == 0
    # Per run, OpenLineage events arrive in the order the job produced them.
    for job in {e["job"]["name"] for e in got if "." not in e["job"]["name"]}:
        types = [e["eventType"] for e in got if e["job"]["name"] == job]
        assert types[0] == "START" and types[-1] == "COMPLETE", types


def test_poison_message_is_dead_lettered_and_the_rest_flows(settings, group_id, receiver: Receiver) -> None:  # noqa: ANN001
    events = app_run(actions=1)
    with Publisher(settings) as pub:
        pub.publish(events[0])
        pub.produce_raw(settings.topics.jobs, b"{\"not\": \"avro\"}", key="spark/daily_orders")
        for e in events[1:]:
            pub.publish(e)
    rt = ConsumerRuntime(settings, OpenLineageHandler(config=http_config(receiver.url)), group_id=group_id,
                         retry=FAST)
    t = run_in_thread(rt)
    want = expected_keys(events)
    got = receiver.wait_for(lambda evs: {event_key(e) for e in evs} >= want)
    rt.stop()
    t.join(30)
    assert {event_key(e) for e in got} == want
    assert rt.stats.dead_lettered == 1
    from tests.helpers import read_topic

    [letter] = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "openlineage"), 1, decode=False)
    headers = dict(letter.headers())
    assert letter.value() == b"{\"not\": \"avro\"}"
    assert headers["lineagewire.error.reason"] == b"bad-magic"
    assert headers["lineagewire.original.topic"] == settings.topics.jobs.encode()


def _service(settings, topic: str, group: str, url: str, cwd, *, via_env: bool = False) -> subprocess.Popen:  # noqa: ANN001
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "OPENLINEAGE_DISABLED": "", "PYTHONUNBUFFERED": "1"}
    env.pop("OPENLINEAGE_CONFIG", None)
    target = ["--url", url]
    if via_env:
        # Configured the OpenLineage way, with no lineagewire flag at all.
        env.update({"OPENLINEAGE__TRANSPORT__TYPE": "http", "OPENLINEAGE__TRANSPORT__URL": url})
        target = []
    return subprocess.Popen(
        [sys.executable, "-m", "lineagewire", "-v", "consume", "openlineage", *target, "--topic", topic,
         "--group", group, "--retry-initial", "0.05", "--retry-max", "0.5",
         # The broker's minimum: the restarted service waits for the killed member's session to end.
         "--consumer-property", "session.timeout.ms=6000"],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _end(proc: subprocess.Popen) -> str:
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""


@pytest.mark.slow
def test_sigkill_mid_stream_then_restart_loses_nothing(settings, tmp_path) -> None:  # noqa: ANN001
    events = [e for i in range(30) for e in app_run(f"job{i:02d}", actions=1)]
    publish(settings, events)
    want = expected_keys(events)
    group = f"ol-{uuid.uuid4().hex[:8]}"
    # The backend goes down after 40 events, so the kill lands mid-stream, while the service retries.
    with Receiver(down_after=40) as rx:
        first = _service(settings, settings.topics.jobs, group, rx.url, tmp_path)
        try:
            rx.wait_for(lambda evs: len(evs) >= 40, timeout=90)
            first.send_signal(signal.SIGKILL)
        finally:
            _end(first)
        assert first.returncode == -signal.SIGKILL
        before = len(rx.snapshot())
        assert 40 <= before < len(want), "the kill did not land mid-stream"
        rx.down_after, rx.down = None, False
        second = _service(settings, settings.topics.jobs, group, rx.url, tmp_path)
        try:
            got = rx.wait_for(lambda evs: {event_key(e) for e in evs} >= want, timeout=120)
        finally:
            second.send_signal(signal.SIGTERM)
            err = _end(second)
        assert second.returncode == 0, err[-2000:]
    keys = [event_key(e) for e in got]
    assert set(keys) == want
    # At-least-once: a few events may come twice after the kill, and then they are identical.
    by_key: dict[Any, list[dict]] = {}
    for e in got:
        by_key.setdefault(event_key(e), []).append(e)
    assert all(all(x == dups[0] for x in dups) for dups in by_key.values())


def test_sigterm_finishes_commits_and_exits_cleanly(settings, tmp_path, receiver: Receiver) -> None:  # noqa: ANN001
    events = app_run(actions=2)
    publish(settings, events)
    want = expected_keys(events)
    group = f"ol-{uuid.uuid4().hex[:8]}"
    proc = _service(settings, settings.topics.jobs, group, receiver.url, tmp_path, via_env=True)
    try:
        receiver.wait_for(lambda evs: {event_key(e) for e in evs} >= want, timeout=90)
        # No pause before SIGTERM: the event in hand is finished and everything handled is committed.
        proc.send_signal(signal.SIGTERM)
    finally:
        err = _end(proc)
    assert proc.returncode == 0, err[-2000:]
    # Emitted counts what the backend confirmed by the runtime's last call; the backend has all five.
    assert "openlineage: stopped; consumed 5, emitted " in err
    # Committed: the group's offsets are at the end of every partition.
    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group})
    try:
        parts = [TopicPartition(settings.topics.jobs, p) for p in range(3)]
        committed = c.committed(parts, timeout=30)
        ends = [c.get_watermark_offsets(tp, timeout=30)[1] for tp in parts]
    finally:
        c.close()
    assert [max(tp.offset, 0) for tp in committed] == ends
    assert sum(ends) == len(events)


def test_codec_roundtrip_sample_is_what_the_service_sees() -> None:
    # Guard for the tests above: the sample events survive the contract unchanged where it matters.
    codec = Codec()
    for e in app_run() + refresh_run():
        d = codec.decode(codec.encode(e))
        assert d["header"]["event_id"] == e["header"]["event_id"]


def test_the_runtime_owns_retries_one_request_per_attempt(receiver: Receiver) -> None:
    # openlineage-python's default is five urllib3 retries with backoff (~9.5 s) inside each attempt.
    from lineagewire.consumers.openlineage.exceptions import EmitError
    from lineagewire.consumers.runtime import Record

    event = app_run(actions=0)[0]
    handler = OpenLineageHandler(config={"transport": {"type": "http", "url": receiver.url, "timeout": 5}},
                                 concurrency=0)
    handler.open()
    receiver.down = True
    try:
        with pytest.raises(EmitError, match=r"answered 503"):
            handler.handle(Record("t", 0, 0, None, 0, event))
        assert receiver.rejected == 1
    finally:
        handler.close()
    # A composite's HTTP child: no retries unless its config has a retry section, which is then kept
    # (and composes: 1 + total requests per attempt).
    for retry, requests in ((None, 1), ({"total": 1, "backoff_factor": 0}, 2)):
        child = {"type": "http", "url": receiver.url, **({"retry": retry} if retry else {})}
        kept = OpenLineageHandler(config={"transport": {"type": "composite", "continue_on_failure": False,
                                                        "transports": {"backend": child}}})
        kept.open()
        before = receiver.rejected
        try:
            with pytest.raises(EmitError):
                kept.handle(Record("t", 0, 0, None, 0, event))
        finally:
            kept.close()
        assert receiver.rejected - before == requests


def test_lifecycle_changes_arrive_as_valid_facets(settings, group_id, receiver: Receiver,  # noqa: ANN001
                                                  assert_valid_openlineage) -> None:  # noqa: ANN001
    events = lifecycle_run()
    publish(settings, events)
    want = expected_keys(events)
    rt = ConsumerRuntime(settings, OpenLineageHandler(config=http_config(receiver.url)), group_id=group_id,
                         retry=FAST)
    t = run_in_thread(rt)
    got = receiver.wait_for(lambda evs: {event_key(e) for e in evs} >= want)
    rt.stop()
    t.join(30)
    assert_valid_openlineage(got)
    facets = [o["facets"]["lifecycleStateChange"] for e in sorted(got, key=lambda e: e["eventTime"])
              for o in e.get("outputs") or []]
    assert [f["lifecycleStateChange"] for f in facets] == [c for _, _, c, _ in LIFECYCLE_STEPS]
    assert [f.get("previousIdentifier") for f in facets if f["lifecycleStateChange"] == "RENAME"] == [
        {"namespace": "file", "name": "/warehouse/sales.db/orders"}]
