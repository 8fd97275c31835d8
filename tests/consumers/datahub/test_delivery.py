"""The delivering sinks with a fake emitter (the real broker and GMS stand-in are in test_service): nothing is
committable before the output confirmed it, and a failed batch is sent again whole."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lineagewire.consumers.datahub.config import load_config
from lineagewire.consumers.datahub.exceptions import EmitError
from lineagewire.consumers.datahub.handler import DataHubHandler
from lineagewire.consumers.datahub.sinks.file import FileSink
from lineagewire.consumers.datahub.sinks.kafka import KafkaSink
from lineagewire.consumers.runtime.record import Record
from lineagewire.schemas import job_key
from tests.consumers.openlineage.samples import app_run
from tests.helpers import wait_for


class FakeProducer:
    def __init__(self, emitter: FakeKafkaEmitter) -> None:
        self.emitter = emitter

    def flush(self, timeout: float | None = None) -> int:
        e = self.emitter
        assert e.gate.wait(30)
        batch, e.queued = e.queued, []
        e.flushed.append(([(p.entityUrn, p.aspectName) for p, _ in batch], e.error is None))
        for p, callback in batch:
            callback(e.error, None)
            if e.error is None:
                e.delivered.append(p)
        return 0


class FakeKafkaEmitter:
    """acryl-datahub's DatahubKafkaEmitter as the sink uses it (``emit(mcp, callback)``, ``producers``, ``flush``);
    a flush waits for ``gate``, then reports ``error`` (None: delivered) for each message."""

    def __init__(self) -> None:
        self.queued: list[tuple[Any, Any]] = []
        self.delivered: list[Any] = []
        self.flushed: list[tuple[list[tuple[str, str]], bool]] = []
        self.error: str | None = None
        self.gate = threading.Event()
        self.producers = {"mcp": FakeProducer(self)}

    def emit(self, item: Any, callback: Any) -> None:
        self.queued.append((item, callback))

    def flush(self) -> None:
        self.gate.set()
        self.producers["mcp"].flush()


def _raises(fn: Any) -> bool:
    try:
        fn()
    except EmitError:
        return True
    return False


def _handler(emitter: FakeKafkaEmitter, tmp: str | None = None) -> DataHubHandler:
    cfg = load_config(kafka={"schema_registry_url": "http://registry.invalid", "max_batch": 5, "linger": 0},
                      file={"path": f"{tmp}/out.json"} if tmp else None)
    sinks: list[Any] = [FileSink(cfg.sinks.file)] if cfg.sinks.file is not None else []
    sinks.append(KafkaSink(cfg.sinks.kafka, "127.0.0.1:9", emitter=emitter))  # type: ignore[arg-type]
    h = DataHubHandler(cfg, sinks)
    h.open()
    return h


def test_kafka_sink_commits_only_what_the_broker_confirmed_and_resends_a_failed_batch_whole() -> None:
    emitter = FakeKafkaEmitter()
    h = _handler(emitter)
    events = app_run(actions=1)
    for off, e in enumerate(events):
        h.handle(Record("t", 0, off, job_key(e), 0, e))
    assert h.durable_offsets() == {("t", 0): 0}  # produced, not yet confirmed by the broker
    emitter.error = "Broker: Not enough in-sync replicas"
    emitter.gate.set()
    wait_for(lambda: _raises(h.batch_done), timeout=10)
    assert h.durable_offsets() == {("t", 0): 0}  # the delivery reports said no: nothing committable
    assert emitter.delivered == []
    emitter.error = None
    wait_for(lambda: not _raises(h.batch_done) and h.durable_offsets()[("t", 0)] >= len(events), timeout=10)
    failed = next(batch for batch, ok in emitter.flushed if not ok)
    assert any(batch == failed for batch, ok in emitter.flushed if ok)  # sent again whole
    assert sorted(batch for batch, ok in emitter.flushed if ok) == sorted(
        {tuple(b): b for b, _ in emitter.flushed}.values())  # every batch delivered once in the end
    h.close()


def test_a_file_sink_and_a_delivering_sink_commit_below_both(tmp_path) -> None:  # noqa: ANN001
    emitter = FakeKafkaEmitter()
    h = _handler(emitter, str(tmp_path))
    events = app_run(actions=1)
    for off, e in enumerate(events):
        h.handle(Record("t", 0, off, job_key(e), 0, e))
    h.tick(1e9)  # fsynced: the file alone would let every offset be committed
    assert h.durable_offsets() == {("t", 0): 0}
    emitter.gate.set()
    wait_for(lambda: not _raises(h.batch_done) and h.durable_offsets()[("t", 0)] >= len(events), timeout=10)
    h.close()


@pytest.mark.parametrize("url", ["http://", "https://", "http://:80", "http:///path"])
def test_a_gms_url_without_a_host_is_refused(url: str) -> None:
    from lineagewire.exceptions import ConfigError

    with pytest.raises(ConfigError, match="has no host; expected an http:// or https:// URL of DataHub GMS"):
        load_config(rest={"gms_url": url})
