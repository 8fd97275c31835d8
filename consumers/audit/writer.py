"""``InOrderWriter``: the archive's closed files, written in order on one background thread.

Writing a closed file is Parquet encoding, compression, SHA-256 and an fsync
(or a PUT): about a fifth of the archive's time per record, all of it in C
with the GIL released. On its own thread it overlaps with the next file's
decoding and buffering on another core, instead of stopping the consumer.

What the archive's guarantees need of it:

* **Order**: one thread takes the jobs first in, first out, so a partition's
  manifest lines are appended in offset order, as the hash chain requires.
* **Nothing after a failure**: once a job fails, the jobs behind it are not
  run (their manifest lines would follow a missing one). ``check`` then runs
  the failed job and those behind it again, on the caller's thread, in order,
  and raises the error if it fails again. The archive calls ``check`` from every
  runtime call, so the error reaches the runtime's retry loop, which backs off
  and calls again: the same retry as a synchronous write, one call later.
* **Durable offsets**: ``pending`` is every job not yet written; the archive
  never lets a commit pass the first offset of one of them.
* **Bounded memory**: ``submit`` waits while ``depth`` jobs, or jobs of ``max_size`` in all, are queued.
* ``flush`` waits for every job (revocation, shutdown), raising as ``check``.

Why not ``concurrent.futures`` alone: a ``ThreadPoolExecutor`` runs the jobs
queued behind a failed one; the ``_failed`` flag below is what stops them.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

__all__ = ["InOrderWriter"]

J = TypeVar("J")


class _Skipped(Exception):
    """A job queued behind a failed one, not run."""


class InOrderWriter(Generic[J]):
    """Runs ``write(job)`` for each submitted job, in order, on one background thread."""

    def __init__(self, write: Callable[[J], None], *, depth: int = 8, max_size: int = 1 << 30,
                 name: str = "archive-writer") -> None:
        self._write = write
        self.depth = depth
        self.max_size = max_size
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._pending: collections.deque[tuple[J, Future[None], int]] = collections.deque()
        self._size = 0  # of the jobs in ``_pending``
        self._failed = threading.Event()

    @property
    def pending(self) -> list[J]:
        """The jobs submitted and not yet written, oldest first."""
        return [job for job, _, _ in self._pending]

    def submit(self, job: J, size: int = 0) -> None:
        """Queue ``job`` (of ``size`` bytes, for the bound) behind the others."""
        self.check()
        while self._pending and (len(self._pending) >= self.depth or self._size + size > self.max_size):
            self._reap(block=True)
        self._pending.append((job, self._pool.submit(self._run, job), size))
        self._size += size

    def check(self) -> None:
        """Forget the jobs written; after a failure, write the rest here, in order, or raise why not."""
        self._reap(block=False)

    def flush(self) -> None:
        while self._pending:
            self._reap(block=True)

    def close(self) -> None:
        """``flush``, then stop the thread (also when the flush raised: the unwritten jobs are dropped, as a
        synchronous write's buffers are at shutdown, and their offsets were never committed)."""
        try:
            self.flush()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, job: J) -> None:
        if self._failed.is_set():
            raise _Skipped
        try:
            self._write(job)
        except BaseException:
            self._failed.set()
            raise

    def _reap(self, *, block: bool) -> None:
        pending = self._pending
        while pending:
            future = pending[0][1]
            if not future.done():
                if not block:
                    return
                wait([future])
            if future.exception() is None:
                self._size -= pending.popleft()[2]
                block = False  # one finished job is room enough
                continue
            # It failed: let the thread finish (skip) everything behind it, then write them all here, in order.
            wait([f for _, f, _ in pending])
            self._failed.clear()
            while pending:
                self._write(pending[0][0])  # raises to the caller's retry if the output is still down
                self._size -= pending.popleft()[2]
            return
