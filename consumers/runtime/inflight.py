"""``InFlight``: concurrent delivery for a handler, with at-least-once commits kept.

A handler that sends each event to a backend one request at a time is bound by
the backend's latency (5 ms is 200 events/s). ``InFlight`` lets ``handle`` hand
an event's outputs over and return at once, while they are sent concurrently
on a background asyncio loop; the runtime's contract still holds:

* **Commits**: every handed record is *pending* until all its outputs are
  confirmed (the ``send`` coroutine returned). ``durable_offsets()`` answers,
  per partition, the lowest offset not yet confirmed, so the runtime never
  commits past an event the backend has not confirmed; a partition with
  nothing pending is durable to its end (a ``HeldBack`` mapping: the runtime
  then commits what it handled, dead-lettered or skipped there).
* **Order per key**: outputs go out on ``lanes`` lanes; the records of one key
  (the Kafka key: one job) always use the same lane, and a lane sends its
  outputs strictly in order, one request (``send`` call) at a time, the next
  only after the previous was confirmed. A record without a key goes on the lane
  of its partition. So one job's events never overtake each other, and
  different jobs' events are sent concurrently.
* **Batches**: a lane may put several outputs (of one or more records, in order)
  into one ``send`` call: up to ``max_batch`` outputs and ``max_batch_bytes``
  (by ``size``), waiting up to ``linger`` seconds for a batch to fill.
  ``max_batch=1`` (the default) sends each output on its own.
* **Backpressure**: ``submit`` waits while ``max_pending`` outputs are not yet
  confirmed, so memory stays bounded and the consumer cannot run ahead.
* **Failures**: a ``send`` that raises stops its lane: that batch and the ones
  behind it stay pending (other lanes go on). ``check()`` (call it from
  ``handle``, ``batch_done`` and ``tick``) sends the failed batches again, in
  order, on the caller's thread, and raises ``OutputError`` if one fails again.
  That error reaches the runtime's retry loop, which pauses the partitions,
  backs off and calls again: the runtime owns retries and backoff, as with a
  synchronous output. (As the audit archive's ``InOrderWriter``: a failed write
  is retried from the next runtime call.) ``send`` should therefore not retry on
  its own, and should have a timeout.
* **Rejections** (bad input must not stall a partition): a ``send`` that raises
  ``PermanentError`` (the backend will never take these outputs: an HTTP 4xx)
  rejects the record whose outputs they are; a batch of several records is then
  sent again record by record, so only the records the backend refuses are
  rejected. A rejected record's outputs are dropped (those queued behind too)
  and its lane goes on at once; the record is handed to the runtime by
  ``rejected()`` (the handler's ``rejected`` hook) as a ``Rejected``: the runtime
  writes its dead letter, then calls ``settle()``. Until then it holds its
  partition's commits like an unconfirmed record, so nothing is committed past
  a record that was neither confirmed nor dead-lettered.
* **Giving up** (``RetryPolicy.give_up_after``): the runtime's retries of
  ``check`` or ``submit`` run out with ``GaveUpError`` raised by a later call
  than the failed record's. The runtime then calls ``give_up(since)`` (the
  handler's ``give_up`` hook), which rejects, as above, the records of every
  failed batch failing since ``since`` (when the retries began) or before,
  lets those lanes go on, and answers True: the call in hand was not to blame
  (``submit`` raises before taking its record, so the runtime hands it again).
* **Revocation**: ``revoke(partitions)`` waits (up to ``revoke_timeout``) for the
  pending outputs of those partitions, then stops tracking their offsets; the
  new owner gets those records again from the last commit, and what is still
  queued here is still sent (a duplicate at worst, never a gap: the runtime's
  dedup window may skip those records if the partition comes back here).

How a handler uses it::

    class Webhook(Handler):
        tick_interval = 1.0                       # re-send failed outputs also on a quiet topic

        def open(self):
            self.inflight = InFlight(self.post, lanes=16, max_pending=1024, name="webhook").start()
        async def post(self, bodies):             # runs on the InFlight loop; raise when not confirmed
            ...
        def handle(self, record):
            self.inflight.submit(record, [body_of(record.event)])   # raises OutputError after a failure
            return 0                              # counted when confirmed, by batch_done/tick
        def batch_done(self):     return self.inflight.check()
        def tick(self, now):      return self.inflight.check()
        def durable_offsets(self): return self.inflight.durable_offsets()
        def rejected(self):       return self.inflight.rejected()      # dead-lettered by the runtime
        def give_up(self, since): return self.inflight.give_up(since)
        def on_revoke(self, partitions): self.inflight.revoke(partitions)
        def close(self):          self.inflight.close()

A blocking client (requests, acryl-datahub's emitter) is used through
``blocking(fn)``, which runs it on a worker thread of the loop.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from .exceptions import OutputError, PermanentError
from .record import Record

log = logging.getLogger(__name__)

__all__ = ["HeldBack", "InFlight", "Position", "Rejected", "blocking"]

T = TypeVar("T")
R = TypeVar("R")


class Position(Protocol):
    """Where a record came from: a ``Record`` has these."""

    topic: str
    partition: int
    offset: int
    key: str | None


def blocking(fn: Callable[[list[T]], Any]) -> Callable[[list[T]], Awaitable[None]]:
    """``send`` for ``InFlight`` from a blocking function of a batch: run on a worker thread of the loop (one
    thread per lane, so ``lanes`` blocking sends can be in flight)."""

    async def send(batch: list[T]) -> None:
        await asyncio.to_thread(fn, batch)

    return send


class HeldBack(dict[tuple[str, int], int]):
    """Durable offsets that hold back only the partitions listed: any other partition is durable to its end.

    The runtime commits no partition missing from a handler's answer; records the handler never held (dead
    letters, duplicates the dedup window skipped) must still be committed, so every partition is "in" it.
    """

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: tuple[str, int]) -> int:
        return 2**63 - 1


@dataclass(eq=False)
class Rejected:
    """A record whose outputs were rejected for good (see the module docstring): the runtime writes ``record``'s
    dead letter with ``error``, then calls ``settle()``, which lets its partition's commits pass it."""

    #: what was handed to ``submit`` (a ``Record``, kept without its decoded event)
    record: Any
    error: PermanentError
    settle: Callable[[], None] = field(repr=False)


@dataclass(eq=False)
class _Entry:
    """One handed record: confirmed when ``remaining`` outputs are (or settled once its dead letter is written)."""

    topic: str
    partition: int
    offset: int
    remaining: int
    record: Any  # for the dead letter, should its outputs be rejected
    rejected: bool = False

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(eq=False)
class _Part:
    """A partition's records handed and not yet confirmed, in offset order."""

    order: collections.deque[_Entry] = field(default_factory=collections.deque)

    def lowest(self) -> int | None:
        while self.order and self.order[0].remaining == 0:
            self.order.popleft()
        return self.order[0].offset if self.order else None

    def sending(self) -> bool:
        """Whether outputs of this partition are still to be confirmed (a rejected record waits for its dead
        letter, written by the runtime, not for the output)."""
        return any(e.remaining and not e.rejected for e in self.order)


@dataclass(eq=False)
class _Lane(Generic[T]):
    queue: collections.deque[tuple[_Entry, T]] = field(default_factory=collections.deque)
    failed: list[tuple[_Entry, T]] | None = None  # the batch whose send raised, sent again by check()
    error: BaseException | None = None
    failed_at: float = 0.0  # time.monotonic() of the first failure of ``failed`` (``give_up``)
    wake: asyncio.Event | None = None  # set when the queue gets outputs or the failure is cleared
    idle: bool = True


class InFlight(Generic[T]):
    """Sends records' outputs concurrently with ``send`` while keeping commits safe; see the module docstring.

    ``send(batch)``: a coroutine function that delivers a list of outputs and returns once the backend
    confirmed them (raise otherwise). ``name`` appears in error messages (e.g. "OpenLineage HTTP").
    """

    def __init__(self, send: Callable[[list[T]], Awaitable[Any]], *, lanes: int = 16, max_pending: int = 1024,
                 max_batch: int = 1, max_batch_bytes: int | None = None, size: Callable[[T], int] | None = None,
                 linger: float = 0.0, revoke_timeout: float = 10.0, name: str = "output") -> None:
        if lanes < 1 or max_pending < 1 or max_batch < 1 or linger < 0:
            raise ValueError(f"InFlight(lanes={lanes}, max_pending={max_pending}, max_batch={max_batch}, "
                             f"linger={linger}); expected lanes, max_pending, max_batch >= 1 and linger >= 0")
        if max_batch_bytes is not None and size is None:
            raise ValueError("InFlight(max_batch_bytes=...) needs size=, the size of one output in bytes")
        self._send = send
        self.lanes = lanes
        self.max_pending = max_pending
        self.max_batch = max_batch
        self.max_batch_bytes = max_batch_bytes
        self._size = size
        self.linger = linger
        self.revoke_timeout = revoke_timeout
        self.name = name
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # an output was confirmed or a lane failed
        self._parts: dict[tuple[str, int], _Part] = {}
        self._lanes: list[_Lane[T]] = [_Lane() for _ in range(lanes)]
        self._pending = 0  # outputs handed and not yet confirmed
        self._confirmed = 0  # outputs confirmed since the last check()
        self._failures = 0  # lanes with a failed batch
        self._rejected: list[Rejected] = []  # rejected records not yet taken by ``rejected()``
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._to_wake: list[_Lane[T]] = []
        self._wake_scheduled = False

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> InFlight[T]:
        """Start the loop thread and the lanes; returns self."""
        if self._loop is not None:
            return self
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            # A thread per lane for blocking sends (``blocking``): asyncio's default pool has min(32, cpus + 4).
            loop.set_default_executor(ThreadPoolExecutor(self.lanes, thread_name_prefix=f"{self.name}-send"))
            self._loop = loop
            for lane in self._lanes:
                lane.wake = asyncio.Event()
                self._tasks.append(loop.create_task(self._run_lane(lane)))
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
                loop.close()

        self._thread = threading.Thread(target=main, name=f"lineagewire-inflight-{self.name}", daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def call(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run ``coro`` on the loop and return its result (e.g. to open or close a client bound to the loop)."""
        if self._loop is None:
            raise RuntimeError("InFlight.call before start()")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self, timeout: float = 10.0, *, then: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Wait up to ``timeout`` s for every pending output (sending failed ones again once), run ``then()`` on
        the loop (e.g. close a client bound to it), then stop the loop.

        What is still not confirmed stays pending: ``durable_offsets`` keeps answering, so the runtime's final
        commit does not pass it and the next run handles those records again.
        """
        if self._loop is None:
            return
        try:
            self._wait(lambda: self._pending == 0, timeout, resend=True)
        except OutputError as exc:
            log.warning("%s: closing with %d outputs not confirmed (they stay uncommitted): %s", self.name,
                        self._pending, exc)
        if self._pending:
            log.warning("%s: closing with %d outputs not confirmed after %.0f s; they stay uncommitted", self.name,
                        self._pending, timeout)
        loop = self._loop
        if then is not None:
            try:
                asyncio.run_coroutine_threadsafe(then(), loop).result(timeout)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - closing must not hide the shutdown
                log.warning("%s: closing the output failed: %s", self.name, exc)
        self._loop = None
        for task in self._tasks:
            loop.call_soon_threadsafe(task.cancel)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)
        self._tasks.clear()

    # -- the handler's side ----------------------------------------------------------------------

    def submit(self, record: Position, outputs: Sequence[T]) -> None:
        """Hand ``record``'s outputs over (none: it is confirmed at once, in its place).

        Raises ``OutputError`` when a failed batch could not be sent again (before taking the record, so the
        runtime's retry of ``handle`` hands it once); waits while ``max_pending`` outputs are unconfirmed.
        """
        if self._loop is None:
            raise RuntimeError("InFlight.submit before start()")
        self.check(count=False)
        if outputs:
            self._wait(lambda: self._pending < self.max_pending, None, resend=True)
        if not outputs:
            return  # nothing to wait for: its partition is as durable as the records before it
        tp = (record.topic, record.partition)
        with self._lock:
            part = self._parts.get(tp)
            if part is None:
                part = self._parts[tp] = _Part()
            entry = _Entry(record.topic, record.partition, record.offset, len(outputs),
                           record.without_event() if isinstance(record, Record) else record)
            part.order.append(entry)
            lane = self._lanes[hash(record.key if record.key is not None else tp) % self.lanes]
            lane.queue.extend((entry, out) for out in outputs)
            self._pending += len(outputs)
            wake = lane.idle and lane.failed is None
            lane.idle = False
            if wake:
                self._to_wake.append(lane)
                # One wake-up of the loop for all the lanes handed work meanwhile: each is a write to the
                # loop's socket, and the loop thread must win the GIL to read it.
                schedule, self._wake_scheduled = not self._wake_scheduled, True
            else:
                schedule = False
        if schedule:
            self._loop.call_soon_threadsafe(self._wake_lanes)

    def _wake_lanes(self) -> None:
        with self._lock:
            lanes, self._to_wake = self._to_wake, []
            self._wake_scheduled = False
        for lane in lanes:
            assert lane.wake is not None  # noqa: S101 - set by start()
            lane.wake.set()

    def check(self, *, count: bool = True) -> int:
        """Send failed batches again, in order (raises ``OutputError`` if one fails again); returns how many
        outputs were confirmed since the last call (0 with ``count=False``, which leaves them counted)."""
        if self._failures:
            self._resend()
        if not count:
            return 0
        with self._lock:
            confirmed, self._confirmed = self._confirmed, 0
        return confirmed

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every output is confirmed (raises ``OutputError`` as ``check``); False on timeout."""
        return self._wait(lambda: self._pending == 0, timeout, resend=True)

    def durable_offsets(self) -> HeldBack:
        """Per partition with outputs pending, its lowest offset not yet confirmed; any other: durable to its end."""
        with self._lock:
            held = HeldBack()
            for tp, part in list(self._parts.items()):
                lowest = part.lowest()
                if lowest is None:
                    del self._parts[tp]
                else:
                    held[tp] = lowest
            return held

    def rejected(self) -> list[Rejected]:
        """The records rejected for good since the last call, oldest first: dead-letter each, then ``settle()`` it."""
        with self._lock:
            out, self._rejected = self._rejected, []
        return out

    def give_up(self, since: float) -> bool:
        """The runtime gave up on a failure raised here (``GaveUpError``, its retries began at monotonic ``since``):
        reject the records of every failed batch failing since ``since`` or before (``rejected()`` hands them
        over) and let those lanes go on. Returns whether a batch was failing at all, i.e. whether the failure was
        this ``InFlight``'s rather than the caller's own."""
        now = time.monotonic()
        with self._lock:
            if not self._failures:
                return False
            for lane in self._lanes:
                batch, error = lane.failed, lane.error
                if batch is None or lane.failed_at > since:
                    continue
                failing = now - lane.failed_at

                def gave_up(entry: _Entry, error: BaseException | None = error,
                            failing: float = failing) -> PermanentError:
                    return PermanentError(f"{entry.where}: {self.name} did not confirm its outputs in {failing:.1f}s "
                                          f"of retries ({type(error).__name__}: {error}); expected them confirmed "
                                          "within the retry policy's give_up_after, so it is dead-lettered")

                self._reject(lane, batch, gave_up)
                self._clear_failure(lane)
        return True

    @property
    def pending(self) -> int:
        """Outputs handed and not yet confirmed."""
        return self._pending

    def revoke(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Those partitions went to another member: wait up to ``revoke_timeout`` s for their pending outputs
        (not at all once closed), then stop tracking those that were all confirmed.

        A partition with outputs still unconfirmed stays held back in ``durable_offsets``, so the runtime's
        revoke commit stops below its first unconfirmed record and the new owner handles it again; what is
        queued here is still sent (a duplicate at worst, and outputs are idempotent). It is forgotten once
        everything it had is confirmed. A rejected record is not waited for (its output is done with it); it stays
        held until the runtime wrote its dead letter (the new owner may write one too: a duplicate at worst).
        """
        gone = set(partitions) & set(self._parts)
        if not gone:
            return

        def settled() -> bool:
            return not any(self._parts[tp].sending() for tp in gone)

        if self._loop is not None:
            try:
                self._wait(settled, self.revoke_timeout, resend=True)
            except OutputError as exc:
                log.warning("%s: revoking %s with outputs not confirmed (still sent from here): %s", self.name,
                            sorted(gone), exc)
        with self._lock:
            for tp in gone:
                part = self._parts.get(tp)
                if part is not None and part.lowest() is None:
                    del self._parts[tp]
                elif part is not None:
                    log.warning("%s: %s[%d] revoked with records neither confirmed nor dead-lettered from offset %d: "
                                "not committed past it, so its new owner handles them again", self.name, tp[0], tp[1],
                                part.lowest())

    # -- waiting and re-sending (caller's thread) ------------------------------------------------

    def _wait(self, done: Callable[[], bool], timeout: float | None, *, resend: bool) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                while not done() and not self._failures:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._changed.wait(left)
                if done():
                    return True
            if not resend:
                return False
            self._resend()  # raises when the output is still down

    def _resend(self) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError("InFlight used before start() or after close()")
        error = asyncio.run_coroutine_threadsafe(self._resend_failed(), loop).result()
        if error is not None:
            raise error

    # -- the loop's side -------------------------------------------------------------------------

    async def _resend_failed(self) -> OutputError | None:
        failed = [lane for lane in self._lanes if lane.failed is not None]
        results = await asyncio.gather(*(self._resend_lane(lane) for lane in failed))
        errors = [(lane, exc) for lane, exc in zip(failed, results, strict=True) if exc is not None]
        if not errors:
            return None
        lane, exc = errors[0]
        batch = lane.failed or []
        oldest = batch[0][0].where if batch else "?"
        error = OutputError(f"{self.name}: {len(batch)} outputs (first of {oldest}) not confirmed, "
                            f"{self._pending} pending in all: {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        return error

    async def _resend_lane(self, lane: _Lane[T]) -> BaseException | None:
        batch = lane.failed
        if not batch:
            return None
        exc = await self._deliver(lane, batch)
        if exc is not None:
            return exc
        with self._lock:
            if lane.failed is batch:
                self._clear_failure(lane)
        return None

    async def _deliver(self, lane: _Lane[T], batch: list[tuple[_Entry, T]]) -> BaseException | None:
        """Send ``batch`` and settle it: confirmed; or rejected, record by record, where ``send`` raised
        ``PermanentError``; or failed: the lane stops at what is left of it, and the failure is returned."""
        try:
            await self._send([out for _, out in batch])
        except PermanentError as exc:
            groups = _by_record(batch)
            if len(groups) == 1:
                with self._lock:
                    self._reject(lane, batch, lambda _, exc=exc: exc)  # type: ignore[misc]
                return None
            return await self._deliver_one_by_one(lane, groups)
        except Exception as exc:  # noqa: BLE001 - any failure of the output: reported to the runtime, retried
            with self._lock:
                self._fail(lane, batch, exc)
            return exc
        with self._lock:
            self._confirm(batch)
        return None

    async def _deliver_one_by_one(self, lane: _Lane[T], groups: list[list[tuple[_Entry, T]]]) -> BaseException | None:
        """A refused batch of several records: which of them does the backend refuse? Each record's outputs are
        sent alone, in order, and settled; a failure stops the lane at that record and is returned."""
        for i, group in enumerate(groups):
            try:
                await self._send([out for _, out in group])
            except PermanentError as one:
                with self._lock:
                    self._reject(lane, group, lambda _, one=one: one)  # type: ignore[misc]
            except Exception as other:  # noqa: BLE001 - the output is down: the lane waits at this record
                with self._lock:
                    self._fail(lane, [x for g in groups[i:] for x in g], other)
                return other
            else:
                with self._lock:
                    self._confirm(group)
        return None

    def _fail(self, lane: _Lane[T], batch: list[tuple[_Entry, T]], exc: BaseException) -> None:
        """(Lock held.) ``batch`` was not confirmed: the lane stops until ``check`` sends it again."""
        if lane.failed is None:
            self._failures += 1
            lane.failed_at = time.monotonic()
        lane.failed, lane.error = batch, exc
        self._changed.notify_all()

    def _reject(self, lane: _Lane[T], batch: list[tuple[_Entry, T]],
                error: Callable[[_Entry], PermanentError]) -> None:
        """(Lock held.) The records of ``batch`` were rejected for good: drop their outputs (those of the batch and
        the rest of a record the batch cut, first in the queue) and hand them to the runtime (``rejected()``);
        they hold their partitions' commits until ``settle()``."""
        entries = list(dict.fromkeys(entry for entry, _ in batch))
        dropped = len(batch)
        while lane.queue and lane.queue[0][0] is entries[-1]:
            lane.queue.popleft()
            dropped += 1
        self._pending -= dropped
        for entry in entries:
            entry.rejected = True
            self._rejected.append(Rejected(entry.record, error(entry), functools.partial(self._settle, entry)))
            log.debug("%s: %s rejected for good: %s", self.name, entry.where, self._rejected[-1].error)
        self._changed.notify_all()

    def _settle(self, entry: _Entry) -> None:
        """A rejected record was dead-lettered: its partition may commit past it."""
        with self._lock:
            entry.remaining = 0
            self._changed.notify_all()

    def _clear_failure(self, lane: _Lane[T]) -> None:
        """(Lock held.) The lane's failed batch is done: let the lane go on."""
        lane.failed = None
        lane.error = None
        self._failures -= 1
        assert lane.wake is not None  # noqa: S101 - set by start()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(lane.wake.set)

    def _confirm(self, batch: list[tuple[_Entry, T]]) -> None:
        """(Lock held.) The outputs of ``batch`` were confirmed."""
        for entry, _ in batch:
            entry.remaining -= 1
            self._pending -= 1
            self._confirmed += 1
        self._changed.notify_all()

    def _take(self, lane: _Lane[T]) -> list[tuple[_Entry, T]]:
        """(Lock held.) The next batch of the lane's queue."""
        batch: list[tuple[_Entry, T]] = []
        size = 0
        queue = lane.queue
        while queue and len(batch) < self.max_batch:
            if self.max_batch_bytes is not None and self._size is not None:
                n = self._size(queue[0][1])
                if batch and size + n > self.max_batch_bytes:
                    break
                size += n
            batch.append(queue.popleft())
        return batch

    async def _run_lane(self, lane: _Lane[T]) -> None:
        assert lane.wake is not None  # noqa: S101 - set by start()
        while True:
            with self._lock:
                ready = bool(lane.queue) and lane.failed is None
                if not ready:
                    lane.idle = True
                    lane.wake.clear()
            if not ready:
                await lane.wake.wait()
                continue
            if self.linger and self.max_batch > 1 and len(lane.queue) < self.max_batch:
                await asyncio.sleep(self.linger)  # let the batch fill
            with self._lock:
                if lane.failed is not None:
                    continue
                batch = self._take(lane)
            if not batch:
                continue
            exc = await self._deliver(lane, batch)  # a failure: the runtime hears of it through check()
            if exc is not None:
                log.debug("%s: send of %d outputs failed: %s", self.name, len(batch), exc)


def _by_record(batch: list[tuple[_Entry, T]]) -> list[list[tuple[_Entry, T]]]:
    """``batch`` cut into the runs of one record's outputs (a record's outputs are consecutive on its lane)."""
    groups: list[list[tuple[_Entry, T]]] = []
    for item in batch:
        if groups and groups[-1][-1][0] is item[0]:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups
