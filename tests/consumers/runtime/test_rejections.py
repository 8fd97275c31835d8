"""A concurrent delivery's failures dead-letter the right record, through the real broker.

``give_up_after`` runs out on a record whose outputs were never confirmed while a LATER record is in hand
(its ``handle`` raised the earlier record's failure): the earlier record is dead-lettered, as consumed, and the
later one is handed again and delivered. The HTTP services' tests (openlineage, datahub) do the same against
real servers, through ``tick``; this one forces the ``handle`` path (one output pending at most, no tick).
"""

from __future__ import annotations

from typing import Any

import pytest

from lineagewire.consumers.runtime import ConsumerRuntime, Handler, InFlight, RetryPolicy
from tests.helpers import read_topic, status_event

from .support import committed, publish, start, wait

pytestmark = pytest.mark.integration


class Webhook(Handler):
    """Sends each event's id through ``InFlight``; the backend is down for job ``down``'s events."""

    name = "webhook"

    def __init__(self) -> None:
        self.got: list[str] = []

    async def post(self, batch: list[tuple[str, str]]) -> None:
        if any(job == "down" for job, _ in batch):
            raise ConnectionRefusedError("backend down for job 'down'")
        self.got.extend(event_id for _, event_id in batch)

    def open(self) -> None:
        # One output pending at most: the next record's submit waits for it, and raises its failure.
        self.inflight: InFlight[tuple[str, str]] = InFlight(self.post, lanes=2, max_pending=1, name="webhook").start()

    def handle(self, record: Any) -> int:
        header = record.event["header"]
        self.inflight.submit(record, [(header["job_name"], header["event_id"])])
        return 0

    def durable_offsets(self) -> dict[tuple[str, int], int] | None:
        return self.inflight.durable_offsets()

    def rejected(self) -> list[Any]:
        return self.inflight.rejected()

    def give_up(self, since: float) -> bool:
        return self.inflight.give_up(since)

    def close(self) -> None:
        self.inflight.close()


def test_give_up_dead_letters_the_record_never_confirmed_not_the_one_in_hand(settings, group_id) -> None:  # noqa: ANN001
    bad = status_event(job="down")
    good = [status_event(job=f"job-{i}", seq=i) for i in range(8)]
    publish(settings, [bad, *good])
    h = Webhook()
    retry = RetryPolicy(initial=0.05, maximum=0.2, jitter=0.01, give_up_after=0.5)
    rt = ConsumerRuntime(settings, h, group_id=group_id, retry=retry, commit_interval=0.1)
    t = start(rt)
    messages = read_topic(settings, settings.topics.jobs, 1 + len(good), decode=False)
    ends: dict[int, int] = {}
    for m in messages:
        ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
    wait(lambda: all(committed(settings, group_id, settings.topics.jobs, 3)[p] == end for p, end in ends.items()),
         runtime=rt)
    rt.stop()
    t.join(30)
    assert sorted(h.got) == sorted(e["header"]["event_id"] for e in good)  # the record in hand was handed again
    assert rt.stats.dead_lettered == 1
    [letter] = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "webhook"), 1, decode=False)
    original = next(m for m in messages if m.key() == letter.key())
    assert letter.value() == original.value()  # the record whose outputs failed, as consumed
    headers = {k: v.decode() for k, v in letter.headers()}
    assert headers["lineagewire.original.offset"] == str(original.offset())
    message = headers["lineagewire.error.message"]
    assert message.startswith(f"{settings.topics.jobs}[{original.partition()}]@{original.offset()}: webhook did "
                              "not confirm its outputs") and "backend down for job 'down'" in message, message
