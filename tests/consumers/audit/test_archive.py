"""``consume archive`` on the real broker: lossless rows, names, durable-before-commit, restarts, quiet topics."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import threading
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from lineagewire.cli import main_group
from lineagewire.consumers.audit.archive import ArchiveHandler, records_to_table
from lineagewire.consumers.audit.layout import data_path
from lineagewire.consumers.audit.manifest import load_manifests, verify
from lineagewire.consumers.audit.storage import Storage
from lineagewire.consumers.runtime import ConsumerRuntime
from tests.consumers.openlineage.samples import app_run, refresh_run
from tests.helpers import wait_for

from .conftest import raw_records

pytestmark = pytest.mark.integration

T0 = int(dt.datetime(2025, 3, 3, 10, 59, 58, tzinfo=dt.UTC).timestamp() * 1000)


def archived_rows(root: pathlib.Path) -> list[dict[str, Any]]:
    storage = Storage(str(root))
    rows = []
    for m in load_manifests(storage):
        for e in m.entries:
            rows.extend(pq.read_table(storage.path(e["file"])).to_pylist())
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def committed(settings, group: str, topic: str, partitions: int = 3) -> list[int]:  # noqa: ANN001
    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)]
    finally:
        c.close()


def run(settings, handler, topics, group, n) -> None:  # noqa: ANN001
    stats = ConsumerRuntime(settings, handler, topics=topics, group_id=group, dedup_window=0).run(max_events=n)
    assert stats.consumed == n


def test_every_record_is_kept_losslessly_with_decoded_columns(settings, topic_factory, produce, group_id,  # noqa: ANN001
                                                             tmp_path) -> None:
    jobs, commands = settings.topics.jobs, topic_factory("cmd", partitions=1)
    events = app_run("alpha") + app_run("beta", fail=True)
    # Timestamps cross an hour; one record carries repeated and null headers; one is garbage; one repeats an event.
    produce(jobs, events, timestamps=[T0 + i * 1000 for i in range(len(events))])
    produce(jobs, [events[0]], headers=[("h", b"1"), ("h", None), ("x", b"\x00\xff")], partition=1)
    produce(jobs, [b"not avro"], partition=2)
    produce(commands, refresh_run("gamma")[:1])
    n = len(events) + 3
    run(settings, ArchiveHandler(str(tmp_path)), [jobs, commands], group_id, n)

    rows = archived_rows(tmp_path)
    raw = raw_records(settings, jobs) + raw_records(settings, commands)
    assert len(raw) == n and len(rows) == n
    fields = ("topic", "partition", "offset", "timestamp_type", "key_bytes", "value", "headers")
    for r, k in zip(rows, sorted(raw, key=lambda r: (r["topic"], r["partition"], r["offset"])), strict=True):
        assert {f: r[f] for f in fields} == {f: k[f] for f in fields}
        assert int(r["timestamp"].timestamp() * 1000) == k["timestamp"]
    garbage = [r for r in rows if r["value"] == b"not avro"]
    assert len(garbage) == 1 and garbage[0]["kind"] is None and "bad-magic" in garbage[0]["decode_error"]
    failed = [r for r in rows if r["job_name"] == "beta" and r["status"] == "FAILED"]
    assert len(failed) == 1 and failed[0]["old_status"] == "RUNNING" and failed[0]["kind"] == "JobStatusChangedEvent"
    actions = [r for r in rows if r["kind"] == "ActionLineageEvent" and r["job_name"] == "alpha"]
    assert actions and all(r["outputs"] == [{"namespace": "file", "name": "/data/alpha_out"}] for r in actions)
    assert [r["kind"] for r in rows if r["topic"] == commands] == ["RefreshCommand"]
    assert sum(1 for r in rows if r["event_id"] == events[0]["header"]["event_id"]) == 2

    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.parquet"))
    # Kafka Connect names, hive folders by the first record's UTC hour; the 10:59:58 run spills into hour 11.
    assert all(f.split("/")[-1].startswith(f"{f.split('/')[0][6:]}+") for f in files)
    hours = {f.split("/")[2] for f in files if f.startswith(f"topic={jobs}/date=2025-03-03")}
    assert hours == {"hour=10", "hour=11"}
    assert verify(Storage(str(tmp_path))).ok
    assert committed(settings, group_id, jobs) == [r["offset"] + 1 for r in
                                                   [max((x for x in raw if x["topic"] == jobs and x["partition"] == p),
                                                        key=lambda x: x["offset"]) for p in range(3)]]


class _Crashes(ArchiveHandler):
    """Stops without flushing its open file: what is buffered is lost, as in a SIGKILL after the last commit."""

    def close(self) -> None:
        self._writer.flush()  # the files closed before are written; the open one is lost

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        pass


def test_nothing_is_committed_before_its_file_is_durable_and_a_restart_neither_loses_nor_duplicates(
        settings, produce, group_id, tmp_path) -> None:  # noqa: ANN001
    topic = settings.topics.jobs
    events = app_run("a", actions=6)  # 9 events
    produce(topic, events, partition=0)
    run(settings, _Crashes(str(tmp_path), roll_records=4), [topic], group_id, len(events))
    # Two files of 4 were closed; the 9th record sat in a buffer the crash lost: the commit stops at 8.
    assert committed(settings, group_id, topic)[0] == 8
    assert [r["offset"] for r in archived_rows(tmp_path)] == list(range(8))

    run(settings, ArchiveHandler(str(tmp_path), roll_records=4), [topic], group_id, 1)
    assert [r["offset"] for r in archived_rows(tmp_path)] == list(range(9))
    assert committed(settings, group_id, topic)[0] == 9

    # A consumer whose commits lag behind the archive (a new group from the start) adds nothing twice.
    run(settings, ArchiveHandler(str(tmp_path), roll_records=4), [topic], group_id + "-again", len(events))
    assert [r["offset"] for r in archived_rows(tmp_path)] == list(range(9))
    report = verify(Storage(str(tmp_path)))
    assert report.ok and report.files == 3 and report.records == 9


def test_an_unlisted_file_left_by_a_crash_is_rewritten_under_the_same_name(settings, produce, group_id,  # noqa: ANN001
                                                                          tmp_path) -> None:
    topic = settings.topics.jobs
    events = app_run("a", actions=1)
    produce(topic, events, partition=0)

    class DiesBeforeManifest(ArchiveHandler):
        def close(self) -> None:  # the data file is written, then the process dies before its manifest line
            buf = self._buffers[(topic, 0)]
            sink = pa.BufferOutputStream()
            pq.write_table(records_to_table(buf.records[:2]), sink)
            self.storage.put(data_path(topic, 0, buf.first, buf.bucket), sink.getvalue().to_pybytes())

        def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
            pass

    handler = DiesBeforeManifest(str(tmp_path))
    run(settings, handler, [topic], group_id, len(events))
    assert committed(settings, group_id, topic)[0] <= 0  # nothing durable: no offset past 0 committed
    report = verify(Storage(str(tmp_path)))
    assert [p.kind for p in report.problems] == ["unlisted"]

    run(settings, ArchiveHandler(str(tmp_path)), [topic], group_id, len(events))
    files = list(tmp_path.rglob("*.parquet"))
    assert len(files) == 1 and pq.read_table(files[0]).num_rows == len(events)
    assert verify(Storage(str(tmp_path))).ok


def test_a_quiet_topic_still_closes_and_commits_its_file(settings, produce, group_id, tmp_path) -> None:  # noqa: ANN001
    topic = settings.topics.jobs

    class Quick(ArchiveHandler):
        tick_interval = 0.2

    runtime = ConsumerRuntime(settings, Quick(str(tmp_path), roll_seconds=1.0), topics=[topic], group_id=group_id,
                              dedup_window=0)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        produce(topic, app_run("q", actions=0), partition=0)  # 3 events, then silence
        manifest = tmp_path / "_manifests" / f"{topic}+0.jsonl"
        wait_for(lambda: manifest.exists() and sum(json.loads(x)["records"]
                                                   for x in manifest.read_text().splitlines()) == 3, timeout=60)
        wait_for(lambda: committed(settings, group_id, topic)[0] == 3, timeout=30)
        assert thread.is_alive()  # closed by tick, not by shutdown
    finally:
        runtime.stop()
        thread.join(30)


def test_an_archive_of_a_quiet_topic_verifies_and_says_it_holds_nothing(settings, group_id,  # noqa: ANN001
                                                                       tmp_path) -> None:
    root = tmp_path / "archive"
    stats = ConsumerRuntime(settings, ArchiveHandler(str(root)), topics=[settings.topics.jobs], group_id=group_id,
                            dedup_window=0).run(idle_timeout=2)
    assert stats.consumed == 0
    r = CliRunner().invoke(main_group, ["audit", "verify", str(root)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "verify ok: 0 files, 0 records" in r.stderr and "the archive holds nothing yet" in r.stderr
