"""``read_archive``'s range semantics, without a broker: the rows it yields for time and offset ranges are the
ones the topic would give (``TopicReader``: a time start is the first offset at or after it, then everything;
an end is the first row past it), checked against a row-by-row reference over files and batches."""

from __future__ import annotations

import datetime as dt
import pathlib
import random
import re

import pytest

from lineagewire.consumers.audit import archive_read
from lineagewire.consumers.audit.archive import ArchiveHandler
from lineagewire.consumers.audit.archive_read import read_archive
from lineagewire.consumers.audit.exceptions import ArchiveError
from lineagewire.consumers.audit.storage import Storage
from lineagewire.consumers.runtime import Record
from lineagewire.schemas import Codec
from tests.helpers import status_event

T0 = 1_760_000_000_000  # ms
CODEC = Codec()


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Storage, list[tuple[int, int, int]]]:
    """Two partitions, 700 records each over three hours (several files, timestamps not always rising)."""
    root = tmp_path_factory.mktemp("archive")
    rng = random.Random(7)
    handler = ArchiveHandler(str(root), roll_records=150)
    value = CODEC.encode(status_event())
    decode = ArchiveHandler.decoder(CODEC)
    rows = []
    for p in (0, 1):
        for offset in range(700):
            ts = T0 + offset * 15_000 + rng.randrange(-40_000, 40_000)  # jitter: out of order now and then
            handler.handle(Record("t", p, offset, "k", ts, decode(value), value=value, key_bytes=b"k"))
            rows.append((p, offset, ts))
    handler.close()
    return Storage(str(root)), rows


def _reference(rows: list[tuple[int, int, int]], start: object, end: object) -> list[tuple[int, int]]:
    out = []
    for p in (0, 1):
        started = not isinstance(start, dt.datetime)
        for q, offset, ts in rows:
            if q != p:
                continue
            ms = int(start.timestamp() * 1000) if isinstance(start, dt.datetime) else None
            if not started:
                if ts < ms:
                    continue
                started = True
            if isinstance(start, int) and offset < start:
                continue
            if (isinstance(end, int) and offset >= end) or (
                    isinstance(end, dt.datetime) and ts >= int(end.timestamp() * 1000)):
                break
            out.append((p, offset))
    return out


def _at(minutes: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0 / 1000, dt.UTC) + dt.timedelta(minutes=minutes)


@pytest.mark.parametrize(("start", "end"), [
    ("beginning", "end"), (0, 700), (123, 456), (149, 151), (650, "end"), (699, 700), (700, "end"),
    (_at(-5), "end"), (_at(37.3), "end"), (_at(37.3), _at(90.1)), ("beginning", _at(60)), (10, _at(100)),
    (_at(200), "end"), (_at(0), 5),
])
def test_rows_in_a_range_are_the_topics_rows(archived, start, end, monkeypatch) -> None:  # noqa: ANN001
    storage, rows = archived
    monkeypatch.setattr(archive_read, "_BATCH", 64)  # ranges start and end inside batches and across them
    seen: dict[int, int] = {}
    got = [(r.partition, r.offset) for r in read_archive(storage, "t", start=start, end=end, seen=seen)]
    want = _reference(rows, start, end)
    assert got == want
    assert seen == {p: max(o for q, o in want if q == p) for p in (0, 1) if any(q == p for q, _ in want)}


def test_the_range_covers_whole_files_and_batches(archived, monkeypatch) -> None:  # noqa: ANN001
    storage, rows = archived
    monkeypatch.setattr(archive_read, "_BATCH", 64)
    assert len(list(read_archive(storage, "t", start="beginning", end="end"))) == len(rows) == 1400
    assert len(list(pathlib.Path(storage.root).rglob("*.parquet"))) > 8


def test_a_file_that_cannot_be_read_is_the_callers_error_and_stopping_early_ends_the_reading_thread(
        archived, tmp_path) -> None:  # noqa: ANN001
    import shutil
    import threading

    storage, _ = archived
    copy = tmp_path / "copy"
    shutil.copytree(storage.root, copy)
    files = sorted(copy.rglob("*.parquet"))
    files[3].write_bytes(b"not parquet")  # read on the background thread
    reader = read_archive(Storage(str(copy)), "t", start="beginning", end="end")
    with pytest.raises(ArchiveError, match=rf"^{re.escape(str(files[3]))}: changed since it was archived"):
        list(reader)

    def readers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "archive-read" and t.is_alive()]

    records = read_archive(storage, "t", start="beginning", end="end")
    next(records)
    assert readers()  # a batch ahead
    records.close()  # the caller stops after one record
    assert not readers()
