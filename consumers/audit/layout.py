"""The archive's layout: where files go, what a row holds, and how a hash chain is computed.

Pure functions and constants shared by the writer (``archive.py``), the
verifier (``manifest.py``), SQL (``query.py``) and replay (``archive_read.py``);
no I/O here.

Layout under the archive root (local folder or fsspec URL)::

    topic=<topic>/date=<YYYY-MM-DD>/hour=<HH>/<topic>+<partition>+<first offset, 20 digits>.parquet
    _manifests/<topic>+<partition>.jsonl

Files are named like Kafka Connect's storage sinks (topic+partition+start
offset), so a restart that re-reads the same offsets writes the same name.
The date and hour are those of the first record's Kafka timestamp, UTC; a
file never spans two hours.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any, cast

from lineagewire.exceptions import MissingExtraError

try:
    import pyarrow as pa
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("pyarrow", "audit", "The audit archive") from exc

from lineagewire.consumers.runtime.record import Record
from lineagewire.schemas import kind_of

__all__ = ["ARCHIVE_MARKER", "ARCHIVE_SCHEMA", "DATA_FILES", "DECODE_FIELDS", "DICTIONARY_COLUMNS", "GENESIS",
           "MANIFEST_DIR", "MANIFEST_FORMAT", "chain_hash", "data_path", "hour_bucket", "line_chain", "manifest_path",
           "records_to_batch"]

MANIFEST_DIR = "_manifests"
#: written by the archive service when it starts: a folder with it is an archive, even before its first file
ARCHIVE_MARKER = f"{MANIFEST_DIR}/archive.json"
#: every data file (``data_path``), as a glob under the archive root
DATA_FILES = "topic=*/date=*/hour=*/*.parquet"
#: the "previous chain hash" of a partition's first file
GENESIS = "0" * 64

_DATASET = pa.struct([("namespace", pa.string()), ("name", pa.string())])
_DATASETS = pa.list_(_DATASET)
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
_TIMESTAMP_US = pa.timestamp("us", tz="UTC")

#: One row per Kafka record. The first block is the record as Kafka stored it (lossless: key and value bytes,
#: headers in order with repeated keys and null values); the rest is decoded from the value for querying.
ARCHIVE_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", _TIMESTAMP_MS),
    ("timestamp_type", pa.int8()),
    ("key_bytes", pa.binary()),
    ("headers", _HEADERS),
    ("value", pa.binary()),
    ("key", pa.string()),
    ("decode_error", pa.string()),
    ("kind", pa.string()),
    ("event_id", pa.string()),
    ("job_namespace", pa.string()),
    ("job_name", pa.string()),
    ("run_id", pa.string()),
    ("parent_run_id", pa.string()),
    ("sequence", pa.int64()),
    ("status", pa.string()),
    ("old_status", pa.string()),
    ("event_time", _TIMESTAMP_US),
    ("inputs", _DATASETS),
    ("outputs", _DATASETS),
])

_HEADER = ["header.event_id", "header.job_namespace", "header.job_name", "header.run_id", "header.parent_run.run_id",
           "header.sequence", "header.event_time"]
#: the fields of each event kind that ``records_to_batch`` reads (``ArchiveHandler.decode_fields``)
DECODE_FIELDS = {
    "JobStatusChangedEvent": [*_HEADER, "old_status", "new_status"],
    "ActionLineageEvent": [*_HEADER, "action_status", "inputs.namespace", "inputs.name", "outputs.namespace",
                           "outputs.name"],
    "JobCreatedEvent": [*_HEADER, "status", "lineage.sources.namespace", "lineage.sources.name",
                        "lineage.sinks.namespace", "lineage.sinks.name"],
    "RefreshCommand": _HEADER,
    "CancelRefresh": _HEADER,
    "RefreshHeld": _HEADER,
}

#: The columns written with Parquet's dictionary encoding: those with few distinct values. The others (the
#: value bytes, event ids, run ids, times, offsets) are nearly unique per row, and trying a dictionary first
#: for them made writing a file twice as slow and the file a tenth larger (bench/archive).
DICTIONARY_COLUMNS = ["topic", "partition", "timestamp_type", "key", "decode_error", "kind", "job_namespace",
                      "job_name", "status", "old_status", "inputs.list.element.namespace",
                      "inputs.list.element.name", "outputs.list.element.namespace", "outputs.list.element.name"]

#: the decoded columns (filled by ``records_to_batch``), in schema order
DECODED = ("kind", "event_id", "job_namespace", "job_name", "run_id", "parent_run_id", "sequence", "status",
           "old_status", "event_time", "inputs", "outputs")


def hour_bucket(timestamp_ms: int) -> tuple[str, str]:
    """(date, hour) of a Kafka timestamp in UTC, as the folder names use them."""
    when = dt.datetime.fromtimestamp(max(timestamp_ms, 0) / 1000, dt.UTC)
    return when.strftime("%Y-%m-%d"), when.strftime("%H")


def data_path(topic: str, partition: int, first_offset: int, bucket: tuple[str, str]) -> str:
    """A data file's path relative to the archive root."""
    date, hour = bucket
    return f"topic={topic}/date={date}/hour={hour}/{topic}+{partition}+{first_offset:020d}.parquet"


def manifest_path(topic: str, partition: int) -> str:
    """A partition's manifest, relative to the archive root."""
    return f"{MANIFEST_DIR}/{topic}+{partition}.jsonl"


#: the manifest line format ``Manifest.append`` writes (the ``v`` field); lines without ``v`` are format 1
MANIFEST_FORMAT = 2


def chain_hash(previous: str, sha256: str, path: str) -> str:
    """The chain hash of a format-1 line: SHA-256 over the previous chain hash, the file's hash and its path.

    Binding the path means moving or swapping files breaks the chain even when their bytes are intact. Lines
    written before format 2 carry this hash; their other fields are checked against their files instead.
    """
    return hashlib.sha256(f"{previous}\n{sha256}\n{path}".encode()).hexdigest()


def line_chain(previous: str, entry: dict[str, Any]) -> str:
    """The chain hash of a manifest line: of format 2, SHA-256 over the previous chain hash and every other
    field of the line (canonical JSON), so editing any field breaks the chain; of format 1, ``chain_hash``.

    ValueError names a format this version does not know.
    """
    v = entry.get("v")
    if v is None:
        return chain_hash(previous, entry["sha256"], entry["file"])
    if v != MANIFEST_FORMAT:
        raise ValueError(f"format {v!r}; expected {MANIFEST_FORMAT} (or no 'v': format 1), "
                         "so it was written by a newer lineagewire")
    fields = json.dumps({k: x for k, x in entry.items() if k != "chain"}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{previous}\n{fields}".encode()).hexdigest()


def records_to_batch(records: list[Record]) -> pa.RecordBatch:
    """A record batch of ``ARCHIVE_SCHEMA`` from records: one list per column, one ``pa.array`` each.

    Built column by column rather than row by row: no tuple per row, and each row's datasets go into Arrow as
    the decoded lists of ``{"namespace", "name"}`` dicts (converted in C). An undecodable record (``event``
    None) has nulls in the decoded columns.
    """
    rs = records
    raw = [pa.array([r.topic for r in rs], pa.string()), pa.array([r.partition for r in rs], pa.int32()),
           pa.array([r.offset for r in rs], pa.int64()),
           pa.array([r.timestamp_ms for r in rs], _TIMESTAMP_MS),
           pa.array([r.timestamp_type for r in rs], pa.int8()), pa.array([r.key_bytes for r in rs], pa.binary()),
           # (key, value) tuples go into the struct field by field
           pa.array([r.headers for r in rs], _HEADERS), pa.array([r.value for r in rs], pa.binary()),
           pa.array([r.key for r in rs], pa.string()), pa.array([r.decode_error for r in rs], pa.string())]
    events = [r.event for r in rs]
    if all(e is not None for e in events):
        decoded = _decoded_arrays(cast(list[dict[str, Any]], events))
    else:
        # Decode the decodable ones, then spread them out with nulls where a record was not decodable.
        ok = [e for e in events if e is not None]
        at, positions = 0, []
        for e in events:
            positions.append(None if e is None else at)
            at += e is not None
        take = pa.array(positions, pa.int64())
        decoded = [a.take(take) for a in _decoded_arrays(ok)]
    return pa.RecordBatch.from_arrays([*raw, *decoded], schema=ARCHIVE_SCHEMA)


def _decoded_arrays(events: list[dict[str, Any]]) -> list[pa.Array]:
    """The decoded columns of decoded events, in ``DECODED`` order."""
    hs = [e["header"] for e in events]
    kinds = [kind_of(e) for e in events]
    status: list[str | None] = []
    old: list[str | None] = []
    ins: list[Any] = []  # each row's list of {"namespace", "name"} dicts, which Arrow takes as they are
    outs: list[Any] = []
    for e, kind in zip(events, kinds, strict=True):
        if kind == "ActionLineageEvent":
            status.append(e["action_status"])
            old.append(None)
            ins.append(e["inputs"])
            outs.append(e["outputs"])
        elif kind == "JobStatusChangedEvent":
            status.append(e["new_status"])
            old.append(e["old_status"])
            ins.append(())
            outs.append(())
        elif kind == "JobCreatedEvent":
            lineage = e["lineage"]
            status.append(e["status"])
            old.append(None)
            ins.append(lineage["sources"])
            outs.append(lineage["sinks"])
        else:
            status.append(None)
            old.append(None)
            ins.append(())
            outs.append(())
    parents = [h["parent_run"] for h in hs]
    return [pa.array(kinds, pa.string()), pa.array([h["event_id"] for h in hs], pa.string()),
            pa.array([h["job_namespace"] for h in hs], pa.string()),
            pa.array([h["job_name"] for h in hs], pa.string()), pa.array([h["run_id"] for h in hs], pa.string()),
            pa.array([p["run_id"] if p else None for p in parents], pa.string()),
            pa.array([h["sequence"] for h in hs], pa.int64()), pa.array(status, pa.string()),
            pa.array(old, pa.string()), pa.array([h["event_time"] for h in hs], _TIMESTAMP_US),
            pa.array(ins, _DATASETS), pa.array(outs, _DATASETS)]
