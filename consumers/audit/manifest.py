"""Tamper evidence for the archive: a hash-chained manifest per topic partition, and ``verify``.

Each closed data file gets one manifest line (JSON): its path, offsets, record
count, size, timestamps, SHA-256, the line format ``v`` and ``chain`` =
SHA-256(previous chain, every other field of the line) (``layout.line_chain``).
Changing a byte of a file changes its hash; deleting it leaves a listed path
missing; swapping two files puts a listed hash under the other path; editing
any field of a line, dropping or reordering lines breaks the chain. ``verify``
also compares every field of a line with the file once its SHA-256 matches
(records, first and last offset, bytes, min and max timestamp, topic,
partition, path; from the file's Parquet footer, which the writer computed from
its rows), so a line that was edited and re-chained is caught too. The
last chain hash of each partition is a short fingerprint of its whole history:
copy it elsewhere (a ticket, a log) to pin that history.

Lines written before format 2 (no ``v``) chain only the file's hash and path
(``layout.chain_hash``). They are kept as they are: rewriting them would
change every head that users pinned. Their other fields are covered all the
same, because ``verify`` compares them with the file whose hash is chained; new
lines chain on from the last old one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .exceptions import ArchiveError
from .layout import (
    ARCHIVE_MARKER,
    DATA_FILES,
    GENESIS,
    MANIFEST_DIR,
    MANIFEST_FORMAT,
    data_path,
    hour_bucket,
    line_chain,
    manifest_path,
)
from .storage import Storage

__all__ = ["FileFacts", "Manifest", "Problem", "VerifyReport", "file_facts", "line_problem", "load_checked",
           "load_manifests", "mismatches", "require_archive", "verify"]

#: the integer fields of a manifest line, each compared with the file it describes
_INT_FIELDS = ("first_offset", "last_offset", "records", "bytes", "min_timestamp_ms", "max_timestamp_ms")


@dataclass
class Manifest:
    """The closed files of one topic partition, in offset order."""

    topic: str
    partition: int
    entries: list[dict[str, Any]] = field(default_factory=list)
    #: the JSON lines of ``entries`` made so far: ``dumps`` after each closed file encodes the new line only,
    #: not the partition's whole history again (a year of hourly files is 8,760 lines)
    _lines: list[bytes] = field(default_factory=list, init=False, repr=False)

    @property
    def rel(self) -> str:
        return manifest_path(self.topic, self.partition)

    @property
    def head(self) -> str:
        return self.entries[-1]["chain"] if self.entries else GENESIS

    @property
    def last_offset(self) -> int:
        """The last archived offset as the last line says it, -1 when nothing is archived yet."""
        return int(self.entries[-1]["last_offset"]) if self.entries else -1

    def append(self, *, file: str, sha256: str, first_offset: int, last_offset: int, records: int, size: int,
               min_timestamp_ms: int, max_timestamp_ms: int) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "v": MANIFEST_FORMAT, "file": file, "first_offset": first_offset, "last_offset": last_offset,
            "records": records, "bytes": size, "min_timestamp_ms": min_timestamp_ms,
            "max_timestamp_ms": max_timestamp_ms, "sha256": sha256}
        entry["chain"] = line_chain(self.head, entry)
        self.entries.append(entry)
        return entry

    def drop_last(self) -> None:
        """Take back the last ``append`` (its manifest could not be written; the retry appends it again)."""
        self.entries.pop()
        del self._lines[len(self.entries):]

    def dumps(self) -> bytes:
        lines = self._lines
        lines.extend(json.dumps(e, sort_keys=True, separators=(",", ":")).encode() + b"\n"
                     for e in self.entries[len(lines):])
        return b"".join(lines)

    def chain_breaks(self) -> list[tuple[int, str]]:
        """(line number, what is wrong) for each line that is malformed or whose chain hash does not follow
        from the line before: empty when the whole chain holds."""
        out = []
        previous = GENESIS
        for n, e in enumerate(self.entries, 1):
            wrong = line_problem(e)
            if wrong is None and e["chain"] != line_chain(previous, e):
                wrong = (f"chain hash does not follow from the line before ({e['file']}); the manifest was "
                         "edited or reordered")
            if wrong is not None:
                out.append((n, wrong))
            chain = e.get("chain") if isinstance(e, dict) else None
            if isinstance(chain, str):  # a malformed line's successor is checked against what it chained on
                previous = chain
        return out

    @classmethod
    def load(cls, storage: Storage, topic: str, partition: int) -> Manifest:
        """The partition's manifest; ArchiveError names a line that is not JSON."""
        where = manifest_path(topic, partition)
        try:
            return cls(topic, partition, _parse(storage.get(where) or b"", where))
        except ValueError as exc:
            raise ArchiveError(f"{storage.path(where)}: {exc}; run lineagewire audit verify") from None


def line_problem(entry: Any) -> str | None:
    """What is wrong with the shape of a manifest line (a field missing or of the wrong type, an unknown
    format), or None."""
    if not isinstance(entry, dict):
        return f"not a JSON object: {str(entry)[:60]}"
    for name in ("file", "sha256", "chain"):
        if not isinstance(entry.get(name), str):
            return f"field {name!r} is {entry.get(name)!r}; expected a string"
    for name in _INT_FIELDS:
        value = entry.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            return f"field {name!r} is {value!r}; expected an integer"
    if entry.get("v", MANIFEST_FORMAT) != MANIFEST_FORMAT:
        return (f"format {entry['v']!r}; expected {MANIFEST_FORMAT} (or no 'v': format 1), so it was written by a "
                "newer lineagewire")
    return None


def _parse(data: bytes, where: str) -> list[dict[str, Any]]:
    entries = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{where} line {n}: not JSON ({exc})") from None
    return entries


def _partition_of(rel: str) -> tuple[str, int] | None:
    name = rel.rsplit("/", 1)[1][: -len(".jsonl")]
    t, _, p = name.rpartition("+")
    return (t, int(p)) if p.isdigit() else None


def load_manifests(storage: Storage, topic: str | None = None) -> list[Manifest]:
    """Every manifest of the archive (of ``topic`` only, when given); ArchiveError names one that is not JSON."""
    out = []
    for rel in storage.glob(f"{MANIFEST_DIR}/*.jsonl"):
        tp = _partition_of(rel)
        if tp is None or (topic is not None and tp[0] != topic):
            continue
        out.append(Manifest.load(storage, *tp))
    return sorted(out, key=lambda m: (m.topic, m.partition))


def load_checked(storage: Storage, topic: str | None = None) -> list[Manifest]:
    """``load_manifests``, and ArchiveError naming the first line that is not a manifest line (for readers,
    which must not stumble over one with a traceback; ``verify`` reports such lines instead)."""
    manifests = load_manifests(storage, topic)
    for m in manifests:
        for n, entry in enumerate(m.entries, 1):
            wrong = line_problem(entry)
            if wrong is not None:
                raise ArchiveError(f"{storage.path(m.rel)} line {n}: {wrong}; run lineagewire audit verify")
    return manifests


@dataclass(frozen=True)
class FileFacts:
    """What an archive file holds, read from the file: what its manifest line must say."""

    records: int
    first_offset: int
    last_offset: int
    min_timestamp_ms: int
    max_timestamp_ms: int
    topics: tuple[str, ...]
    partitions: tuple[int, ...]


#: the columns whose bounds make a file's facts
_FACT_COLUMNS = ("topic", "partition", "offset", "timestamp")


def file_facts(data: bytes | Any) -> FileFacts:
    """The facts of an archive file, given as its bytes or an open file (raises pyarrow's error for one that is
    not an archive file).

    From the Parquet footer: its row count and each row group's min and max of the fact columns, which the
    writer computed from the rows (``verify`` calls this only once the bytes match their chained SHA-256, so
    the footer is the archiver's). Offsets rise within a file, so their bounds are its first and last offset.
    Reading the rows instead cost 5 times as much per file (bench.archive verify). ValueError for a file
    without those statistics: the archive always writes them.
    """
    pf = pq.ParquetFile(pa.BufferReader(data) if isinstance(data, bytes) else data)
    meta = pf.metadata
    lows, highs = _bounds(meta)
    if not meta.num_rows:
        return FileFacts(0, -1, -1, -1, -1, (), ())
    missing = [c for c in _FACT_COLUMNS if not lows[c]]
    if missing:
        raise ValueError(f"no column {', '.join(missing)}; expected a file written by the archive")
    return FileFacts(meta.num_rows, min(lows["offset"]), max(highs["offset"]), min(lows["timestamp"]),
                     max(highs["timestamp"]), tuple(sorted({*lows["topic"], *highs["topic"]})),
                     tuple(sorted({*lows["partition"], *highs["partition"]})))


def _bounds(meta: pq.FileMetaData) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Each row group's min, and its max, of each fact column, from the statistics in the footer ``meta``."""
    lows: dict[str, list[Any]] = {c: [] for c in _FACT_COLUMNS}
    highs: dict[str, list[Any]] = {c: [] for c in _FACT_COLUMNS}
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        for j in range(group.num_columns):
            column = group.column(j)
            name = column.path_in_schema
            if name not in lows:
                continue
            stats = column.statistics
            if stats is None or not stats.has_min_max:
                raise ValueError(f"row group {i} has no statistics for column {name}; expected a file written by "
                                 "the archive")
            raw = name in ("offset", "timestamp")  # ints, not the timestamp's datetime
            lows[name].append(stats.min_raw if raw else stats.min)
            highs[name].append(stats.max_raw if raw else stats.max)
    return lows, highs


def mismatches(manifest: Manifest, entry: dict[str, Any], facts: FileFacts, size: int) -> list[tuple[str, Any, Any]]:
    """(field, what the file holds, what the line says) for each field of ``entry`` the file contradicts."""
    out: list[tuple[str, Any, Any]] = [
        (name, held, entry[name]) for name, held in (
            ("records", facts.records), ("first_offset", facts.first_offset), ("last_offset", facts.last_offset),
            ("bytes", size), ("min_timestamp_ms", facts.min_timestamp_ms),
            ("max_timestamp_ms", facts.max_timestamp_ms)) if held != entry[name]]
    if facts.topics != (manifest.topic,) or facts.partitions != (manifest.partition,):
        out.append(("topic and partition", f"rows of {list(facts.topics)} {list(facts.partitions)}",
                    f"{manifest.topic} {manifest.partition} (its manifest's name)"))
    if facts.records:
        # A file never spans two hours (the archiver closes it when a record of another hour arrives), so its
        # earliest timestamp names its date and hour folder.
        named = data_path(manifest.topic, manifest.partition, facts.first_offset,
                          hour_bucket(facts.min_timestamp_ms))
        if named != entry["file"]:
            out.append(("file", named, entry["file"]))
    return out


@dataclass(frozen=True)
class Problem:
    """One finding of ``verify``: ``kind`` is changed, missing, reordered, chain, manifest or unlisted."""

    kind: str
    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.path}: {self.detail}"


@dataclass
class VerifyReport:
    files: int = 0
    bytes: int = 0
    #: records counted in the files themselves (a manifest line's count is checked, never added up)
    records: int = 0
    heads: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    #: manifest lines of format 1 (before every field was chained); checked against their files all the same
    format1_lines: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(storage: Storage) -> VerifyReport:
    """Re-read every file of the archive and check it against the manifests' hash chains and every field of its
    manifest line. ArchiveError when ``storage`` holds no archive at all (``require_archive``)."""
    require_archive(storage)
    report = VerifyReport()
    listed: set[str] = set()
    for rel in storage.glob(f"{MANIFEST_DIR}/*.jsonl"):
        tp = _partition_of(rel)
        if tp is None:
            continue
        try:
            m = Manifest(*tp, _parse(storage.get(rel) or b"", rel))
        except ValueError as exc:
            report.problems.append(Problem("chain", rel, str(exc)))
            continue
        _verify_manifest(storage, m, report, listed)
    for path in storage.glob(DATA_FILES):
        if path not in listed:
            report.problems.append(Problem("unlisted", path, "in no manifest (written after the last manifest "
                                           "update, e.g. by a crashed archiver, or added by hand)"))
    return report


def require_archive(storage: Storage) -> None:
    """ArchiveError unless ``storage`` holds an archive: a ``_manifests/`` folder (with the mark its archive
    service leaves, ``ARCHIVE_MARKER``, or empty, as an older version left it before its first file) or a data
    file. A wrong path or an empty folder is not an archive that verifies with nothing in it."""
    if storage.exists(ARCHIVE_MARKER) or storage.fs.isdir(storage.path(MANIFEST_DIR)) or storage.glob(DATA_FILES):
        return
    found = "nothing there" if not storage.fs.exists(storage.root) else f"no {MANIFEST_DIR}/ and no data files"
    raise ArchiveError(f"no archive at {storage.url}: {found}; expected the folder or URL that 'lineagewire "
                       f"consume archive --to' writes, with {MANIFEST_DIR}/ in it")


def _verify_manifest(storage: Storage, m: Manifest, report: VerifyReport, listed: set[str]) -> None:
    where = m.rel
    breaks = dict(m.chain_breaks())
    by_hash = {e["sha256"]: e["file"] for e in m.entries if line_problem(e) is None}
    prev_last = -1
    for n, e in enumerate(m.entries, 1):
        if n in breaks:
            report.problems.append(Problem("chain", where, f"line {n}: {breaks[n]}"))
        if line_problem(e) is not None:
            continue
        path = e["file"]
        listed.add(path)
        report.format1_lines += "v" not in e
        if e["first_offset"] <= prev_last:
            report.problems.append(Problem("reordered", path, f"{where} line {n}: first offset "
                                           f"{e['first_offset']} is not after the previous file's last offset "
                                           f"{prev_last}"))
        prev_last = e["last_offset"]
        data = storage.get(path)
        if data is None:
            report.problems.append(Problem("missing", path, f"listed in {where} line {n} (offsets "
                                           f"{e['first_offset']}..{e['last_offset']}) but not found"))
            continue
        _verify_content(m, n, e, data, by_hash, report)
    last = m.entries[-1] if m.entries else {}
    report.heads[f"{m.topic}[{m.partition}]"] = str(last.get("chain", "")) if isinstance(last, dict) else ""


def _verify_content(m: Manifest, n: int, e: dict[str, Any], data: bytes, by_hash: dict[str, str],
                    report: VerifyReport) -> None:
    """Checks the bytes of the file on line ``n`` against that line: their SHA-256 (another line's: the files were
    swapped or moved), then the facts of the file's footer."""
    where, path = m.rel, e["file"]
    digest = hashlib.sha256(data).hexdigest()
    report.files += 1
    report.bytes += len(data)
    if digest != e["sha256"]:
        other = by_hash.get(digest)
        if other is not None and other != path:
            report.problems.append(Problem("reordered", path, f"holds the content listed for {other} "
                                           "(files swapped or moved)"))
        else:
            report.problems.append(Problem("changed", path, f"SHA-256 is {digest}, {where} line {n} says "
                                           f"{e['sha256']}"))
        return
    try:
        facts = file_facts(data)
    except (pa.ArrowException, OSError, ValueError) as exc:  # archived so: its writer wrote no archive file
        report.problems.append(Problem("changed", path, f"not an archive file ({_first_line(exc)})"))
        return
    report.records += facts.records
    for name, held, says in mismatches(m, e, facts, len(data)):
        report.problems.append(Problem("manifest", path, f"{name} is {held} in the file, {where} line {n} "
                                       f"says {says}"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
