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
from typing import Any

from lineagewire.exceptions import MissingExtraError

try:
    import pyarrow as pa
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("pyarrow", "audit", "The audit archive") from exc

from lineagewire.consumers.runtime.record import Record

__all__ = ["ARCHIVE_SCHEMA", "GENESIS", "MANIFEST_DIR", "chain_hash", "data_path", "decoded_columns",
           "hour_bucket", "manifest_path"]

MANIFEST_DIR = "_manifests"
#: the "previous chain hash" of a partition's first file
GENESIS = "0" * 64

_DATASETS = pa.list_(pa.struct([("namespace", pa.string()), ("name", pa.string())]))

#: One row per Kafka record. The first block is the record as Kafka stored it (lossless: key and value bytes,
#: headers in order with repeated keys and null values); the rest is decoded from the value for querying.
ARCHIVE_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("ms", tz="UTC")),
    ("timestamp_type", pa.int8()),
    ("key_bytes", pa.binary()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
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
    ("event_time", pa.timestamp("us", tz="UTC")),
    ("inputs", _DATASETS),
    ("outputs", _DATASETS),
])

#: the decoded columns (filled by ``decoded_columns``), in schema order
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


def chain_hash(previous: str, sha256: str, path: str) -> str:
    """The chain hash of a file: SHA-256 over the previous entry's chain hash, the file's hash and its path.

    Binding the path means moving or swapping files breaks the chain even when their bytes are intact.
    """
    return hashlib.sha256(f"{previous}\n{sha256}\n{path}".encode()).hexdigest()


def _datasets(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, name) per dataset: Arrow takes a tuple for a struct, field by field, without a dict per row."""
    return [(d["namespace"], d["name"]) for d in items]


def decoded_columns(record: Record) -> tuple[Any, ...]:
    """The decoded columns of a record (all None for an undecodable one), in ``DECODED`` order."""
    ev = record.event
    if ev is None:
        return (None,) * len(DECODED)
    h = ev["header"]
    kind = h["schema_name"].rsplit(".", 1)[1]
    status = old = None
    inputs: list[tuple[str, str]] = []
    outputs: list[tuple[str, str]] = []
    if kind == "JobStatusChangedEvent":
        status, old = ev["new_status"], ev["old_status"]
    elif kind == "JobCreatedEvent":
        status = ev["status"]
        inputs, outputs = _datasets(ev["lineage"]["sources"]), _datasets(ev["lineage"]["sinks"])
    elif kind == "ActionLineageEvent":
        status = ev["action_status"]
        inputs, outputs = _datasets(ev["inputs"]), _datasets(ev["outputs"])
    parent = h.get("parent_run")
    return (kind, h["event_id"], h["job_namespace"], h["job_name"], h["run_id"],
            parent["run_id"] if parent else None, h["sequence"], status, old, h["event_time"], inputs, outputs)
