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
import threading
from collections.abc import Sequence
from dataclasses import dataclass
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

__all__ = ["Carried", "DeliveringSink", "for_emitter"]

#: what a proposal's envelope adds to its aspect's JSON in a request (URN, names, systemMetadata), roughly
_ENVELOPE = 400


@dataclass(slots=True, eq=False)
class Carried:
    """One output of a record on the ``InFlight`` lanes: a proposal to send (None when the record's every proposal
    was skipped as unchanged) and the proposals of the record skipped as unchanged, which ride on it.

    A skipped proposal is identical to one an earlier record of the job carried. Should the output refuse
    anything after this record was handed (``refusals`` is the sink's count of refusals then), that earlier
    record may be the one refused and dead-lettered: the skipped proposals are then sent with this record, so
    that confirming it means its aspects reached the output."""

    proposal: Proposal | None
    skipped: Sequence[Proposal] = ()
    refusals: int = 0


def _size(c: Carried) -> int:
    p = c.proposal
    if p is None:
        return _ENVELOPE
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
        self._inflight: InFlight[Carried] | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._refusals = 0  # batches the output refused, and give-ups: each may have dropped a record's proposals
        self._forgotten = 0  # the value of _refusals when the skip memory was last forgotten

    def send(self, batch: list[Proposal]) -> None:
        raise NotImplementedError

    def _refused(self) -> None:
        with self._lock:
            self._refusals += 1

    def _send(self, outputs: list[Carried]) -> None:
        refusals = self._refusals
        batch: list[Proposal] = []
        for c in outputs:
            if c.skipped and c.refusals != refusals:
                batch.extend(c.skipped)  # what they were skipped against may have been refused: send them
            if c.proposal is not None:
                batch.append(c.proposal)
        if not batch:
            return  # records whose every proposal was skipped, with nothing refused since
        try:
            self.send(batch)
        except PermanentError:
            self._refused()
            raise
        except EmitError:
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
    def inflight(self) -> InFlight[Carried]:
        if self._inflight is None:
            raise RuntimeError(f"{self.output}: the sink is used before open()")
        return self._inflight

    def emit(self, record: Record, event_id: str, proposals: list[Proposal], scope: str = "") -> int:
        """Hand the record's proposals to ``InFlight``; those skipped as unchanged ride along (``Carried``)."""
        unchanged = self.unchanged
        refusals = self._refusals
        if unchanged is None:
            return self.write(record, event_id, proposals, scope)
        if refusals != self._forgotten:
            # A refusal or give-up since the memory was last forgotten (every rejection comes with one): what it
            # remembers as taken may have been dropped unsent.
            unchanged.forget()
            self._forgotten = refusals
        fresh, marks = unchanged.select(proposals, scope)
        outputs = [Carried(p, (), refusals) for p in fresh]
        if len(fresh) != len(proposals):
            taken = {id(p) for p in fresh}
            skipped = [p for p in proposals if id(p) not in taken]
            if outputs:
                outputs[0].skipped = skipped
            else:
                outputs = [Carried(None, skipped, refusals)]
        written = self._submit(record, outputs)
        unchanged.commit(marks)
        return written

    def write(self, record: Record, event_id: str, proposals: list[Proposal], scope: str = "") -> int:
        return self._submit(record, [Carried(p) for p in proposals])

    def _submit(self, record: Record, outputs: list[Carried]) -> int:
        try:
            self.inflight.submit(record, outputs)
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
        # Their proposals were remembered as taken when handed over: ``emit`` forgets the memory after the refusal
        # that rejected them, and records handed meanwhile send what they skipped (``Carried``).
        return self.inflight.rejected() if self._inflight is not None else []

    def give_up(self, since: float) -> bool:
        # Counted before the lanes go on: a record behind the ones given up sends what it skipped.
        self._refused()
        return self._inflight is not None and self._inflight.give_up(since)

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        if self._closed:
            return  # the consumer's own close revokes after ours: nothing is sent any more
        self.inflight.revoke(partitions)
        if self.unchanged is not None:
            self._forgotten = self._refusals
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
