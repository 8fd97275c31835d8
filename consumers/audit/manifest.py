"""Tamper evidence for the archive: a hash-chained manifest per topic partition, and ``verify``.

Each closed data file gets one manifest line (JSON): its path, offsets, record
count, size, SHA-256 and ``chain`` = SHA-256(previous chain, file hash, path)
(``layout.chain_hash``). Changing a byte of a file changes its hash; deleting
it leaves a listed path missing; swapping two files puts a listed hash under
the other path; editing, dropping or reordering manifest lines breaks the
chain. The last chain hash of each partition is a short fingerprint of its
whole history: copy it elsewhere (a ticket, a log) to pin that history.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .layout import GENESIS, MANIFEST_DIR, chain_hash, manifest_path
from .storage import Storage

__all__ = ["Manifest", "Problem", "VerifyReport", "load_manifests", "verify"]

_CHUNK = 1 << 20


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
        """The last archived offset, -1 when nothing is archived yet."""
        return int(self.entries[-1]["last_offset"]) if self.entries else -1

    def append(self, *, file: str, sha256: str, first_offset: int, last_offset: int, records: int, size: int,
               min_timestamp_ms: int, max_timestamp_ms: int) -> dict[str, Any]:
        entry = {"file": file, "first_offset": first_offset, "last_offset": last_offset, "records": records,
                 "bytes": size, "min_timestamp_ms": min_timestamp_ms, "max_timestamp_ms": max_timestamp_ms,
                 "sha256": sha256, "chain": chain_hash(self.head, sha256, file)}
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

    @classmethod
    def load(cls, storage: Storage, topic: str, partition: int) -> Manifest:
        data = storage.get(manifest_path(topic, partition))
        return cls(topic, partition, _parse(data or b"", manifest_path(topic, partition)))


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


def load_manifests(storage: Storage, topic: str | None = None) -> list[Manifest]:
    """Every manifest of the archive (of ``topic`` only, when given)."""
    out = []
    for rel in storage.glob(f"{MANIFEST_DIR}/*.jsonl"):
        name = rel.rsplit("/", 1)[1][: -len(".jsonl")]
        t, _, p = name.rpartition("+")
        if not p.isdigit() or (topic is not None and t != topic):
            continue
        out.append(Manifest.load(storage, t, int(p)))
    return sorted(out, key=lambda m: (m.topic, m.partition))


@dataclass(frozen=True)
class Problem:
    """One finding of ``verify``: ``kind`` is changed, missing, reordered, chain or unlisted."""

    kind: str
    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.path}: {self.detail}"


@dataclass
class VerifyReport:
    files: int = 0
    bytes: int = 0
    records: int = 0
    heads: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _sha256(storage: Storage, rel: str) -> tuple[str, int] | None:
    h = hashlib.sha256()
    size = 0
    try:
        with storage.open(rel) as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                size += len(chunk)
    except FileNotFoundError:
        return None
    return h.hexdigest(), size


def verify(storage: Storage) -> VerifyReport:
    """Re-read every file of the archive and check it against the manifests' hash chains."""
    report = VerifyReport()
    listed: set[str] = set()
    for problem_manifest in storage.glob(f"{MANIFEST_DIR}/*.jsonl"):
        try:
            _parse(storage.get(problem_manifest) or b"", problem_manifest)
        except ValueError as exc:
            report.problems.append(Problem("chain", problem_manifest, str(exc)))
    for m in load_manifests(storage):
        where = m.rel
        by_hash = {e["sha256"]: e["file"] for e in m.entries}
        previous, prev_last = GENESIS, -1
        for n, e in enumerate(m.entries, 1):
            path = e["file"]
            listed.add(path)
            if e.get("chain") != chain_hash(previous, e["sha256"], path):
                report.problems.append(Problem("chain", where, f"line {n} ({path}): chain hash does not follow "
                                               "from the line before; the manifest was edited or reordered"))
            if int(e["first_offset"]) <= prev_last:
                report.problems.append(Problem("reordered", path, f"{where} line {n}: first offset "
                                               f"{e['first_offset']} is not after the previous file's last offset "
                                               f"{prev_last}"))
            previous, prev_last = e.get("chain", ""), int(e["last_offset"])
            found = _sha256(storage, path)
            if found is None:
                report.problems.append(Problem("missing", path, f"listed in {where} line {n} (offsets "
                                               f"{e['first_offset']}..{e['last_offset']}) but not found"))
                continue
            digest, size = found
            report.files += 1
            report.bytes += size
            report.records += int(e["records"])
            if digest == e["sha256"]:
                continue
            other = by_hash.get(digest)
            if other is not None and other != path:
                report.problems.append(Problem("reordered", path, f"holds the content listed for {other} "
                                               "(files swapped or moved)"))
            else:
                report.problems.append(Problem("changed", path, f"SHA-256 is {digest}, {where} line {n} says "
                                               f"{e['sha256']}"))
        report.heads[f"{m.topic}[{m.partition}]"] = previous
    for path in storage.glob("topic=*/date=*/hour=*/*.parquet"):
        if path not in listed:
            report.problems.append(Problem("unlisted", path, "in no manifest (written after the last manifest "
                                           "update, e.g. by a crashed archiver, or added by hand)"))
    return report
