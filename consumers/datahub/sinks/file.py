"""The file sink: JSON arrays of proposals, rolled by size and age, that ``datahub ingest`` (source ``file``) and
``datahub check metadata-file`` read.

The current file is ``path``; it stays a valid JSON array after every event: one record per line, the closing
``]`` rewritten after each append. When it reaches ``roll_bytes`` or ``roll_seconds`` it is fsynced and renamed
``<stem>.<UTC time>.<nnnn><suffix>`` next to it (the names sort in the order written; a complete file, never
written again) and a new ``path`` begins.

Each record carries its event id, its place in the event's records and its job
(``systemMetadata.properties``). A restart reads only the tail of ``path`` (``tail_bytes``, more only when an
event's records reach further back), so it costs the same on day 300 as on day 1:

* a file cut by a crash mid-write is repaired by cutting its tail after the last complete event (the
  incomplete one was never committed, so Kafka delivers it again);
* the event ids in that tail (and in the tail of the newest rolled file) are skipped when Kafka redelivers
  them (everything since the last commit, a few seconds' worth: no duplicates);
* ``unchanged`` is refilled from that tail. Older aspects are written once more after a restart, which
  DataHub takes as the same upsert again.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import pathlib
import time
from typing import TYPE_CHECKING, Any, ClassVar

from lineagewire.exceptions import ConfigError

from ..config import FileSinkConfig
from ..exceptions import EmitError
from ..proposals import Proposal, line, system_json
from . import Sink

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["EVENT_ID_PROPERTY", "JOB_PROPERTY", "RECORD_PROPERTY", "FileSink"]

#: systemMetadata properties the file sink adds, so a restart knows which events are complete in the file
EVENT_ID_PROPERTY = "lineagewire.eventId"
RECORD_PROPERTY = "lineagewire.record"
#: ... and the job (``namespace/name``) of that event, the scope of what ``unchanged`` remembers
JOB_PROPERTY = "lineagewire.job"
_HEAD = b"[\n"
_TAIL = b"\n]\n"
_EMPTY = _HEAD + b"]\n"


class FileSink(Sink):
    """JSON files of proposals; see the module docstring."""

    name: ClassVar[str] = "file"

    def __init__(self, config: FileSinkConfig) -> None:
        self.config = config
        self.path = config.path
        self._fd: int | None = None
        self._end = 0  # the current file's size in bytes: it ends with _TAIL (or is _EMPTY)
        self._records = 0  # records in the current file
        self._opened = 0.0  # monotonic time the current file began (for roll_seconds)
        self._seen: set[str] = set()  # event ids in the current file's tail
        self._rolled: set[str] = set()  # ... and in the newest rolled file's
        self._handled: dict[tuple[str, int], int] = {}
        self._durable: dict[tuple[str, int], int] = {}

    # -- start: the tail only ----------------------------------------------------------------------

    def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists() or self.path.stat().st_size == 0:
                self._replace(_EMPTY)
            self._fd = os.open(self.path, os.O_RDWR)
            records = self._recover()
        except OSError as exc:
            raise ConfigError(f"--file {str(self.path)!r}: cannot write it ({exc}); expected a writable path") from exc
        rolled = self._newest_rolled()
        older = self._tail_records(rolled) if rolled is not None else []
        self._rolled = {r[0] for r in older}
        self._seen = {r[0] for r in records}
        if self.unchanged is not None:
            for _, obj in older + records:
                self.unchanged.seed(obj, obj["systemMetadata"]["properties"].get(JOB_PROPERTY, ""))
        self._opened = time.monotonic()
        log.info("DataHub file sink %s: %d bytes, %d events in its tail", self.path, self._end, len(self._seen))

    def _replace(self, data: bytes) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def _recover(self) -> list[tuple[str, dict[str, Any]]]:
        """The complete events' records in the current file's tail; cuts an incomplete last event (a crash)."""
        assert self._fd is not None  # noqa: S101 - set by open()
        size = os.fstat(self._fd).st_size
        head = os.pread(self._fd, len(_HEAD), 0)
        if head != _HEAD[:len(head)] or len(head) < len(_HEAD):
            raise ConfigError(f"--file {str(self.path)!r} does not begin with the '[' line of the JSON array this "
                              "service writes; expected a file it wrote (or a new path)")
        want = self.config.tail_bytes
        while True:
            start = max(len(_HEAD), size - want)
            chunk = os.pread(self._fd, size - start, start)
            records, keep, total = self._parse(chunk, start, whole=start == len(_HEAD))
            if keep is not None or start == len(_HEAD):
                break
            want *= 2  # the last complete event began before the tail read: read further back
        end = len(_HEAD) if keep is None else keep  # byte after the last complete event's last record
        self._records = total if keep is not None else 0
        self._end = self._close_array(self._fd, end, _TAIL if keep is not None else _EMPTY[len(_HEAD):], size)
        return records

    def _close_array(self, fd: int, end: int, tail: bytes, size: int) -> int:
        """The file's size once ``tail`` closes the JSON array at byte ``end``: whatever a crash left after the
        last complete event is cut (that event comes again from Kafka)."""
        if size == end + len(tail) and os.pread(fd, len(tail), end) == tail:
            return size
        log.warning("DataHub file sink %s was cut mid-write: %d bytes after the last complete event are "
                    "dropped (that event comes again from Kafka)", self.path, size - end)
        os.pwrite(fd, tail, end)
        os.ftruncate(fd, end + len(tail))
        os.fsync(fd)
        return end + len(tail)

    def _parse(self, chunk: bytes, start: int, *, whole: bool
               ) -> tuple[list[tuple[str, dict[str, Any]]], int | None, int]:
        """(event id, record) of each complete event in ``chunk`` (the file from byte ``start``), the byte after
        the last one (None: none complete), and a count of records (exact when ``whole``, else at least 1)."""
        lines = chunk.split(b"\n")
        pos = start
        if not whole:  # the first line is most likely cut: skip it
            pos += len(lines[0]) + 1
            lines = lines[1:]
        out: list[tuple[str, dict[str, Any]]] = []
        event: list[tuple[str, dict[str, Any]]] = []
        keep = None
        count = 0
        for raw in lines:
            end = pos + len(raw)
            pos = end + 1
            text = raw.rstrip(b",")
            if not text or text == b"]":
                continue
            try:
                obj = json.loads(text)
            except ValueError:
                break  # cut mid-write: nothing after it counts
            event_id, last = self._place(obj)
            event.append((event_id, obj))
            if last:
                out += event
                count += len(event)
                event = []
                keep = end - (len(raw) - len(text))  # the record's end, before its separating comma
        return out, keep, count if whole else max(count, 1)

    def _place(self, obj: Any) -> tuple[str, bool]:
        """(event id, whether it is the event's last record) of a record, from the properties this sink wrote in
        its systemMetadata."""
        props = ((obj.get("systemMetadata") or {}).get("properties") or {}) if isinstance(obj, dict) else {}
        if EVENT_ID_PROPERTY not in props or RECORD_PROPERTY not in props:
            raise ConfigError(f"--file {str(self.path)!r} has a record without systemMetadata.properties"
                              f"[{EVENT_ID_PROPERTY!r}]; expected a file this service wrote (or a new path)")
        index, _, total = str(props[RECORD_PROPERTY]).partition("/")
        return props[EVENT_ID_PROPERTY], index == total

    def _newest_rolled(self) -> pathlib.Path | None:
        prefix, suffix = self.path.stem + ".", self.path.suffix
        names = sorted(n for n in os.listdir(self.path.parent or ".")
                       if n.startswith(prefix) and n.endswith(suffix) and n != self.path.name and
                       not n.endswith(".tmp"))
        return self.path.parent / names[-1] if names else None

    def _tail_records(self, path: pathlib.Path) -> list[tuple[str, dict[str, Any]]]:
        try:
            with path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                start = max(len(_HEAD), size - self.config.tail_bytes)
                f.seek(start)
                return self._parse(f.read(), start, whole=start == len(_HEAD))[0]
        except OSError as exc:
            log.warning("DataHub file sink: cannot read the rolled file %s (%s); its events may be written again",
                        path, exc)
            return []

    # -- writing ------------------------------------------------------------------------------------

    def written(self, event_id: str) -> bool:
        return event_id in self._seen or event_id in self._rolled

    def write(self, record: Record, event_id: str, proposals: list[Proposal], scope: str = "") -> int:
        if proposals:
            self._append(event_id, proposals, scope)
            if self._end >= self.config.roll_bytes:
                self._roll()
        self._handled[(record.topic, record.partition)] = record.offset + 1
        return len(proposals)

    def _append(self, event_id: str, proposals: list[Proposal], scope: str) -> None:
        n = len(proposals)
        job = f", {json.dumps(JOB_PROPERTY)}: {json.dumps(scope)}" if scope else ""
        head = f'{{{json.dumps(EVENT_ID_PROPERTY)}: {json.dumps(event_id)}, {json.dumps(RECORD_PROPERTY)}: "'
        system: Any = None
        shown: dict[str, Any] | None = None
        lines = []
        for i, p in enumerate(proposals, 1):
            if p.systemMetadata is not system:  # the translator shares one per event time
                system, shown = p.systemMetadata, system_json(p.systemMetadata)
            lines.append(line(p, shown, f'{head}{i}/{n}"{job}}}'))
        body = ",\n".join(lines).encode()
        # One positioned write over the closing tail, straight to the OS (a crash of this process loses nothing);
        # fsync'ed by sync() before a commit.
        if self._records:
            data, at = b",\n" + body + _TAIL, self._end - len(_TAIL)
        else:
            data, at = _HEAD + body + _TAIL, 0
        try:
            done = 0
            while done < len(data):
                done += os.pwrite(self._fd, data[done:], at + done)  # type: ignore[arg-type]
            if at + done < self._end:
                os.ftruncate(self._fd, at + done)  # type: ignore[arg-type]
        except OSError as exc:
            raise EmitError(f"DataHub file sink {self.path}: cannot write {n} proposals of event {event_id}: "
                            f"{exc}") from exc
        self._end = at + done
        self._records += n
        self._seen.add(event_id)

    def _roll(self) -> None:
        """Close the current file as a rolled one and begin a new ``path`` (both fsynced first)."""
        self.sync()
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
        n = 0
        while True:
            target = self.path.with_name(f"{self.path.stem}.{stamp}.{n:04d}{self.path.suffix}")
            if not target.exists():
                break
            n += 1
        try:
            os.close(self._fd)  # type: ignore[arg-type]
            self._fd = None
            os.replace(self.path, target)
            self._replace(_EMPTY)
            self._fd = os.open(self.path, os.O_RDWR)
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)  # the rename and the new file survive a power loss
            finally:
                os.close(dfd)
        except OSError as exc:
            raise EmitError(f"DataHub file sink {self.path}: cannot roll it to {target.name}: {exc}") from exc
        log.info("DataHub file sink: rolled %d records (%d bytes) to %s", self._records, self._end, target)
        self._end, self._records, self._opened = len(_EMPTY), 0, time.monotonic()
        # Redeliveries (a rebalance) come from the last few seconds: the rolled file's ids are kept until the next
        # roll, as a restart keeps those of the newest rolled file's tail.
        self._rolled, self._seen = self._seen, set()

    def poll(self) -> int:
        if self._records and time.monotonic() - self._opened >= self.config.roll_seconds:
            self._roll()
        return 0

    def sync(self) -> None:
        handled = dict(self._handled)
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise EmitError(f"DataHub file sink {self.path}: fsync failed: {exc}") from exc
        self._durable.update(handled)

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        return dict(self._durable)

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        self.sync()

    def close(self) -> None:
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None
