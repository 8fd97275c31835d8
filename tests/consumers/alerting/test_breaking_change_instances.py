"""``breaking_change`` across instances, through the service: the writer's events and the readers' come from
different partitions, owned by two handlers on one database. The writer's instance must judge the change against
the readers the other instance saw (the service reads them before it processes the writer's event)."""

from __future__ import annotations

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler

from .events import T0, at
from .fakes import Clock, Recorder, record
from .test_breaking_change import ABC, _read, _write

TOPIC = "lineage.jobs"


def handler(tmp_path, clock: Clock, rec: Recorder) -> AlertingHandler:  # noqa: ANN001
    cfg = parse_config({
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "1s",
                  "repeat_interval": "4h", "channels": ["rec"]},
        "channels": {"rec": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}},
        "rules": [{"name": "breaking", "kind": "breaking_change"}],
    })
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", channels={"rec": rec}, clock=clock)
    h.open()
    return h


def test_the_writers_instance_judges_a_change_against_the_readers_another_instance_saw(tmp_path) -> None:  # noqa: ANN001
    clock = Clock(T0.timestamp())
    rec_w, rec_r = Recorder(), Recorder()
    writer, readers = handler(tmp_path, clock, rec_w), handler(tmp_path, clock, rec_r)
    writer.on_assign([(TOPIC, 0)])
    readers.on_assign([(TOPIC, 1)])
    offsets = {0: 0, 1: 0}

    def feed(h: AlertingHandler, partition: int, events: list[dict]) -> None:
        for ev in events:
            h.handle(record(ev, offsets[partition], partition=partition))
            offsets[partition] += 1
        h.batch_done()

    try:
        feed(writer, 0, _write("producer", T0, ABC))
        feed(readers, 1, _read("consumer1", at(10), ["a"]) + _read("consumer2", at(11), ["c"], owner="bob"))
        clock.advance(30)
        feed(writer, 0, _write("producer", at(20), {"a": "int", "b": "int"}))  # c dropped
        for _ in range(3):
            clock.advance(2)
            for h in (writer, readers):
                h.tick(clock())
                assert h.settle()
        fired = [a for n in rec_w.sent + rec_r.sent for a in n.alerts if a.labels.get("alertname") == "breaking"]
        assert len(fired) == 1, [a.labels for a in fired]
        assert "consumer2 reads c (owner bob)" in fired[0].annotations["breaking"]
        assert fired[0].annotations["safe_count"] == "1"
    finally:
        writer.close()
        readers.close()
