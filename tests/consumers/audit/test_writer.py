"""``InOrderWriter``: in order, nothing after a failure, the failed jobs written again by ``check``/``flush``."""

from __future__ import annotations

import threading

import pytest

from lineagewire.consumers.audit.writer import InOrderWriter


class Output:
    """Appends each job; fails job ``down_at`` its first ``times`` tries (an output that is down, then back)."""

    def __init__(self, down_at: int = -1, times: int = 0) -> None:
        self.written: list[int] = []
        self.down_at, self.times = down_at, times
        self.threads: set[str] = set()

    def __call__(self, job: int) -> None:
        self.threads.add(threading.current_thread().name)
        if job == self.down_at and self.times:
            self.times -= 1
            raise OSError(f"output down at job {job}")
        self.written.append(job)


def test_jobs_are_written_in_order_on_the_writer_thread() -> None:
    out = Output()
    writer = InOrderWriter(out, depth=3)
    for job in range(200):
        writer.submit(job)
    writer.close()
    assert out.written == list(range(200)) and writer.pending == []
    assert out.threads and all(name.startswith("archive-writer") for name in out.threads)


def test_after_a_failure_nothing_behind_it_is_written_until_check_writes_them_again_in_order() -> None:
    out = Output(down_at=3, times=2)
    writer = InOrderWriter(out, depth=100)
    for job in range(6):
        writer.submit(job)
    with pytest.raises(OSError, match="job 3"):
        writer.flush()  # 0, 1, 2 written; 3 failed; 4 and 5 skipped; the first retry (here) meets 3's error
    assert out.written == [0, 1, 2] and writer.pending == [3, 4, 5]
    writer.check()  # the output is back: 3, 4, 5 on this thread, in order
    assert out.written == list(range(6)) and writer.pending == []
    writer.submit(6)  # and the thread takes jobs again
    writer.close()
    assert out.written == list(range(7))


def test_while_the_output_stays_down_every_call_raises_and_no_job_is_lost_or_written_twice() -> None:
    out = Output(down_at=1, times=1 + 6)
    writer = InOrderWriter(out, depth=2)
    writer.submit(0)
    writer.submit(1)
    for _ in range(3):
        with pytest.raises(OSError):
            writer.flush()
        with pytest.raises(OSError):
            writer.submit(2)  # refused: it would be written behind the missing job
    assert out.written == [0] and writer.pending == [1] and out.times == 0
    writer.submit(2)
    writer.close()
    assert out.written == [0, 1, 2]


def test_submit_waits_while_the_queued_jobs_would_pass_the_size_bound() -> None:
    gates = {job: threading.Event() for job in "ABC"}
    written: list[str] = []

    def write(job: str) -> None:
        gates[job].wait(30)
        written.append(job)

    writer = InOrderWriter(write, depth=8, max_size=10)
    writer.submit("A", 4)
    writer.submit("B", 4)
    assert writer.pending == ["A", "B"]
    gates["A"].set()
    writer.submit("C", 4)  # 4 + 4 + 4 > 10: returns only once A is written
    assert writer.pending == ["B", "C"] and written == ["A"]
    gates["B"].set()
    gates["C"].set()
    writer.close()
    assert written == ["A", "B", "C"] and writer.pending == []
