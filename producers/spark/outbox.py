"""The outbox: a bounded folder of encoded events not yet acknowledged by Kafka.

The Kafka listener writes every event here *before* producing it and deletes
the file when the broker acknowledges it, so an event survives a broker outage
and a process death alike; the next emitter started with the same folder
(same application, by default) delivers what is left, oldest first.

Files are ``<ns-timestamp>-<counter>.evt`` (sorted by creation) and written
atomically (temp file, then rename). The folder is owned by one live process
at a time (an ``flock`` on ``.lock``): a second process of the same
application spools into ``proc-<pid>/`` inside it instead, and whoever next
owns the folder adopts those once their owner is gone.

Bounded by ``max_bytes``: when full, ``put`` returns None and the caller
decides (the Kafka listener still tries to produce the event, unspooled).
"""

from __future__ import annotations

import fcntl
import logging
import os
import pathlib
import struct
import threading
import time
from dataclasses import dataclass

from .exceptions import OutboxError

log = logging.getLogger(__name__)

__all__ = ["Outbox", "OutboxEntry"]

_MAGIC = b"LWO1"
_HEAD = struct.Struct(">4sHI")  # magic, topic length, key length


@dataclass(frozen=True)
class OutboxEntry:
    name: str
    size: int


class Outbox:
    """A bounded spool folder; see the module docstring. Thread-safe."""

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int = 64 << 20) -> None:
        base = pathlib.Path(folder)
        try:
            base.mkdir(parents=True, exist_ok=True)
            self._lock_file = self._try_lock(base)
            if self._lock_file is None:
                own = base / f"proc-{os.getpid()}"
                own.mkdir(exist_ok=True)
                self._lock_file = self._try_lock(own)
                if self._lock_file is None:
                    raise OutboxError(f"outbox folder {own} is locked by another process; expected it free")
                self.folder = own
            else:
                self.folder = base
                self._adopt(base)
        except OSError as exc:
            raise OutboxError(f"outbox folder {base}: {exc}; expected a writable folder "
                              "(set spark.lineagewire.outbox_dir)") from exc
        self.max_bytes = max_bytes
        self._mutex = threading.Lock()
        self._counter = 0
        self._entries: dict[str, int] = {}
        for path in sorted(self.folder.glob("*.evt")):
            self._entries[path.name] = path.stat().st_size
        for stale in self.folder.glob("*.tmp"):
            stale.unlink(missing_ok=True)  # a write interrupted by a crash, never acknowledged by anyone
        self.bytes = sum(self._entries.values())
        self.rejected = 0
        if self._entries:
            log.info("outbox %s holds %d event(s) from an earlier run; delivering them first", self.folder,
                     len(self._entries))

    @staticmethod
    def _try_lock(folder: pathlib.Path):  # noqa: ANN205 - an open file or None
        f = (folder / ".lock").open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return None
        return f

    def _adopt(self, base: pathlib.Path) -> None:
        # Spools of processes that shared this folder and are gone now: take their events over.
        for sub in sorted(base.glob("proc-*")):
            lock = self._try_lock(sub)
            if lock is None:
                continue
            try:
                for path in sorted(sub.glob("*.evt")):
                    path.rename(base / path.name)
                for leftover in sub.iterdir():
                    leftover.unlink(missing_ok=True)
            finally:
                lock.close()
            sub.rmdir()

    def put(self, topic: str, key: bytes, value: bytes) -> OutboxEntry | None:
        """Spool one record; None if it would exceed ``max_bytes`` (nothing written)."""
        t = topic.encode()
        data = _HEAD.pack(_MAGIC, len(t), len(key)) + t + key + value
        with self._mutex:
            if self.bytes + len(data) > self.max_bytes:
                self.rejected += 1
                return None
            self._counter += 1
            name = f"{time.time_ns():020d}-{os.getpid()}-{self._counter:08d}.evt"
            self.bytes += len(data)
            self._entries[name] = len(data)
        tmp = self.folder / (name + ".tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, self.folder / name)
        except OSError:
            with self._mutex:
                self._entries.pop(name, None)
                self.bytes -= len(data)
            log.warning("outbox %s: cannot write %s", self.folder, name, exc_info=True)
            return None
        return OutboxEntry(name, len(data))

    def read(self, entry: OutboxEntry) -> tuple[str, bytes, bytes]:
        """(topic, key, value) of a spooled record."""
        data = (self.folder / entry.name).read_bytes()
        magic, tlen, klen = _HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise OutboxError(f"outbox file {self.folder / entry.name}: magic {magic!r}; expected {_MAGIC!r}")
        off = _HEAD.size
        topic = data[off:off + tlen].decode()
        key = data[off + tlen:off + tlen + klen]
        return topic, key, data[off + tlen + klen:]

    def remove(self, entry: OutboxEntry) -> None:
        with self._mutex:
            size = self._entries.pop(entry.name, None)
            if size is None:
                return
            self.bytes -= size
        (self.folder / entry.name).unlink(missing_ok=True)

    def pending(self) -> list[OutboxEntry]:
        """Spooled records, oldest first."""
        with self._mutex:
            return [OutboxEntry(n, s) for n, s in sorted(self._entries.items())]

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
