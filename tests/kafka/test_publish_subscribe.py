"""Publishing through the real broker, and `lineagewire subscribe` as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lineagewire.kafka.publisher import Publisher
from tests.helpers import read_topic, status_event

pytestmark = pytest.mark.integration


def _cli(settings, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers}
    return subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def test_published_events_arrive_decoded_and_keyed_by_job(settings, topic):  # noqa: ANN001
    events = [status_event(job=f"job-{i % 3}", seq=i) for i in range(30)]
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
    got = read_topic(settings, topic, 30, decode=False)
    assert len(got) == 30
    by_key: dict[bytes, set[int]] = {}
    for msg in got:
        by_key.setdefault(msg.key(), set()).add(msg.partition())
    assert set(by_key) == {b"test/job-0", b"test/job-1", b"test/job-2"}
    assert all(len(parts) == 1 for parts in by_key.values()), "one job's events must share one partition"


def test_subscribe_sees_every_event_and_skips_garbage(settings, topic):  # noqa: ANN001
    events = [status_event(job="orders", seq=i) for i in range(10)]
    with Publisher(settings) as pub:
        for i, e in enumerate(events):
            pub.publish(e)
            if i == 4:
                pub.produce_raw(topic, b"\x00\x00\x00\x00\x07garbage", key="test/orders")
    run = _cli(settings, "subscribe", "--topic", topic, "--from-beginning", "--exit-at-end")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    seen = sorted(rec["event"]["header"]["event_id"] for rec in lines)
    assert seen == sorted(e["header"]["event_id"] for e in events)
    assert all(rec["topic"] == topic and rec["key"] == "test/orders" for rec in lines)
    assert f"{topic}[" in run.stderr and "skipped undecodable message" in run.stderr


def test_subscribe_filters_by_status_and_job_and_counts(settings, topic):  # noqa: ANN001
    with Publisher(settings) as pub:
        for i in range(6):
            pub.publish(status_event(job=f"j{i % 2}", status="FAILED" if i in (1, 3) else "RUNNING", seq=i))
    run = _cli(settings, "subscribe", "--topic", topic, "--from-beginning", "--exit-at-end", "--status", "FAILED")
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [rec["event"]["new_status"] for rec in lines] == ["FAILED", "FAILED"]
    run = _cli(settings, "subscribe", "--topic", topic, "--from-beginning", "--exit-at-end", "--job", "j0",
               "--format", "table")
    rows = run.stdout.splitlines()
    assert rows[0].startswith("event time") and len(rows) == 4 and all(" j0 " in r for r in rows[1:])
    run = _cli(settings, "subscribe", "--topic", topic, "--from-beginning", "--count", "2")
    assert len(run.stdout.splitlines()) == 2
