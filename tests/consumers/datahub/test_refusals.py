"""A delivering sink's refusals and skipped-as-unchanged aspects (unit tests: a fake output behind the real
``InFlight`` lanes; the real-GMS refusal tests are in test_service.py).

A record skips an aspect identical to one an earlier record of its job carried. If the output then refuses
that earlier record (dead-lettered), the later record must still bring the aspect: confirming it means its
aspects reached the output.
"""

from __future__ import annotations

import pytest
from datahub.metadata.schema_classes import ChangeTypeClass, GenericAspectClass
from datahub.metadata.schema_classes import MetadataChangeProposalClass as MCP

from lineagewire.consumers.datahub.config import DeliveryConfig
from lineagewire.consumers.datahub.exceptions import RefusedError
from lineagewire.consumers.datahub.handler import DataHubHandler
from lineagewire.consumers.datahub.sinks.delivery import DeliveringSink
from lineagewire.consumers.datahub.unchanged import Unchanged
from lineagewire.consumers.runtime import Record
from lineagewire.consumers.runtime.exceptions import OutputError

URN = "urn:li:dataJob:(urn:li:dataFlow:(spark,app,prod),job)"


def rec(offset: int) -> Record:
    return Record("t", 0, offset, "job", 0, None)


def proposal(aspect: str, value: str) -> MCP:
    return MCP(entityType="dataJob", entityUrn=URN, changeType=ChangeTypeClass.UPSERT, aspectName=aspect,
               aspect=GenericAspectClass(value=value, contentType="application/json"))


class Output(DeliveringSink):
    """Refuses a batch with a proposal whose value says "bad"; ``down``: fails like an outage."""

    def __init__(self, max_batch: int = 200, linger: float = 0.05) -> None:
        super().__init__(DeliveryConfig(lanes=1, linger=linger, max_batch=max_batch))
        self.got: list[tuple[str, str]] = []
        self.down = False
        self.unchanged = Unchanged(1000)

    def send(self, batch: list[MCP]) -> None:
        if self.down:
            raise OSError("connection refused")
        if any("bad" in p.aspect.value for p in batch):
            raise RefusedError(f"400: {len(batch)} proposals invalid")
        self.got += [(p.aspectName, p.aspect.value) for p in batch]


def test_an_aspect_skipped_against_a_refused_record_is_sent_with_the_later_record() -> None:
    out = Output()
    out.open()
    try:
        out.emit(rec(0), "e0", [proposal("dataJobInfo", '{"name":"A"}'),
                                               proposal("status", '{"bad":1}')], "job")
        out.emit(rec(1), "e1", [proposal("dataJobInfo", '{"name":"A"}'),
                                               proposal("ownership", '{"x":1}')], "job")
        assert out.inflight.flush(10)
        rejected = out.rejected()
        assert [r.record.offset for r in rejected] == [0]
        for r in rejected:
            r.settle()
        assert ("dataJobInfo", '{"name":"A"}') in out.got and ("ownership", '{"x":1}') in out.got
        assert dict(out.durable_offsets()) == {}
    finally:
        out.close()


def test_an_aspect_skipped_against_a_record_given_up_is_sent_with_the_later_record() -> None:
    # A batch per proposal: record 1 waits behind record 0's failed batch. A linger of 1 s: record 1 must be handed
    # while record 0's batch still lingers, which 50 ms did not always allow on a loaded machine.
    out = Output(max_batch=1, linger=1.0)
    out.open()
    try:
        out.down = True
        out.emit(rec(0), "e0", [proposal("dataJobInfo", '{"name":"A"}')], "job")
        # handed before the linger ends; skips A, which the memory has as taken by record 0
        out.emit(rec(1), "e1", [proposal("dataJobInfo", '{"name":"A"}'),
                                               proposal("ownership", '{"x":1}')], "job")
        with pytest.raises(OutputError):
            out.inflight.flush(10)  # record 0's batch failed: the lane stops there
        out.down = False
        assert out.give_up(float("inf"))
        rejected = out.rejected()
        assert [r.record.offset for r in rejected] == [0]
        rejected[0].settle()
        assert out.inflight.flush(10)
        assert out.got == [("dataJobInfo", '{"name":"A"}'), ("ownership", '{"x":1}')]
        assert dict(out.durable_offsets()) == {}
    finally:
        out.close()


def test_a_skip_with_nothing_refused_sends_nothing_more() -> None:
    out = Output()
    out.open()
    try:
        out.emit(rec(0), "e0", [proposal("dataJobInfo", '{"name":"A"}')], "job")
        out.emit(rec(1), "e1", [proposal("dataJobInfo", '{"name":"A"}')], "job")  # all skipped
        assert out.inflight.flush(10)
        assert out.got == [("dataJobInfo", '{"name":"A"}')]
        assert dict(out.durable_offsets()) == {}
    finally:
        out.close()


def test_a_record_two_sinks_reject_gets_one_dead_letter() -> None:
    rest, kafka = Output(), Output()
    handler = DataHubHandler(sinks=[rest, kafka])
    for sink in (rest, kafka):
        sink.open()
    try:
        for sink in (rest, kafka):
            sink.emit(rec(7), "e7", [proposal("status", '{"bad":1}')], "job")
            assert sink.inflight.flush(10)
        rejected = handler.rejected()
        assert [r.record.offset for r in rejected] == [7]
        rejected[0].settle()  # settles it in both sinks
        assert dict(rest.durable_offsets()) == {} and dict(kafka.durable_offsets()) == {}
        # the same record rejected again later by one sink (after a re-hand): settled, not dead-lettered twice
        rest.emit(rec(7), "e7", [proposal("status", '{"bad":1}')], "job")
        assert rest.inflight.flush(10)
        assert handler.rejected() == []
        assert dict(rest.durable_offsets()) == {}
    finally:
        for sink in (rest, kafka):
            sink.close()
