"""Handler behaviour through the real broker: bugs vs outages (issue 9.3) and the optional hooks.

Hooks: a buffering handler's durable offsets bound the commits; close() output is committed; tick runs on
a quiet topic; an undecodable message reaches an ``accepts_undecodable`` handler instead of the DLQ; a
handler with ``decode_fields`` gets only those fields of each event, and bytes that are no event still go to
the DLQ.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest

from lineagewire.consumers.runtime import ConsumerRuntime, Handler, RetryPolicy
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import Codec
from tests.helpers import read_topic

from .support import FAST, Recording, committed, events_for, publish, start, wait

pytestmark = pytest.mark.integration


class Buggy(Recording):
    """Raises KeyError on one event, every time (a bug in the handler)."""

    name = "buggy"

    def __init__(self, bad_id: str) -> None:
        super().__init__()
        self.bad_id = bad_id
        self.attempts = 0

    def handle(self, record: Any) -> int:
        if record.event["header"]["event_id"] == self.bad_id:
            self.attempts += 1
            return self._lookup({}, "missing_field")
        return super().handle(record)

    @staticmethod
    def _lookup(d: dict[str, int], key: str) -> int:
        return d[key]


def test_a_handler_bug_is_retried_a_bounded_number_of_times_then_dead_lettered(settings, group_id) -> None:  # noqa: ANN001
    events = events_for(1, 3)
    publish(settings, events)
    h = Buggy(events[1]["header"]["event_id"])
    rt = ConsumerRuntime(settings, h, group_id=group_id, service="buggy",
                         retry=RetryPolicy(initial=0.05, maximum=0.2, jitter=0.0, max_handler_retries=2))
    t = start(rt)
    wait(lambda: len(h.seen) == 2 and rt.stats.dead_lettered == 1, runtime=rt)
    rt.stop()
    t.join(30)
    assert h.attempts == 3  # the first call and two retries
    assert [e["header"]["event_id"] for e in h.seen] == [events[0]["header"]["event_id"],
                                                        events[2]["header"]["event_id"]]
    [letter] = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "buggy"), 1, decode=False)
    headers = {k: v.decode() for k, v in letter.headers()}
    assert headers["lineagewire.error.class"] == "builtins.KeyError"
    assert headers["lineagewire.error.reason"] == "handler-bug"
    assert "'missing_field'" in headers["lineagewire.error.message"] and "(3 attempts)" in headers[
        "lineagewire.error.message"]
    assert "in _lookup" in headers["lineagewire.error.traceback"]
    assert headers["lineagewire.error.traceback"].rstrip().endswith("KeyError: 'missing_field'")
    assert Codec().decode(letter.value())["header"]["event_id"] == h.bad_id  # the original bytes


class Flaky(Recording):
    """Its output is 'down' (``exc``) until ``fail_until``."""

    name = "flaky"

    def __init__(self, exc: BaseException, fail_until: float) -> None:
        super().__init__()
        self.exc = exc
        self.fail_until = fail_until

    def handle(self, record: Any) -> int:
        if time.monotonic() < self.fail_until:
            self.failures += 1
            raise self.exc
        self.seen.append(record.event)
        return 1


class ClientDown(Exception):
    """A client library's own error class, declared retryable by the handler below."""


class DeclaresItsErrors(Flaky):
    retryable_errors: ClassVar[tuple[type[BaseException], ...]] = (ClientDown,)


@pytest.mark.parametrize("make", [
    lambda until: Flaky(ConnectionRefusedError(111, "Connection refused"), until),
    lambda until: DeclaresItsErrors(ClientDown("backend unreachable"), until),
], ids=["oserror", "retryable_errors"])
def test_output_down_errors_are_retried_past_the_bug_budget(settings, group_id, make) -> None:  # noqa: ANN001
    events = events_for(1, 2)
    publish(settings, events)
    h = make(time.monotonic() + 1.5)
    rt = ConsumerRuntime(settings, h, group_id=group_id, service="flaky",
                         retry=RetryPolicy(initial=0.05, maximum=0.1, jitter=0.0, max_handler_retries=1))
    t = start(rt)
    wait(lambda: len(h.seen) == len(events), runtime=rt)
    rt.stop()
    t.join(30)
    assert h.failures > 3 and rt.stats.dead_lettered == 0


class Buffering(Handler):
    """Buffers events and makes them durable every ``every`` events (like a file per batch)."""

    name = "buffering"

    def __init__(self, every: int, flush_on_close: bool) -> None:
        self.every = every
        self.flush_on_close = flush_on_close
        self.buffer: list[Any] = []
        self.durable: dict[tuple[str, int], int] = {}
        self.flushed: list[Any] = []

    def handle(self, record: Any) -> int:
        self.buffer.append(record)
        if len(self.buffer) >= self.every:
            self._flush()
        return 0

    def _flush(self) -> None:
        for r in self.buffer:
            self.durable[(r.topic, r.partition)] = r.offset + 1
        self.flushed += self.buffer
        self.buffer = []

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        return dict(self.durable)

    def close(self) -> None:
        if self.flush_on_close:
            self._flush()


@pytest.mark.parametrize("flush_on_close", [False, True], ids=["lagging", "flushed-by-close"])
def test_commits_never_pass_the_durable_offset_and_close_output_is_committed(
        settings, group_id, topic_factory, flush_on_close: bool) -> None:  # noqa: ANN001
    topic = topic_factory(partitions=1)
    settings = settings.model_copy(update={"topics": settings.topics.model_copy(update={"jobs": topic})})
    publish(settings, events_for(1, 12))
    h = Buffering(every=5, flush_on_close=flush_on_close)
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=FAST, commit_interval=0.1)
    t = start(rt)
    wait(lambda: rt.stats.consumed == 12 and len(h.flushed) == 10, runtime=rt)
    # Commits run meanwhile (every 0.1 s): they stop at the durable offset, not at the 12 handled.
    wait(lambda: rt.stats.committed.get(f"{topic}[0]") == 10, runtime=rt)
    rt.stop()
    t.join(30)
    assert committed(settings, group_id, topic) == [12 if flush_on_close else 10]


class Ticking(Handler):
    name = "ticking"
    tick_interval: ClassVar[float | None] = 0.2

    def __init__(self) -> None:
        self.ticks: list[float] = []

    def handle(self, record: Any) -> int:
        return 0

    def tick(self, now: float) -> int:
        self.ticks.append(now)
        return 1


def test_tick_runs_on_a_quiet_topic(settings, group_id) -> None:  # noqa: ANN001
    h = Ticking()
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=FAST)
    t = start(rt)
    wait(lambda: len(h.ticks) >= 3, runtime=rt)
    rt.stop()
    t.join(30)
    assert rt.stats.consumed == 0 and rt.stats.emitted == len(h.ticks)
    assert h.ticks == sorted(h.ticks)


class KeepsEverything(Recording):
    name = "keeps"
    accepts_undecodable: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.records: list[Any] = []

    def handle(self, record: Any) -> int:
        self.records.append(record)
        return 1


def test_an_undecodable_message_reaches_an_accepts_undecodable_handler(settings, group_id) -> None:  # noqa: ANN001
    events = events_for(1, 2)
    with Publisher(settings) as pub:
        pub.publish(events[0])
        pub.produce_raw(settings.topics.jobs, b"\xc3\x01not an event", key=b"job-0", partition=0,
                        headers={"origin": "test"})
        pub.publish(events[1])
    h = KeepsEverything()
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=FAST, service="keeps")
    t = start(rt)
    wait(lambda: len(h.records) == 3, runtime=rt)
    rt.stop()
    t.join(30)
    [bad] = [r for r in h.records if r.event is None]
    assert bad.value == b"\xc3\x01not an event" and bad.key_bytes == b"job-0"
    assert bad.decode_error and bad.decode_error.startswith("unknown-fingerprint")
    assert ("origin", b"test") in bad.headers
    assert rt.stats.dead_lettered == 0 and rt.stats.handled == 3


class HeaderOnly(Recording):
    name = "header-only"
    decode_fields: ClassVar[dict[str, list[str]]] = {"JobStatusChangedEvent": ["header"]}


def test_a_handler_with_decode_fields_gets_them_and_garbage_still_goes_to_the_dlq(settings,  # noqa: ANN001
                                                                                       group_id) -> None:
    events = events_for(1, 2)
    whole = Codec().encode(events[1])
    with Publisher(settings) as pub:
        pub.publish(events[0])
        pub.produce_raw(settings.topics.jobs, b"\xc3\x01not an event", key=b"job-0", partition=0)
        # Its tail (after the header) cut: not a valid event, but the header this handler reads is whole.
        pub.produce_raw(settings.topics.jobs, whole[:-5], key=b"job-0", partition=0)
    h = HeaderOnly()
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=FAST, service="header-only")
    t = start(rt)
    wait(lambda: len(h.seen) == 2 and rt.stats.dead_lettered == 1, runtime=rt)
    rt.stop()
    t.join(30)
    assert h.seen == [{"header": e["header"]} for e in events]
    [dead] = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "header-only"), 1, decode=False)
    assert dead.value() == b"\xc3\x01not an event"
    assert dict(dead.headers())["lineagewire.error.reason"] == b"unknown-fingerprint"
