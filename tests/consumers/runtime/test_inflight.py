"""``InFlight`` without a broker: durable offsets, per-key order, backpressure, failures, revocation."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import pytest

from lineagewire.consumers.runtime import InFlight, OutputError, PermanentError
from lineagewire.consumers.runtime.inflight import blocking
from tests.helpers import wait_for


@dataclass
class Rec:
    topic: str
    partition: int
    offset: int
    key: str | None


class Backend:
    """A fake output: records what it confirmed; ``gate`` holds sends back; ``down`` makes them fail."""

    def __init__(self) -> None:
        self.got: list[str] = []
        self.batches: list[list[str]] = []
        self.down = False
        self.gate = threading.Event()
        self.gate.set()
        self.calls = 0

    async def send(self, batch: list[str]) -> None:
        self.calls += 1
        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        await asyncio.sleep(0)
        if self.down:
            raise ConnectionRefusedError("backend down")
        self.batches.append(list(batch))
        self.got.extend(batch)


@pytest.fixture
def backend() -> Backend:
    return Backend()


def make(backend: Backend, **kw) -> InFlight[str]:  # noqa: ANN003
    return InFlight(backend.send, name="test", **kw).start()


def test_durable_offsets_stop_at_the_lowest_unconfirmed(backend: Backend) -> None:
    held = threading.Event()

    async def send(batch: list[str]) -> None:
        if batch == ["slow"]:
            while not held.is_set():
                await asyncio.sleep(0.005)
        backend.got.extend(batch)

    f: InFlight[str] = InFlight(send, lanes=4).start()
    other = next(k for k in map(str, range(100)) if hash(k) % 4 != hash("a") % 4)  # a key on another lane
    try:
        f.submit(Rec("t", 0, 10, "a"), ["slow"])
        f.submit(Rec("t", 0, 11, other), ["fast"])
        f.submit(Rec("t", 0, 12, "c"), [])  # nothing to send: confirmed in its place
        f.submit(Rec("t", 1, 5, other), ["p1"])
        wait_for(lambda: "fast" in backend.got and "p1" in backend.got, timeout=10, every=0.01)
        durable = f.durable_offsets()
        assert durable == {("t", 0): 10}  # 11 and 12 are done, 10 is not; t[1] has nothing pending
        assert ("t", 1) in durable and durable[("t", 1)] == 2**63 - 1  # durable to its end
        held.set()
        assert f.flush(10)
        assert f.durable_offsets() == {}
        assert f.check() == 3
        assert f.check() == 0
    finally:
        f.close()


def test_one_keys_outputs_keep_their_order_across_lanes(backend: Backend) -> None:
    import random

    async def send(batch: list[str]) -> None:
        await asyncio.sleep(random.random() / 1000)  # noqa: S311 - jitter, not crypto
        backend.got.extend(batch)

    f: InFlight[str] = InFlight(send, lanes=8, max_pending=64).start()
    try:
        for i in range(400):
            key = f"job{i % 10}"
            f.submit(Rec("t", i % 3, i, key), [f"{key}:{i}:a", f"{key}:{i}:b"])
        assert f.flush(30)
    finally:
        f.close()
    assert len(backend.got) == 800
    for k in range(10):
        mine = [x for x in backend.got if x.startswith(f"job{k}:")]
        assert mine == sorted(mine, key=lambda x: (int(x.split(":")[1]), x[-1]))
        assert len(mine) == 80
    # and jobs did overtake each other: the sends were concurrent, not one queue
    assert backend.got != sorted(backend.got, key=lambda x: int(x.split(":")[1]))


def test_submit_waits_while_max_pending_are_unconfirmed(backend: Backend) -> None:
    backend.gate.clear()
    f = make(backend, lanes=4, max_pending=3)
    done = threading.Event()
    try:
        for i in range(3):
            f.submit(Rec("t", 0, i, str(i)), [str(i)])

        def fourth() -> None:
            f.submit(Rec("t", 0, 3, "3"), ["3"])
            done.set()

        threading.Thread(target=fourth, daemon=True).start()
        assert not done.wait(0.3)  # blocked: three outputs in flight
        assert f.pending == 3
        backend.gate.set()
        assert done.wait(10)
        assert f.flush(10)
    finally:
        f.close()
    assert sorted(backend.got) == ["0", "1", "2", "3"]


def test_a_failed_send_is_raised_by_check_and_sent_again_in_order(backend: Backend) -> None:
    f = make(backend, lanes=1)
    try:
        f.submit(Rec("t", 0, 0, "k"), ["e0"])
        assert f.flush(10)
        backend.down = True
        backend.gate.clear()  # both handed before the first fails
        f.submit(Rec("t", 0, 1, "k"), ["e1"])
        f.submit(Rec("t", 0, 2, "k"), ["e2"])
        backend.gate.set()
        wait_for(lambda: f._failures, timeout=10, every=0.01)  # noqa: SLF001 - our own state
        assert f.durable_offsets() == {("t", 0): 1}
        with pytest.raises(OutputError, match=r"test: 1 outputs \(first of t\[0\]@1\) not confirmed.*backend down"):
            f.check()
        # handle() during the outage raises before taking its record, so the runtime's retry hands it once
        with pytest.raises(OutputError):
            f.submit(Rec("t", 0, 3, "k"), ["e3"])
        assert f.durable_offsets() == {("t", 0): 1}
        backend.down = False
        assert f.check() >= 1  # e1 sent again here, then the lane goes on
        f.submit(Rec("t", 0, 3, "k"), ["e3"])
        assert f.flush(10)
        assert f.durable_offsets() == {}
    finally:
        f.close()
    assert backend.got == ["e0", "e1", "e2", "e3"]


def test_batches_are_bounded_by_count_and_bytes(backend: Backend) -> None:
    backend.gate.clear()
    f = make(backend, lanes=1, max_batch=3, max_batch_bytes=10, size=len, linger=0.05)
    try:
        for i, out in enumerate(["aaaa", "bbbb", "c", "d", "e", "ffffffffff", "g"]):
            f.submit(Rec("t", 0, i, "k"), [out])
        backend.gate.set()
        assert f.flush(10)
    finally:
        f.close()
    assert backend.got == ["aaaa", "bbbb", "c", "d", "e", "ffffffffff", "g"]
    assert all(len(b) <= 3 and (len(b) == 1 or sum(map(len, b)) <= 10) for b in backend.batches)
    assert max(len(b) for b in backend.batches) > 1


def test_revoke_keeps_unconfirmed_partitions_held_back_until_they_are_confirmed(backend: Backend) -> None:
    backend.down = True
    backend.gate.clear()
    f = make(backend, lanes=2, revoke_timeout=0.2)
    other = next(k for k in map(str, range(100)) if hash(k) % 2 != hash("a") % 2)
    try:
        f.submit(Rec("t", 0, 7, "a"), ["unconfirmed"])
        f.submit(Rec("t", 1, 3, other), ["kept"])
        backend.gate.set()
        wait_for(lambda: f._failures == 2, timeout=10, every=0.01)  # noqa: SLF001
        f.revoke([("t", 0)])
        # Not confirmed: still held back, so the revoke commit cannot pass it and the new owner handles it again.
        assert f.durable_offsets() == {("t", 0): 7, ("t", 1): 3}
        assert f.pending == 2  # and it is still sent from here (a duplicate for the new owner at worst)
        backend.down = False
        assert f.check() == 2
        assert f.flush(10)
        assert f.durable_offsets() == {}
        f.revoke([("t", 0)])  # everything confirmed: forgotten
        assert ("t", 0) not in f._parts  # noqa: SLF001
    finally:
        f.close()
    assert sorted(backend.got) == ["kept", "unconfirmed"]


def test_revoke_after_close_keeps_what_was_not_confirmed_and_does_not_wait(backend: Backend) -> None:
    """Shutdown: the runtime closes the handler, then the consumer's close revokes every partition."""
    backend.down = True
    f = make(backend, lanes=1, revoke_timeout=30)
    f.submit(Rec("t", 0, 5, "k"), ["x"])
    f.close(timeout=0.5)
    started = time.monotonic()
    f.revoke([("t", 0)])
    assert time.monotonic() - started < 5
    assert f.durable_offsets() == {("t", 0): 5}


def test_close_leaves_unconfirmed_offsets_uncommitted(backend: Backend) -> None:
    backend.down = True
    f = make(backend, lanes=1)
    f.submit(Rec("t", 0, 0, "k"), ["x"])
    f.close(timeout=1)
    assert f.durable_offsets() == {("t", 0): 0}
    with pytest.raises(RuntimeError, match="before start"):
        f.submit(Rec("t", 0, 1, "k"), ["y"])


def test_blocking_runs_a_blocking_client_on_a_worker_thread() -> None:
    got: list[str] = []
    threads: set[str] = set()

    def post(batch: list[str]) -> None:
        threads.add(threading.current_thread().name)
        got.extend(batch)

    f: InFlight[str] = InFlight(blocking(post), lanes=2).start()
    try:
        f.submit(Rec("t", 0, 0, None), ["a"])  # no key: the lane of its partition
        f.submit(Rec("t", 0, 1, None), ["b"])
        assert f.flush(10)
    finally:
        f.close()
    assert got == ["a", "b"]
    assert not any(name.startswith("lineagewire-inflight") for name in threads)


def test_blocking_sends_run_one_per_lane_at_once() -> None:
    lanes = 12  # more than asyncio's default pool on a 2-core machine (6)
    inside, most = [0], [0]
    lock = threading.Lock()
    release = threading.Event()

    def post(batch: list[str]) -> None:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        release.wait(10)
        with lock:
            inside[0] -= 1

    f: InFlight[str] = InFlight(blocking(post), lanes=lanes).start()
    keys = {}
    for k in map(str, range(1000)):  # one key per lane
        keys.setdefault(hash(k) % lanes, k)
    try:
        for i, key in enumerate(keys.values()):
            f.submit(Rec("t", 0, i, key), [key])
        wait_for(lambda: most[0] == lanes, timeout=10, every=0.01)
        release.set()
        assert f.flush(10)
    finally:
        release.set()
        f.close()


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="lanes=0"):
        InFlight(Backend().send, lanes=0)
    with pytest.raises(ValueError, match="needs size="):
        InFlight(Backend().send, max_batch_bytes=10)


# -- rejections: bad records go to the runtime (dead letters), never stall a lane --------------------------------


class Picky(Backend):
    """Refuses for good (``PermanentError``) any batch holding an output in ``bad``; ``down`` as ``Backend``."""

    def __init__(self, bad: set[str]) -> None:
        super().__init__()
        self.bad = bad
        self.refused: list[list[str]] = []

    async def send(self, batch: list[str]) -> None:
        if self.bad & set(batch) and not self.down:
            self.refused.append(list(batch))
            raise PermanentError(f"refused {sorted(self.bad & set(batch))}")
        await super().send(batch)


def test_a_refused_record_is_handed_over_its_lane_goes_on_and_it_holds_commits_until_settled() -> None:
    backend = Picky({"bad"})
    f = make(backend, lanes=1)
    try:
        f.submit(Rec("t", 0, 0, "k"), ["a"])
        f.submit(Rec("t", 0, 1, "k"), ["bad", "bad-2"])  # its second output is dropped with it
        f.submit(Rec("t", 0, 2, "k"), ["c"])
        assert f.flush(10)  # nothing stalls: the lane went on behind the refused record
        assert backend.got == ["a", "c"]
        assert f.check() == 2  # no OutputError: a refusal is no outage
        assert f.durable_offsets() == {("t", 0): 1}  # held until its dead letter is written
        [rejected] = f.rejected()
        assert (rejected.record.offset, str(rejected.error)) == (1, "refused ['bad']")
        assert f.rejected() == []  # handed over once
        assert f.durable_offsets() == {("t", 0): 1}
        rejected.settle()
        assert f.durable_offsets() == {}
        assert f.pending == 0
    finally:
        f.close()


def test_a_refused_batch_of_several_records_is_sent_again_record_by_record() -> None:
    backend = Picky({"r2"})
    backend.gate.clear()
    f = make(backend, lanes=1, max_batch=10, linger=0.05)
    try:
        for i in range(5):
            f.submit(Rec("t", 0, i, "k"), [f"r{i}"])
        backend.gate.set()
        assert f.flush(10)
        assert [r.record.offset for r in f.rejected()] == [2]  # only the record the backend refuses
    finally:
        f.close()
    assert backend.got == ["r0", "r1", "r3", "r4"]  # the others delivered, in order
    assert backend.refused[0] == ["r0", "r1", "r2", "r3", "r4"] and backend.refused[1:] == [["r2"]]


def test_the_rest_of_a_refused_record_cut_by_the_batch_is_dropped() -> None:
    backend = Picky({"x1"})
    backend.gate.clear()
    f = make(backend, lanes=1, max_batch=2, linger=0.05)
    try:
        f.submit(Rec("t", 0, 0, "k"), ["x0", "x1", "x2"])  # batches [x0, x1] and [x2]
        f.submit(Rec("t", 0, 1, "k"), ["y"])
        backend.gate.set()
        assert f.flush(10)
        assert [r.record.offset for r in f.rejected()] == [0]
    finally:
        f.close()
    assert backend.got == ["y"]


def test_give_up_rejects_the_records_of_batches_failing_since_then_and_the_lane_goes_on(backend: Backend) -> None:
    f = make(backend, lanes=2)
    other = next(k for k in map(str, range(100)) if hash(k) % 2 != hash("a") % 2)
    try:
        assert f.give_up(time.monotonic()) is False  # nothing failing: the failure was the caller's own
        backend.down = True
        backend.gate.clear()
        f.submit(Rec("t", 0, 0, "a"), ["m"])  # the record whose outputs fail
        f.submit(Rec("t", 0, 1, "a"), ["n"])  # behind it on its lane
        backend.gate.set()
        wait_for(lambda: f._failures == 1, timeout=10, every=0.01)  # noqa: SLF001 - our own state
        since = time.monotonic()
        with pytest.raises(OutputError):
            f.submit(Rec("t", 0, 2, other), ["o"])  # a later record's call raises m's failure
        backend.down = False
        assert f.give_up(since) is True
        [rejected] = f.rejected()  # m, not the record in hand, and not n behind it
        assert rejected.record.offset == 0
        assert "did not confirm its outputs" in str(rejected.error) and "backend down" in str(rejected.error)
        assert isinstance(rejected.error, PermanentError)
        f.submit(Rec("t", 0, 2, other), ["o"])  # handed again by the runtime
        assert f.flush(10)
        assert f.durable_offsets() == {("t", 0): 0}
        rejected.settle()
        assert f.durable_offsets() == {}
    finally:
        f.close()
    assert sorted(backend.got) == ["n", "o"]


def test_give_up_leaves_a_batch_that_failed_after_the_retries_began(backend: Backend) -> None:
    f = make(backend, lanes=1)
    try:
        since = time.monotonic()
        backend.down = True
        f.submit(Rec("t", 0, 0, "a"), ["m"])
        wait_for(lambda: f._failures == 1, timeout=10, every=0.01)  # noqa: SLF001
        assert f.give_up(since) is True  # the failure is ours...
        assert f.rejected() == []  # ...but it has not failed for the whole retry window: retried again
        backend.down = False
        assert f.check() == 1
    finally:
        f.close()


def test_revoke_does_not_wait_for_a_rejected_record_and_keeps_it_held() -> None:
    backend = Picky({"bad"})
    f = make(backend, lanes=1, revoke_timeout=30)
    try:
        f.submit(Rec("t", 0, 4, "k"), ["bad"])
        assert f.flush(10)
        started = time.monotonic()
        f.revoke([("t", 0)])
        assert time.monotonic() - started < 5
        assert f.durable_offsets() == {("t", 0): 4}  # the revoke commit stops below it
        [rejected] = f.rejected()
        rejected.settle()
        assert f.durable_offsets() == {}
    finally:
        f.close()
