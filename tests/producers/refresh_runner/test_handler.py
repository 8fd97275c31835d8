"""RefreshHandler's queue, durable offsets and cancels, without Spark or a broker (the refresh itself is faked)."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from typing import Any

import pytest

from lineagewire.config import Settings
from lineagewire.consumers.runtime import OutputError, PermanentError, Record
from lineagewire.producers.refresh_runner import CompletedStore
from lineagewire.producers.refresh_runner.runner import RefreshHandler
from lineagewire.schemas import cancel_refresh, header, refresh_command
from tests.helpers import status_event, wait_for

TOPIC = "cmds"


class FakeContext:
    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def cancelJobsWithTag(self, tag: str) -> None:  # noqa: N802 - Spark's name
        self.cancelled.append(tag)


class FakeSpark:
    def __init__(self) -> None:
        self.sparkContext = FakeContext()


class GatedHandler(RefreshHandler):
    """Each refresh waits for its gate; records the order refreshes ran in."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(FakeSpark(), Settings(), state=CompletedStore(":memory:"), install_emitter=False, **kwargs)
        self.gates: dict[str, threading.Event] = {}
        self.ran: list[str] = []

    def refresh(self, command: dict[str, Any]) -> str:
        cid = command["command_id"]
        with self._lock:
            if cid in self._canceled:
                return self._outcome(cid, "CANCELED")
        self.ran.append(cid)
        self.gates.setdefault(cid, threading.Event()).wait(30)
        with self._lock:
            canceled = cid in self._canceled
        if canceled:
            return self._outcome(cid, "CANCELED")
        self.state.mark(cid, 1)
        return self._outcome(cid, "COMPLETED")


def _cmd(cid: str, table: str = "mart.t") -> dict[str, Any]:
    hdr = header("RefreshCommand", job_namespace="r", job_name="refresh", run_id=cid, sequence=0)
    return dict(refresh_command(hdr, command_id=cid, workflow_id="w", table=table,
                                nominal_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), query="SELECT 1 AS x"))


def _cancel(cid: str) -> dict[str, Any]:
    hdr = header("CancelRefresh", job_namespace="r", job_name="refresh", run_id=cid, sequence=1)
    return dict(cancel_refresh(hdr, command_id=cid, workflow_id="w", table="mart.t", reason="test"))


def _record(event: dict[str, Any], offset: int, partition: int = 0) -> Record:
    return Record(TOPIC, partition, offset, "k", 0, event)


@pytest.fixture
def handler() -> Any:
    h = GatedHandler()
    h.open()
    yield h
    for gate in h.gates.values():
        gate.set()
    h.close()


def test_offsets_are_held_at_the_oldest_unfinished_command(handler: GatedHandler) -> None:
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    handler.handle(_record(_cmd(a), 10))
    handler.handle(_record(_cmd(b), 11))
    wait_for(lambda: handler.ran == [a], timeout=10)
    durable = handler.durable_offsets()
    assert durable[(TOPIC, 0)] == 10
    assert (TOPIC, 1) in durable and durable[(TOPIC, 1)] > 10**9  # a partition with nothing pending is not held
    handler.gates.setdefault(a, threading.Event()).set()
    wait_for(lambda: handler.durable_offsets()[(TOPIC, 0)] == 11, timeout=10)
    handler.gates.setdefault(b, threading.Event()).set()
    wait_for(lambda: handler.durable_offsets()[(TOPIC, 0)] > 10**9, timeout=10)
    assert handler.outcomes == [(a, "COMPLETED"), (b, "COMPLETED")]


def test_a_cancel_reaches_the_running_refresh_and_skips_a_queued_one(handler: GatedHandler) -> None:
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    handler.handle(_record(_cmd(a), 0))
    handler.handle(_record(_cmd(b), 1))
    wait_for(lambda: handler.ran == [a], timeout=10)
    handler.handle(_record(_cancel(a), 2))  # arrives while a runs: handle() is not blocked by the refresh
    handler.handle(_record(_cancel(b), 3))
    assert handler.spark.sparkContext.cancelled == [f"lineagewire-refresh-{a}"]
    handler.gates.setdefault(a, threading.Event()).set()
    wait_for(lambda: len(handler.outcomes) == 2, timeout=10)
    assert handler.outcomes == [(a, "CANCELED"), (b, "CANCELED")] and handler.ran == [a]


def test_duplicates_are_skipped_and_bad_commands_are_permanent_errors(handler: GatedHandler) -> None:
    a = uuid.uuid4().hex
    handler.state.mark(a, 1)
    handler.handle(_record(_cmd(a), 0))
    assert handler.outcomes == [(a, "SKIPPED")] and handler.ran == []
    with pytest.raises(PermanentError, match=r"cmds\[0\]@1: RefreshCommand '.*': table is empty"):
        handler.handle(_record(_cmd(uuid.uuid4().hex, table=" "), 1))
    with pytest.raises(PermanentError, match=r"cmds\[0\]@2: a JobStatusChangedEvent on the refresh-commands topic"):
        handler.handle(_record(status_event(), 2))


def test_a_full_queue_is_backpressure_not_loss() -> None:
    h = GatedHandler(max_pending=2)
    h.open()
    try:
        ids = [uuid.uuid4().hex for _ in range(3)]
        h.handle(_record(_cmd(ids[0]), 0))
        wait_for(lambda: h.ran == [ids[0]], timeout=10)
        h.handle(_record(_cmd(ids[1]), 1))
        with pytest.raises(OutputError, match=r"cmds\[0\]@2: 2 refreshes already waiting"):
            h.handle(_record(_cmd(ids[2]), 2))
        assert h.durable_offsets()[(TOPIC, 0)] == 0
    finally:
        for gate in h.gates.values():
            gate.set()
        h.gates.setdefault(ids[1], threading.Event()).set()
        h.close()
