"""``ArchiveHandler``: every record of the topics, kept losslessly in hash-chained Parquet files.

A ``Handler`` on the shared runtime (``consumers.runtime``), so group,
retries, metrics, health and shutdown are the runtime's. What it adds:

* **Every message**: ``accepts_undecodable = True``, so a message the contract
  cannot decode is archived as it is (its decode error in ``decode_error``)
  instead of dead-lettered. The CLI also turns the runtime's event-id dedup
  off: a record published twice is two records at two offsets, and both are kept.
* **Decodes only what its columns need** (``decode_fields``): the header
  fields, the status fields and each dataset's namespace and name; the runtime
  steps over the rest (a dataset's schema) and stops reading each event after
  them (for an ActionLineageEvent, before its column lineage). The bytes are
  stored as they came, so a message whose framing and those fields read but
  whose other bytes are damaged is archived with its decoded columns instead
  of with a ``decode_error``: the archive keeps what was on the topic, and
  whoever replays it decodes it whole and learns of the damage then.
* **One open file per topic partition**, rows buffered in memory, closed
  (``_close``) when it reaches ``roll_bytes`` or ``roll_records``, when a
  record of another UTC hour arrives, or on ``tick`` once it has been open
  ``roll_seconds`` or its hour is over, so a quiet topic still closes its hour.
* **Durable before committed**: a closed file is written with ``Storage.put``
  (fsync + rename locally; one PUT on an object store), then its manifest line
  (``manifest.py``); only then does ``durable_offsets`` move past its records,
  and the runtime never commits past that. The writing runs on a background
  thread, in order (``writer.InOrderWriter``), while the next records are
  buffered; a write that fails is raised from the next runtime call
  (``batch_done``, ``tick``, the next close) into the runtime's retry loop, and
  revocation and shutdown wait for every write.
* **No duplicates after a restart**: records at or below the manifest's last
  archived offset are skipped; a file that was written but not yet listed is
  rewritten under the same name (topic+partition+first offset).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from lineagewire.consumers.runtime import Handler, Record, tune_gc
from lineagewire.exceptions import ConfigError

from .layout import (
    ARCHIVE_MARKER,
    ARCHIVE_SCHEMA,
    DECODE_FIELDS,
    DICTIONARY_COLUMNS,
    MANIFEST_FORMAT,
    data_path,
    hour_bucket,
    records_to_batch,
)
from .manifest import Manifest
from .storage import Storage
from .writer import InOrderWriter

log = logging.getLogger(__name__)

__all__ = ["ArchiveHandler", "records_to_table"]


def records_to_table(records: list[Record]) -> pa.Table:
    """A table of ``ARCHIVE_SCHEMA`` holding ``records``."""
    return pa.Table.from_batches([records_to_batch(records)] if records else [], schema=ARCHIVE_SCHEMA)


_HOUR_MS = 3_600_000
#: records kept as they were handed to us before they become one Arrow record batch: a file's rows live in
#: Arrow's compact columns, not as a million decoded events, and the conversion runs in slices instead of all
#: at close (large enough that the per-array cost of a batch is nothing per row, small enough that the events
#: held meanwhile are a few MB)
_BATCH_ROWS = 2048


@dataclass
class _Buffer:
    bucket: tuple[str, str]
    hour: int  # Kafka timestamp // one hour: the bucket as a number, compared per record
    opened: float
    records: list[Record] = field(default_factory=list)  # not yet in ``batches``
    batches: list[pa.RecordBatch] = field(default_factory=list)
    count: int = 0  # rows in the file so far: in ``batches`` and in ``records``
    size: int = 0
    first: int = -1
    last: int = -1
    min_ts: int = 2**62
    max_ts: int = -1


@dataclass
class _File:
    """A closed file, for the writer thread."""

    tp: tuple[str, int]
    rel: str
    table: pa.Table
    buf: _Buffer


class ArchiveHandler(Handler):
    """Archives every record it is handed to Parquet under ``location`` (a folder or an fsspec URL)."""

    name: ClassVar[str] = "archive"
    accepts_undecodable: ClassVar[bool] = True
    #: what ``layout.records_to_batch`` reads of each kind (other kinds: the header)
    decode_fields: ClassVar[Mapping[str, Sequence[str]] | None] = DECODE_FIELDS
    tick_interval: ClassVar[float | None] = 5.0

    @classmethod
    def prepare_process(cls) -> None:
        """The archive holds up to a batch of decoded events per partition: see ``tune_gc``. And its writer
        thread needs the GIL back after each of its system calls and Parquet steps: with Python's default
        5 ms switch interval it waited that long each time while this thread decoded, and the writer, not the
        decoding, became the limit (bench/archive, 1M events: 8.2-9.8 -> 6.5-7.5 s with 0.2 ms)."""
        tune_gc()
        sys.setswitchinterval(0.0002)

    def __init__(self, location: str | Storage, *, roll_bytes: int = 64 << 20, roll_records: int = 1_000_000,
                 roll_seconds: float = 600.0, compression: str = "zstd",
                 storage_options: dict[str, Any] | None = None) -> None:
        for name, value in (("roll_bytes", roll_bytes), ("roll_records", roll_records), ("roll_seconds", roll_seconds)):
            if value <= 0:
                raise ConfigError(f"archive {name}={value!r}; expected a positive number")
        self.storage = location if isinstance(location, Storage) else Storage(location, storage_options)
        self.roll_bytes = roll_bytes
        self.roll_records = roll_records
        self.roll_seconds = roll_seconds
        self.compression = compression
        self._manifests: dict[tuple[str, int], Manifest] = {}
        self._buffers: dict[tuple[str, int], _Buffer] = {}
        self._handled: dict[tuple[str, int], int] = {}  # next offset after the last record handed to us
        # Up to 8 closed files wait (at the end of an hour every partition closes one), of at most two full
        # files' worth of records.
        self._writer: InOrderWriter[_File] = InOrderWriter(self._write, depth=8, max_size=2 * roll_bytes)
        self.files_written = 0

    # -- the Handler contract ----------------------------------------------------------------------

    def open(self) -> None:
        """Mark the location as an archive, so ``audit verify`` tells one that holds nothing yet from a wrong path."""
        if not self.storage.exists(ARCHIVE_MARKER):
            self.storage.put(ARCHIVE_MARKER, json.dumps({"archive": "lineagewire", "format": MANIFEST_FORMAT}).encode())

    def handle(self, record: Record) -> int:
        tp = (record.topic, record.partition)
        offset = record.offset
        manifest = self._manifests.get(tp) or self._manifest(tp)
        if offset <= manifest.last_offset:
            # Archived before a restart whose commit had not caught up: keep the first copy only.
            self._handled[tp] = offset + 1
            return 0
        ts = record.timestamp_ms
        hour = max(ts, 0) // _HOUR_MS
        buf = self._buffers.get(tp)
        if buf is not None and buf.hour != hour and offset > buf.last:
            self._close(tp)  # a file never spans two hours
            buf = None
        if buf is None:
            buf = self._buffers[tp] = _Buffer(hour_bucket(ts), hour, time.monotonic())
        if offset > buf.last:  # a retried handle() after a failed close must not add the row twice
            buf.records.append(record)
            buf.count += 1
            if len(buf.records) >= _BATCH_ROWS:
                buf.batches.append(records_to_batch(buf.records))
                buf.records = []
            value, key = record.value, record.key_bytes
            buf.size += (len(value) if value else 0) + (len(key) if key else 0) + 64
            if buf.first < 0:
                buf.first = offset
            buf.last = offset
            if ts < buf.min_ts:
                buf.min_ts = ts
            if ts > buf.max_ts:
                buf.max_ts = ts
        self._handled[tp] = offset + 1
        if buf.size >= self.roll_bytes or buf.count >= self.roll_records:
            self._close(tp)
        return 1

    def batch_done(self) -> int:
        self._writer.check()
        return 0

    def tick(self, now: float) -> int:
        self._writer.check()
        closed = 0
        mono = time.monotonic()
        for tp, buf in list(self._buffers.items()):
            hour_over = now >= _bucket_end(buf.bucket)
            if hour_over or mono - buf.opened >= self.roll_seconds:
                self._close(tp)
                closed += 1
        return closed

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        unwritten: dict[tuple[str, int], int] = {}
        for f in self._writer.pending:  # oldest first
            unwritten.setdefault(f.tp, f.buf.first)
        out = {}
        for tp, nxt in self._handled.items():
            buf = self._buffers.get(tp)
            out[tp] = unwritten.get(tp, buf.first if buf is not None and buf.count else nxt)
        return out

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        for tp in partitions:
            if tp in self._buffers:
                self._close(tp)
        self._writer.flush()  # the runtime commits the revoked partitions next
        for tp in partitions:
            # Another member may archive it next; re-read its manifest if it comes back.
            self._manifests.pop(tp, None)
            self._handled.pop(tp, None)

    def close(self) -> None:
        for tp in list(self._buffers):
            self._close(tp)
        self._writer.close()

    # -- files -------------------------------------------------------------------------------------

    def _manifest(self, tp: tuple[str, int]) -> Manifest:
        m = self._manifests.get(tp)
        if m is None:
            m = self._manifests[tp] = Manifest.load(self.storage, *tp)
        return m

    def _close(self, tp: tuple[str, int]) -> None:
        """Hand the partition's open file to the writer thread; drop the buffer."""
        buf = self._buffers.get(tp)
        if buf is None:
            return
        if not buf.count:
            del self._buffers[tp]
            return
        if buf.records:
            buf.batches.append(records_to_batch(buf.records))
            buf.records = []
        table = pa.Table.from_batches(buf.batches, schema=ARCHIVE_SCHEMA)
        self._manifest(tp)  # loaded here: the writer thread only appends to it
        self._writer.submit(_File(tp, data_path(*tp, buf.first, buf.bucket), table, buf), buf.size)
        del self._buffers[tp]

    def _write(self, f: _File) -> None:
        """Write a closed file durably, then its manifest line (on the writer thread, in order)."""
        buf = f.buf
        sink = pa.BufferOutputStream()
        pq.write_table(f.table, sink, compression=self.compression, use_dictionary=DICTIONARY_COLUMNS)
        data = sink.getvalue().to_pybytes()
        digest = hashlib.sha256(data).hexdigest()
        self.storage.put(f.rel, data)
        manifest = self._manifests[f.tp]
        manifest.append(file=f.rel, sha256=digest, first_offset=buf.first, last_offset=buf.last,
                        records=buf.count, size=len(data), min_timestamp_ms=buf.min_ts, max_timestamp_ms=buf.max_ts)
        try:
            self.storage.put(manifest.rel, manifest.dumps())
        except BaseException:
            manifest.drop_last()  # the retry appends it again
            raise
        self.files_written += 1
        log.info("archived %s[%s] offsets %s..%s (%s records, %s bytes) to %s", *f.tp, buf.first, buf.last,
                 buf.count, len(data), f.rel)


def _bucket_end(bucket: tuple[str, str]) -> float:
    """Epoch seconds at which the UTC hour ``bucket`` ends."""
    import datetime as dt

    date, hour = bucket
    start = dt.datetime.fromisoformat(f"{date}T{hour}:00:00+00:00")
    return (start + dt.timedelta(hours=1)).timestamp()
