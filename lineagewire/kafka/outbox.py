"""The outbox: a bounded folder of encoded messages not yet acknowledged by Kafka, and the publisher in front.

``OutboxPublisher`` writes every message here *before* producing it (through
the one ``Publisher``) and deletes the file when the broker acknowledges it,
so a message survives a broker outage and a process death alike; the next
publisher started with the same folder (the emitter: same application, by
default) delivers what is left, oldest first. The emitter's ``kafka`` listener
is its user: durability there matters more than anywhere else, since a Spark
driver may die at any moment and its events exist nowhere else.

Files are ``<ns-timestamp>-<counter>.evt`` (sorted by creation) and written
atomically (temp file, then rename). The folder is owned by one live process
at a time (an ``flock`` on ``.lock``): a second process of the same
application spools into ``proc-<pid>/`` inside it instead, and whoever next
owns the folder adopts those once their owner is gone.

Bounded by ``max_bytes``: when full, ``put`` returns None and the caller
decides (the publisher still tries to produce the message, unspooled).
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
from typing import Any

from lineagewire.config import Settings
from lineagewire.exceptions import OutboxError, PublishError

from .publisher import Delivery, Publisher

log = logging.getLogger(__name__)

__all__ = ["Outbox", "OutboxEntry", "OutboxPublisher"]

_MAGIC = b"LWO1"
_HEAD = struct.Struct(">4sHI")  # magic, topic length, key length


@dataclass(frozen=True)
class OutboxEntry:
    name: str
    size: int


class Outbox:
    """A bounded spool folder; see the module docstring. Thread-safe."""

    #: fsync each record and the folder before ``put`` returns: for a caller that acknowledges what it spooled
    #: (the OpenLineage receiver's 2xx), so that a host crash right after cannot lose it. The emitter's outbox
    #: does not: it holds a job's events while Kafka is down, and a sync per event would slow the job.
    sync = False

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
            if self.sync:
                _write_synced(tmp, data)
            else:
                tmp.write_bytes(data)
            os.replace(tmp, self.folder / name)
            if self.sync:
                _sync_folder(self.folder)
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
        if len(data) < off + tlen + klen:
            raise OutboxError(f"outbox file {self.folder / entry.name}: {len(data)} bytes; expected at least "
                              f"{off + tlen + klen} for its header")
        topic = data[off:off + tlen].decode()
        key = data[off + tlen:off + tlen + klen]
        return topic, key, data[off + tlen + klen:]

    def quarantine(self, entry: OutboxEntry) -> pathlib.Path:
        """Move a file that is not an outbox record aside (``bad/``), out of the queue; where it went."""
        bad = self.folder / "bad"
        bad.mkdir(exist_ok=True)
        with self._mutex:
            size = self._entries.pop(entry.name, None)
            if size is not None:
                self.bytes -= size
        target = bad / entry.name
        try:
            os.replace(self.folder / entry.name, target)
        except OSError:
            (self.folder / entry.name).unlink(missing_ok=True)
        return target

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


_RESEND_BATCH = 500


class OutboxPublisher:
    """Messages through an ``Outbox`` to Kafka: spooled first, produced, deleted when acknowledged.

    While the broker is unreachable (a delivery failed, the producer's ``message.timeout.ms`` passed) new
    messages only go to the outbox, and a background thread re-sends the folder, oldest first, as soon as
    the broker answers again. Delivery is at-least-once: a message whose acknowledgement was lost (a crash
    between the broker's write and the file's deletion, or a purge at exit) is sent again later.

    ``send`` never blocks on the broker: a full local queue puts the message in the backlog.
    Counters: ``delivered``, ``failed_deliveries``, ``lost`` (not spooled, because the outbox was full,
    and then not delivered either).
    """

    def __init__(self, settings: Settings, outbox: Outbox, *, delivery_timeout: float = 10.0,
                 producer_config: dict[str, Any] | None = None, publisher: Publisher | None = None) -> None:
        self.settings = settings
        self.outbox = outbox
        # A client error (a broker it cannot resolve or reach) is said at once, then a minute later at the soonest:
        # in a job's driver log that is one line for a short job, and the outbox keeps every message meanwhile.
        self._publisher = publisher or Publisher(
            settings, producer_config={"message.timeout.ms": max(1000, int(delivery_timeout * 1000)),
                                       **(producer_config or {})}, queue_full_timeout=0, client_error_interval=60.0)
        self._lock = threading.Lock()
        self._inflight: set[str] = set()
        self._backlog = len(outbox) > 0
        self._next_try = 0.0
        self._backoff = 0.5
        self.failed_deliveries = 0
        self.lost = 0
        # One line per outage, not one per message: a job's driver log keeps the first failure, then the next
        # lines say only what changed (a delivery again, or a message lost).
        self._outage_said = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lineagewire-outbox-delivery", daemon=True)
        self._thread.start()

    @property
    def delivered(self) -> int:
        return self._publisher.delivered

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        """Spool and produce one message (after the older ones, if a backlog is waiting)."""
        entry = self.outbox.put(topic, key, value)
        if entry is None:
            log.warning("outbox %s is full (%d bytes); a message for %s is sent without a spool copy",
                        self.outbox.folder, self.outbox.max_bytes, topic)
        with self._lock:
            if self._backlog and entry is not None:
                return  # the delivery thread sends it after the older ones
            if entry is not None:
                self._inflight.add(entry.name)
        self._produce(entry, topic, key, value)

    def _produce(self, entry: OutboxEntry | None, topic: str, key: bytes, value: bytes) -> None:
        try:
            self._publisher.produce_raw(topic, value, key=key, on_delivery=lambda d: self._acked(entry, d))
        except PublishError as exc:
            log.warning("cannot queue a message for %s[-]: %s; it waits in the outbox", topic, exc)
            self._failed(entry)

    def _failed(self, entry: OutboxEntry | None) -> None:
        with self._lock:
            if entry is not None:
                self._inflight.discard(entry.name)
                self._backlog = True
            else:
                self.lost += 1

    def _acked(self, entry: OutboxEntry | None, d: Delivery) -> None:
        if d.error is None:
            self._backoff = 0.5
            self._outage_said = False
            with self._lock:
                if entry is not None:
                    self._inflight.discard(entry.name)
            if entry is not None:
                self.outbox.remove(entry)
            return
        self.failed_deliveries += 1
        if entry is None:
            log.error("message lost: delivery to %s[%s] failed (%s) and the outbox was full", d.topic, d.partition,
                      d.error.str())
        elif not d.purged:
            level, self._outage_said = (logging.DEBUG if self._outage_said else logging.WARNING), True
            log.log(level, "delivery to %s[%s] failed: %s; the message waits in outbox %s, and so will the next "
                    "ones until the cluster answers (they are sent then, or by the next start)", d.topic, d.partition,
                    d.error.str(), self.outbox.folder)
        self._failed(entry)

    # -- the delivery thread: serves acknowledgements and re-sends the outbox ---------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._publisher.poll(0.1)
                if self._publisher.fatal:
                    log.error("kafka producer for %s hit a fatal error; starting a new one",
                              self.settings.bootstrap_servers)
                    with self._lock:
                        self._inflight.clear()  # whatever the old producer held is still in the outbox
                        self._backlog = True
                    self._publisher.renew()
                if self._backlog and time.monotonic() >= self._next_try:
                    self._resend()
            except Exception:
                log.exception("outbox delivery loop failed; retrying")
                time.sleep(0.5)

    def _resend(self) -> None:
        with self._lock:
            todo = [e for e in self.outbox.pending() if e.name not in self._inflight][:_RESEND_BATCH]
            if not todo:
                if not self._inflight:
                    self._backlog = False
                return
        if not self._publisher.reachable():
            self._next_try = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, 10.0)
            return
        sent = 0
        for entry in todo:
            try:
                topic, key, value = self.outbox.read(entry)
            except OSError:
                self.outbox.remove(entry)  # deleted behind our back; nothing left to send
                continue
            except (OutboxError, struct.error, UnicodeDecodeError) as exc:
                # Not a record this outbox wrote (damaged, or put there by hand): set it aside once, and
                # deliver the rest, instead of failing on it forever.
                where = self.outbox.quarantine(entry)
                log.error("outbox %s: %s is not an outbox record (%s); moved to %s, not sent", self.outbox.folder,
                          entry.name, exc, where)
                continue
            with self._lock:
                self._inflight.add(entry.name)
            self._produce(entry, topic, key, value)
            sent += 1
        log.info("re-sent %d message(s) from outbox %s", sent, self.outbox.folder)
        self._next_try = time.monotonic() + 0.2

    def pending(self) -> int:
        """Messages not yet acknowledged (in the outbox or in flight)."""
        return len(self.outbox)

    def close(self, timeout: float) -> None:
        """Deliver within ``timeout`` seconds what can be; the rest stays in the outbox for the next start."""
        deadline = time.monotonic() + timeout
        if self._outage_said and not self._publisher.reachable(timeout=min(2.0, timeout)):
            # The last delivery failed and the cluster still does not answer: what is left is safe in the outbox,
            # and waiting out the timeout would only delay the exit.
            deadline = time.monotonic()
        while time.monotonic() < deadline and (len(self.outbox) or self._inflight):
            if self._backlog and not self._inflight and self._next_try > deadline:
                break  # the broker is down and the next attempt falls after the budget: stop waiting now
            time.sleep(0.02)
        self._stop.set()
        self._thread.join(timeout=2)
        try:
            self._publisher.flush(max(0.0, min(0.5, deadline - time.monotonic())))
        except PublishError:
            pass  # what did not arrive is in the outbox, and said below
        # Undelivered messages are safe on disk: drop librdkafka's copies so shutdown does not wait for them.
        self._publisher.purge()
        left = len(self.outbox)
        if left:
            log.warning("%d message(s) not acknowledged by %s within %.1fs; they wait in outbox %s for the next "
                        "start", left, self.settings.bootstrap_servers, timeout, self.outbox.folder)
        self.outbox.close()


def _write_synced(path: pathlib.Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _sync_folder(folder: pathlib.Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened, as on Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
