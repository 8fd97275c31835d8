"""Where proposals go: JSON files, DataHub GMS over REST, or DataHub's Kafka MCP topic.

Contract of a ``Sink``
----------------------
* ``check()`` may run before ``open()`` to refuse a wrong setting at once (a server that is not GMS).
* ``open()`` once before the first event, ``close()`` once at shutdown (deliver or flush what it holds).
* ``emit(record, event_id, proposals, scope)`` is what the handler calls for every record, in offset order per
  partition (``scope``: the event's job; ``proposals`` may be empty). It hands ``write`` the proposals whose
  aspect differs from the one this sink last took for the same URN in the same job (``unchanged``, when set)
  and remembers them; it returns how many it wrote at once (a sink that delivers later counts them in
  ``poll``).
* ``write(record, event_id, proposals, scope)``: a synchronous sink (the file) writes them before it returns
  and makes them durable by the next ``sync()``; a delivering sink (REST, Kafka) hands them to its
  ``InFlight`` and returns: they are sent in batches, several at once, in order per job.
  Failures raise ``EmitError`` (an ``OutputError``); the runtime retries with backoff. A batch the output
  refuses for good (``RefusedError``, a ``PermanentError``) is sent again record by record, and the records
  it refuses are handed to the runtime by ``rejected()`` for the dead-letter topic.
* ``poll()``: from ``batch_done`` and ``tick``: sends batches that failed again and raises ``EmitError`` if one
  fails again (the runtime's retry owns the backoff); returns how many proposals were confirmed since.
* ``rejected()`` / ``give_up(since)``: the handler's hooks of the same names (``Handler``), from the sink's
  ``InFlight``; a synchronous sink has nothing to hand over.
* ``durable_offsets()``: per partition, the offset below which everything handed is durable (the file: fsynced;
  the others: confirmed by the backend); None: everything handed is.
* ``written(event_id)``: True when the sink already holds this event's proposals (the file after a restart);
  the handler then does not hand it the event again.
* ``sync()`` makes what was written durable (the file); ``on_revoke(partitions)`` settles what is held for them.

Sinks are registered by name in ``SINKS``; the order there is the order they are written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..proposals import Proposal
from ..unchanged import Unchanged

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.inflight import Rejected
    from lineagewire.consumers.runtime.record import Record

__all__ = ["SINKS", "Sink"]


class Sink:
    """Base class of outputs; see the module docstring for the contract."""

    name: ClassVar[str] = "sink"
    #: skips aspects identical to the last one this sink took for their URN; None: write everything
    unchanged: Unchanged | None = None

    def emit(self, record: Record, event_id: str, proposals: list[Proposal], scope: str = "") -> int:
        """Write what changed (see the module docstring); the number of proposals written at once."""
        if self.unchanged is None:
            return self.write(record, event_id, proposals, scope)
        fresh, marks = self.unchanged.select(proposals, scope)
        written = self.write(record, event_id, fresh, scope)
        self.unchanged.commit(marks)
        return written

    def check(self) -> None:
        """Refuse settings that can never work (``ConfigError``); an output that is merely down passes."""

    def open(self) -> None:
        """Acquire the output."""

    def written(self, event_id: str) -> bool:
        return False

    def write(self, record: Record, event_id: str, proposals: list[Proposal], scope: str = "") -> int:
        raise NotImplementedError

    def poll(self) -> int:
        return 0

    def durable_offsets(self) -> dict[tuple[str, int], int] | None:
        return None

    def rejected(self) -> list[Rejected]:
        return []

    def give_up(self, since: float) -> bool:
        return False

    def sync(self) -> None:
        """Make what was written durable."""

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        """Those partitions went to another member."""

    def close(self) -> None:
        """Deliver or flush what is held, and release the output."""


def _registry() -> dict[str, type[Sink]]:
    from .file import FileSink
    from .kafka import KafkaSink
    from .rest import RestSink

    return {"file": FileSink, "rest": RestSink, "kafka": KafkaSink}


#: sink name -> class, in the order they are written
SINKS: dict[str, type[Sink]] = _registry()
