"""A sink that delivers through the runtime's ``InFlight``: batches of proposals, several in flight, in order per job.

``write`` hands an event's proposals to ``InFlight`` and returns at once. ``InFlight`` puts them on the lane
of the record's key (the Kafka key: its job), fills batches of up to ``max_batch`` proposals and
``max_batch_bytes`` (waiting up to ``linger`` s), sends each with ``send`` (acryl-datahub's emitter, on a
worker thread), one batch at a time per lane and ``lanes`` at once, and reports per partition the lowest
offset whose proposals are not all confirmed: the runtime commits only below it. A batch that fails is sent
again whole (proposals are idempotent upserts) from ``poll`` (``batch_done``/``tick``), which raises
``EmitError`` while it keeps failing: the runtime's retry loop pauses the partitions and backs off. A batch
``send`` refuses for good (``RefusedError``) is sent again record by record by ``InFlight``; the records
refused are dead-lettered by the runtime (``rejected``), and the lane goes on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

from datahub.metadata.schema_classes import SystemMetadataClass

from lineagewire.consumers.runtime.exceptions import OutputError, PermanentError
from lineagewire.consumers.runtime.inflight import InFlight, Rejected, blocking

from ..config import DeliveryConfig
from ..exceptions import EmitError
from ..proposals import Proposal
from . import Sink

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["DeliveringSink", "for_emitter"]

#: what a proposal's envelope adds to its aspect's JSON in a request (URN, names, systemMetadata), roughly
_ENVELOPE = 400


def _size(p: Proposal) -> int:
    a = p.aspect
    return _ENVELOPE + (len(a.value) if a is not None else 0) + len(p.entityUrn or "")


def for_emitter(batch: list[Proposal]) -> list[Proposal]:
    """Copies of the proposals an emitter may change: acryl-datahub's emitters stamp systemMetadata (client id
    and version) in place, and the translator shares one per event time with the other sinks. One copy per
    distinct systemMetadata of the batch; the aspects are shared (never changed)."""
    copies: dict[int, SystemMetadataClass] = {}  # local to this batch: the objects are alive while it runs
    out = []
    for p in batch:
        sm = p.systemMetadata
        if sm is not None:
            c = copies.get(id(sm))
            if c is None:
                c = copies[id(sm)] = SystemMetadataClass.from_obj(sm.to_obj())
            sm = c
        out.append(type(p)(entityType=p.entityType, entityUrn=p.entityUrn, entityKeyAspect=p.entityKeyAspect,
                           changeType=p.changeType, auditHeader=p.auditHeader, aspectName=p.aspectName,
                           aspect=p.aspect, systemMetadata=sm, headers=p.headers))
    return out


class DeliveringSink(Sink):
    """Base of the REST and Kafka sinks: ``send(batch)`` delivers a batch synchronously or raises."""

    name: ClassVar[str] = "delivering"
    #: shown in errors, e.g. "DataHub GMS http://..."
    output: str = "DataHub"

    def __init__(self, config: DeliveryConfig) -> None:
        self.delivery = config
        self._inflight: InFlight[Proposal] | None = None
        self._closed = False

    def send(self, batch: list[Proposal]) -> None:
        raise NotImplementedError

    def _send(self, batch: list[Proposal]) -> None:
        try:
            self.send(batch)
        except (EmitError, PermanentError):
            raise
        except Exception as exc:  # noqa: BLE001 - any emitter failure means the output did not take the batch
            raise EmitError(f"{self.output}: a batch of {len(batch)} proposals (first {batch[0].entityUrn} "
                            f"{batch[0].aspectName}) not accepted: {type(exc).__name__}: {str(exc)[:500]}") from exc

    def open(self) -> None:
        c = self.delivery
        self._inflight = InFlight(blocking(self._send), lanes=c.lanes, max_pending=c.max_pending,
                                  max_batch=c.max_batch, max_batch_bytes=c.max_batch_bytes, size=_size,
                                  linger=c.linger, name=self.output).start()

    @property
    def inflight(self) -> InFlight[Proposal]:
        if self._inflight is None:
            raise RuntimeError(f"{self.output}: the sink is used before open()")
        return self._inflight

    def write(self, record: Record, event_id: str, proposals: list[Proposal], scope: str = "") -> int:
        try:
            self.inflight.submit(record, proposals)
        except OutputError as exc:
            raise _emit_error(exc) from exc
        return 0

    def poll(self) -> int:
        try:
            return self.inflight.check()
        except OutputError as exc:
            raise _emit_error(exc) from exc

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        return self.inflight.durable_offsets()

    def rejected(self) -> list[Rejected]:
        out = self.inflight.rejected() if self._inflight is not None else []
        if out and self.unchanged is not None:
            # Their proposals were remembered as taken when handed over, and never reached the output: forget, so
            # that a later identical aspect is sent rather than skipped.
            self.unchanged.forget()
        return out

    def give_up(self, since: float) -> bool:
        return self._inflight is not None and self._inflight.give_up(since)

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        if self._closed:
            return  # the consumer's own close revokes after ours: nothing is sent any more
        self.inflight.revoke(partitions)
        if self.unchanged is not None:
            # What was dropped unsent is remembered as taken: forget it all, so that nothing is skipped that the
            # backend may not have (costs a re-emit of each aspect once).
            self.unchanged.forget()

    def close(self) -> None:
        # What is not confirmed stays pending: durable_offsets keeps answering for the final commit.
        self._closed = True
        if self._inflight is not None:
            self._inflight.close()


def _emit_error(exc: OutputError) -> EmitError:
    return exc if isinstance(exc, EmitError) else EmitError(str(exc))
