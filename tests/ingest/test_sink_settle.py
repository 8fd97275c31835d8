"""What the receiver answers when Kafka refuses some of a request's messages for good and fails others for now:
the temporary failures are kept (outbox, on disk) before the 413 goes out, since a producer does not retry a 4xx."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.publisher import Outgoing
from lineagewire.producers.ingest.http_errors import IngestRejected
from lineagewire.producers.ingest.sink import DurableSink, StrictOutbox, _Batch


class Report:
    """A delivery report as the sink reads it: its error and whether resending can help."""

    def __init__(self, permanent: bool) -> None:
        self.error = "MSG_SIZE_TOO_LARGE" if permanent else "_MSG_TIMED_OUT"
        self.permanent = permanent


def test_a_request_refused_in_part_keeps_the_rest_before_answering_413(tmp_path: pathlib.Path) -> None:
    # a cluster nobody listens on: nothing is sent, the outbox is what counts
    sink = DurableSink(Settings(bootstrap_servers="127.0.0.1:9"), StrictOutbox(tmp_path / "outbox"),
                       ack_timeout=1.0)
    loop = asyncio.new_event_loop()
    try:
        messages = [Outgoing("lineage.jobs", b"too big", key="a"), Outgoing("lineage.jobs", b"for later", key="b")]
        batch = _Batch(messages, loop)
        batch.failed = [(0, Report(permanent=True)), (1, Report(permanent=False))]  # type: ignore[list-item]
        batch.remaining = 0
        sink._settle(batch)
        with pytest.raises(IngestRejected) as refused:
            batch.future.result()
        assert refused.value.status == 413 and "the others were stored" in str(refused.value)
        stored = [p.read_bytes() for p in (tmp_path / "outbox").rglob("*.evt")]
        assert len(stored) == 1 and stored[0].endswith(b"for later")
    finally:
        sink.close(1.0)
        loop.close()
