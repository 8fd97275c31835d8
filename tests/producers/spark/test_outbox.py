"""The outbox: bounded, atomic, one owner per folder, and it outlives the process that wrote it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from lineagewire.kafka.local import free_port
from lineagewire.kafka.outbox import Outbox
from lineagewire.kafka.reader import TopicReader
from lineagewire.producers.spark.listeners.kafka import KafkaListener
from lineagewire.schemas import Codec

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_put_read_remove_in_order(tmp_path) -> None:  # noqa: ANN001
    box = Outbox(tmp_path)
    a = box.put("t", b"k1", b"v1")
    b = box.put("t2", b"", b"v2" * 10)
    assert a and b
    assert box.pending() == [a, b]
    assert box.read(a) == ("t", b"k1", b"v1") and box.read(b) == ("t2", b"", b"v2" * 10)
    box.remove(a)
    assert box.pending() == [b] and box.bytes == b.size
    box.close()
    again = Outbox(tmp_path)  # a later process finds what is left
    assert [e.name for e in again.pending()] == [b.name]
    again.close()


def test_bounded(tmp_path) -> None:  # noqa: ANN001
    box = Outbox(tmp_path, max_bytes=200)
    assert box.put("t", b"k", b"x" * 100)
    assert box.put("t", b"k", b"x" * 100) is None  # would pass 200 bytes
    assert box.rejected == 1 and len(box) == 1
    box.close()


def test_second_process_spools_aside_and_is_adopted_later(tmp_path) -> None:  # noqa: ANN001
    first = Outbox(tmp_path)
    # flock is per open file: a second Outbox in this process behaves like another process
    second = Outbox(tmp_path)
    assert second.folder != first.folder and second.folder.parent == tmp_path
    entry = second.put("t", b"k", b"v")
    second.close()
    first.close()
    owner = Outbox(tmp_path)
    assert [e.name for e in owner.pending()] == [entry.name]
    assert owner.read(owner.pending()[0]) == ("t", b"k", b"v")
    owner.close()


_DYING_WRITER = """
import os, signal, sys
from lineagewire.config import Settings
from lineagewire.producers.spark.listeners.kafka import KafkaListener
from lineagewire.kafka.outbox import Outbox
from tests.helpers import status_event
folder, servers, topic, count = sys.argv[1:5]
listener = KafkaListener(Settings(bootstrap_servers=servers), Outbox(folder), topic=topic, delivery_timeout=60)
for i in range(int(count)):
    listener.on_event(status_event(job="dying", run_id="run-1", seq=i))
print(len(listener.outbox), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no flush, no atexit: the process just dies
"""


@pytest.mark.integration
def test_events_of_a_killed_process_are_delivered_by_the_next_start(settings, tmp_path) -> None:  # noqa: ANN001
    folder = tmp_path / "outbox"
    nobody = f"127.0.0.1:{free_port()}"  # no broker listens there
    proc = subprocess.run([sys.executable, "-c", _DYING_WRITER, str(folder), nobody, settings.topics.jobs, "25"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -9, proc.stderr
    assert proc.stdout.strip() == "25"

    listener = KafkaListener(settings, Outbox(folder), delivery_timeout=10)  # the next start
    listener.close(30)

    codec = Codec()
    with TopicReader(settings, settings.topics.jobs, start="beginning", end="end") as reader:
        events = [codec.decode(m.value()) for m in reader]  # everything on the topic: no more, no fewer
    assert sorted(e["header"]["sequence"] for e in events) == list(range(25))
    assert len({e["header"]["event_id"] for e in events}) == 25
    assert not list(folder.glob("*.evt"))


@pytest.mark.integration
def test_a_file_that_is_not_a_record_is_set_aside_and_the_rest_delivered(settings, tmp_path) -> None:  # noqa: ANN001
    from tests.helpers import status_event, wait_for

    folder = tmp_path / "outbox"
    box = Outbox(folder)
    good = box.put(settings.topics.jobs, b"job", Codec().encode(status_event(job="job", run_id="r", seq=0)))
    box.close()
    (folder / "00000000000000000000-1-00000000.evt").write_bytes(b"not an outbox record")
    (folder / "00000000000000000001-1-00000000.evt").write_bytes(b"LWO1\x00\x09")  # cut inside its header
    listener = KafkaListener(settings, Outbox(folder), delivery_timeout=10)
    try:
        wait_for(lambda: listener.pending() == 0, timeout=60)
    finally:
        listener.close(5)
    assert sorted(p.name for p in (folder / "bad").iterdir()) == ["00000000000000000000-1-00000000.evt",
                                                                   "00000000000000000001-1-00000000.evt"]
    with TopicReader(settings, settings.topics.jobs, start="beginning", end="end") as reader:
        assert [m.key() for m in reader] == [b"job"]
    assert good is not None and not (folder / good.name).exists()


def test_with_the_broker_down_close_does_not_wait_out_its_timeout_and_keeps_every_event(tmp_path) -> None:  # noqa: ANN001
    """A job's exit while Kafka is down: the events wait in the outbox at once, instead of the process waiting
    out the flush timeout for messages librdkafka cannot deliver."""
    import time

    from lineagewire.config import Settings
    from tests.helpers import status_event, wait_for

    folder = tmp_path / "outbox"
    nobody = Settings(bootstrap_servers=f"127.0.0.1:{free_port()}")  # no broker listens there
    listener = KafkaListener(nobody, Outbox(folder), topic="t.down", delivery_timeout=1)
    codec = Codec()
    listener.on_event(codec.decode(codec.encode(status_event(job="job", run_id="r", seq=0))))
    wait_for(lambda: listener.failed_deliveries >= 1, timeout=30)  # the outage is known
    for seq in (1, 2):
        listener.on_event(codec.decode(codec.encode(status_event(job="job", run_id="r", seq=seq))))

    started = time.monotonic()
    listener.close(60)
    assert time.monotonic() - started < 20, "close waited for a broker known to be down"
    kept = Outbox(folder)
    try:
        assert sorted(codec.decode(kept.read(e)[2])["header"]["sequence"] for e in kept.pending()) == [0, 1, 2]
    finally:
        kept.close()
