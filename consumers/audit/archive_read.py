"""Reading a topic range from the archive, and across archive and topic with no gap and no duplicate.

``read_archive`` yields ``Record``s from the archived Parquet files of one
topic with the same range semantics as ``TopicReader`` on the live topic: a
time start is, per partition, the first offset whose timestamp is at or after
it (what Kafka's ``offsets_for_times`` answers) and everything after it; an
offset is an offset; ``beginning`` is the first archived offset; ``end`` is
the last archived one.

``read_across`` serves each partition from the archive first, then from the
topic, skipping topic records at or below the last offset the archive served
for that partition (dedup by topic, partition, offset). If the topic's
earliest retained offset lies beyond the archive's last one, the offsets in
between exist nowhere any more: that gap is reported on ``errors``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import queue
import sys
import threading
from collections.abc import Generator, Iterator
from typing import IO, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lineagewire.config import Settings
from lineagewire.consumers.runtime.record import Record
from lineagewire.exceptions import DecodeError
from lineagewire.kafka.reader import Position, TopicReader
from lineagewire.schemas import Codec

from .exceptions import ArchiveError
from .manifest import Manifest, file_facts, load_checked
from .storage import Storage

__all__ = ["archived_count", "read_across", "read_archive"]

_COLUMNS = ["offset", "timestamp", "timestamp_type", "key_bytes", "key", "headers", "value"]
#: the decoded columns that answer --job and --status without decoding; read only when filtering
_FILTER_COLUMNS = ["job_namespace", "job_name", "kind", "status"]
T = TypeVar("T")
#: rows per record batch: bounds memory to one batch, not one file (a file holds up to 1M records)
_BATCH = 65_536


def _ms(pos: dt.datetime) -> int:
    return int(pos.timestamp() * 1000)


def _job_matches(job: str | None, namespace: str | None, name: str | None) -> bool:
    """The archive's decoded columns answer the --job filter without decoding the value."""
    return job is None or name is None or job in (name, f"{namespace}/{name}")


#: the kinds whose ``status`` column is the field ``--status`` compares (``subscribe.matches``)
_STATUS_KINDS = frozenset({"JobStatusChangedEvent", "JobCreatedEvent"})


def _status_may_match(status: str | None, kind: str | None, column: str | None) -> bool:
    """The ``kind`` and ``status`` columns answer --status without decoding (an undecodable row is decoded to
    report it)."""
    return status is None or kind is None or (kind in _STATUS_KINDS and column == status)


def archived_count(storage: Storage, topic: str) -> int:
    """Records archived for ``topic`` as the manifests say (only a progress bar's total: an estimate)."""
    return sum(e["records"] for m in load_checked(storage, topic) for e in m.entries)


def read_archive(storage: Storage, topic: str, *, start: Position, end: Position | None, job: str | None = None,
                 status: str | None = None, codec: Codec | None = None, errors: IO[str] | None = None,
                 seen: dict[int, int] | None = None) -> Iterator[Record]:
    """Decoded, filtered records of ``topic`` in ``[start, end)`` from the archive.

    ``seen`` (if given) receives, per partition, the last offset inside the range that was read
    (filtered out or not): the topic must not serve it again.
    """
    codec = codec or Codec()
    errors = errors or sys.stderr
    if start == "end":
        return
    columns = _COLUMNS if job is None and status is None else _COLUMNS + _FILTER_COLUMNS
    start_ms = _ms(start) if isinstance(start, dt.datetime) else 0
    end_ms = _ms(end) if isinstance(end, dt.datetime) else None
    for manifest in load_checked(storage, topic):
        p = manifest.partition
        started = not isinstance(start, dt.datetime)
        files = _files_in_range(storage, manifest, _chain_holds(storage, manifest, errors), start, end, start_ms)
        # The files are read and decompressed on a thread, a batch ahead, while this one decodes.
        with contextlib.closing(_prefetched(_batches(storage, manifest.rel, files, columns))) as batches:
            for batch in batches:
                lo, hi, started, done = _rows_in_range(batch, start, end, start_ms, end_ms, started)
                if lo < hi:
                    if seen is not None:
                        seen[p] = batch.column("offset")[hi - 1].as_py()
                    yield from _records(batch.slice(lo, hi - lo), topic, p, job, status, codec, errors)
                if done:
                    break


def _chain_holds(storage: Storage, manifest: Manifest, errors: IO[str]) -> bool:
    """Whether the manifest's hash chain holds from its first line to its last. When it does not, one line on
    ``errors`` says so, and no line of it is trusted: its files are read for their offsets and times."""
    breaks = manifest.chain_breaks()
    if breaks:
        n, wrong = breaks[0]
        more = f" (and {len(breaks) - 1} more lines)" if len(breaks) > 1 else ""
        print(f"{storage.path(manifest.rel)}: line {n}: {wrong}{more}; its lines are not trusted, so each file's "
              "offsets and times are read from the file (lineagewire audit verify lists what changed)",
              file=errors, flush=True)
    return not breaks


def _files_in_range(storage: Storage, manifest: Manifest, trusted: bool, start: Position, end: Position | None,
                    start_ms: int) -> list[tuple[str, str | None]]:
    """(file, SHA-256 to check it against, or None when the chain does not vouch for it) of each file of
    ``manifest`` that may hold rows of the range, in offset order."""
    files: list[tuple[str, str | None]] = []
    for entry in manifest.entries:
        # Only the bounds of the range need a file's span: from the beginning to the end, none is read.
        if isinstance(start, int) or isinstance(end, int) or (not files and start_ms > 0):
            first, last, max_ts = _span(storage, entry, trusted)
            if isinstance(start, int) and last < start:
                continue
            if not files and max_ts < start_ms:
                continue  # wholly before the start time, and before the first offset at or after it
            if isinstance(end, int) and first >= end:
                break
        files.append((entry["file"], entry["sha256"] if trusted else None))
    return files


def _span(storage: Storage, entry: dict[str, Any], trusted: bool) -> tuple[int, int, int]:
    """(first offset, last offset, max timestamp ms) of a listed file: from its line when the chain covers
    those fields and holds (format 2), else from the file's own Parquet statistics (format 1 chains only the
    file's hash and path; a broken chain vouches for nothing)."""
    if trusted and "v" in entry:
        return entry["first_offset"], entry["last_offset"], entry["max_timestamp_ms"]
    rel = entry["file"]
    try:
        with storage.open(rel) as f:
            facts = file_facts(f)  # the footer's statistics: a few KB, not the file
    except FileNotFoundError:
        raise ArchiveError(f"{storage.path(rel)}: listed in the manifest but not found; run lineagewire audit "
                           "verify") from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _unreadable(storage, rel, exc) from exc
    if not facts.records:
        raise ArchiveError(f"{storage.path(rel)}: holds no rows; expected an archive file (run lineagewire audit "
                           "verify)")
    return facts.first_offset, facts.last_offset, facts.max_timestamp_ms


def _unreadable(storage: Storage, rel: str, exc: BaseException) -> ArchiveError:
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    return ArchiveError(f"{storage.path(rel)}: cannot be read as an archive file ({reason}); run lineagewire audit "
                        "verify")


def _batches(storage: Storage, where: str, files: list[tuple[str, str | None]],
             columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The record batches of ``files``, each file read whole and, when its SHA-256 is vouched for by the chain,
    checked against it first (hashing runs here, on the reading thread, beside the decoding). ArchiveError
    names a file that is missing, changed or unreadable."""
    for rel, sha256 in files:
        data = storage.get(rel)
        if data is None:
            raise ArchiveError(f"{storage.path(rel)}: listed in {storage.path(where)} but not found; run "
                               "lineagewire audit verify")
        if sha256 is not None:
            digest = hashlib.sha256(data).hexdigest()
            if digest != sha256:
                raise ArchiveError(f"{storage.path(rel)}: changed since it was archived (SHA-256 {digest}, "
                                   f"{storage.path(where)} says {sha256}); run lineagewire audit verify")
        try:
            yield from pq.ParquetFile(pa.BufferReader(data)).iter_batches(batch_size=_BATCH, columns=columns)
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(storage, rel, exc) from exc


_END = object()


def _prefetched(items: Iterator[T], depth: int = 2) -> Generator[T, None, None]:
    """``items``, made on a background thread up to ``depth`` ahead of the caller; an error making them is
    raised here. Closing this generator stops the thread after the item it is making (Parquet reading and
    decompressing release the GIL, so it runs beside the decoding on another core)."""
    made: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def make() -> None:
        try:
            for item in items:
                made.put((True, item))
                if stop.is_set():
                    return
            made.put((True, _END))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
            made.put((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=make, name="archive-read", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = made.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # free the queue so a blocked put returns and the thread sees ``stop``
            with contextlib.suppress(queue.Empty):
                made.get(timeout=0.05)


def _rows_in_range(batch: pa.RecordBatch, start: Position, end: Position | None, start_ms: int,
                   end_ms: int | None, started: bool) -> tuple[int, int, bool, bool]:
    """``[lo, hi)``: the rows of ``batch`` in the range, whether the range has started (at the first row at or
    after a time start) and whether it ended in this batch. Offsets rise within a partition; timestamps need
    not, so a time bound is the first row past it, as on the topic."""
    lo, hi = 0, batch.num_rows
    offsets = batch.column("offset")
    if not started:
        first = pc.index(pc.greater_equal(batch.column("timestamp").cast("int64"), start_ms), True).as_py()
        if first < 0:
            return 0, 0, False, False
        lo, started = first, True
    if isinstance(start, int):
        lo = max(lo, pc.sum(pc.less(offsets, start)).as_py() or 0)
    done = False
    past = []
    if isinstance(end, int):
        past.append(pc.greater_equal(offsets, end))
    if end_ms is not None:
        past.append(pc.greater_equal(batch.column("timestamp").cast("int64"), end_ms))
    for over in past:
        at = pc.index(over.slice(lo), True).as_py()
        if at >= 0:
            hi, done = min(hi, lo + at), True
    return lo, max(lo, hi), started, done


def _records(batch: pa.RecordBatch, topic: str, p: int, job: str | None, status: str | None, codec: Codec,
             errors: IO[str]) -> Iterator[Record]:
    """The decoded records of ``batch`` (rows in the range) that pass the filters."""
    from .subscribe import matches

    offsets, values = batch.column("offset").to_pylist(), batch.column("value").to_pylist()
    keys, key_bytes = batch.column("key").to_pylist(), batch.column("key_bytes").to_pylist()
    types = batch.column("timestamp_type").to_pylist()
    stamps = batch.column("timestamp").cast("int64").to_pylist()
    # Most records carry no header: convert only the rows that have some.
    headers = batch.column("headers")
    has_headers = pc.greater(pc.list_value_length(headers), 0).to_pylist()
    filtering = job is not None or status is not None
    if filtering:
        namespaces, names, kinds, statuses = (batch.column(c).to_pylist() for c in _FILTER_COLUMNS)
    decode = codec.decode
    for i, value in enumerate(values):
        if filtering and not (_job_matches(job, namespaces[i], names[i])
                              and _status_may_match(status, kinds[i], statuses[i])):
            continue
        try:
            event = decode(value)
        except DecodeError as exc:
            print(f"{topic}[{p}]@{offsets[i]}: skipped undecodable message ({exc.reason}): {exc}", file=errors,
                  flush=True)
            continue
        if filtering and not matches(event, job, status):
            continue
        # positional, in Record's field order: half the cost of keywords, per replayed record
        yield Record(topic, p, offsets[i], keys[i], stamps[i], event, value,
                     [(h["key"], h["value"]) for h in headers[i].as_py()] if has_headers[i] else [], types[i],
                     key_bytes[i])


def read_across(settings: Settings, storage: Storage, topic: str, *, start: Position, end: Position,
                job: str | None = None, status: str | None = None, codec: Codec | None = None,
                errors: IO[str] | None = None) -> Iterator[Record]:
    """The range from the archive, then from the topic, each (partition, offset) once; see the module docstring."""
    from .subscribe import read_events

    codec = codec or Codec(schema_registry_url=settings.schema_registry_url,
                           registry_config=settings.registry_config())
    errors = errors or sys.stderr
    seen: dict[int, int] = {}
    yield from read_archive(storage, topic, start=start, end=end, job=job, status=status, codec=codec,
                            errors=errors, seen=seen)
    # The last archived offset as the file says it, unless the chain vouches for the line (see ``_span``).
    last_archived = {m.partition: _span(storage, m.entries[-1], not m.chain_breaks())[1]
                     for m in load_checked(storage, topic) if m.entries}
    with TopicReader(settings, topic, start="beginning", end="end") as low_probe:
        lows = dict(low_probe.start_offsets)
    with TopicReader(settings, topic, start=start, end="end") as start_probe:
        starts = dict(start_probe.start_offsets)
    for p, low in sorted(lows.items()):
        archived = last_archived.get(p, -1)
        # Offsets below the earliest retained one belong to the range when it starts at or before it.
        reaches_below = starts.get(p) == low and not (isinstance(start, int) and start >= low)
        if archived + 1 < low and reaches_below:
            print(f"{topic}[{p}]: offsets {archived + 1}..{low - 1} are neither in the archive nor on the topic "
                  "(deleted by retention before they were archived)", file=errors, flush=True)
    yield from read_events(settings, topic, start=start, end=end, job=job, status=status, codec=codec,
                           errors=errors, skip_through=seen)
