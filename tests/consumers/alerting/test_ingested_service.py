"""The alerting service on the real broker with runs ingested from OpenLineage (issue 42): a failing dbt model
pages like a failing Spark job, once, although OpenLineage repeats RUNNING, sends events late and sends them
again."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from typing import Any

import pytest

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from lineagewire.producers.ingest.translate import OpenLineageTranslator

from .receivers import HttpReceiver
from .test_ingested import ol

pytestmark = [pytest.mark.integration]

BROKEN = "jaffle_shop.main.broken_model"


def dbt_events(run_id: str, start: dt.datetime, *steps: tuple[str, float]) -> list[dict[str, Any]]:
    """OpenLineage events of a run of the corpus's failing dbt model: (eventType, seconds after ``start``), in
    the order they are sent."""
    out = []
    for event_type, seconds in steps:
        ev = ol("dbt_model_fail.json", event_type, run_id=run_id)
        ev["eventTime"] = (start + dt.timedelta(seconds=seconds)).isoformat()
        if event_type != "FAIL":
            del ev["run"]["facets"]["errorMessage"]
        out.append(ev)
    return out


def publish(settings, events: list[dict[str, Any]]) -> None:  # noqa: ANN001
    translator = OpenLineageTranslator()
    with Publisher(settings) as pub:
        for ev in events:
            for contract in translator.translate(ev):
                pub.publish(contract)
        pub.flush(30)


def test_a_failing_dbt_model_pages_once_and_its_next_good_run_resolves(settings, tmp_path,  # noqa: ANN001
                                                                       http_receiver: HttpReceiver) -> None:
    cfg = parse_config({
        "route": {"group_wait": "0s", "group_interval": "0s", "channels": ["hook"]},
        "channels": {"hook": {"type": "webhook", "url": f"{http_receiver.url}/hook"}},
        "rules": [{"name": "dbt-failed", "kind": "run_failed", "severity": "critical", "match": {"namespace": "dbt"}},
                  {"name": "dbt-transition", "kind": "illegal_transition", "match": {"namespace": "dbt"}}]})
    handler = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}")
    runtime = ConsumerRuntime(settings, handler, topics=[settings.topics.jobs],
                              group_id=f"g-{uuid.uuid4().hex[:8]}", dead_letters=False)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        # after the service's start: new, not history it reads silently
        now, bad = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1), str(uuid.uuid4())
        # as dbt-ol and its transport may send them: RUNNING twice (a retry), the FAIL, a RUNNING that was
        # late, and the FAIL again
        failing = dbt_events(bad, now, ("START", 0), ("RUNNING", 0.5), ("RUNNING", 0.5), ("FAIL", 1.5),
                             ("RUNNING", 1.0), ("FAIL", 1.5))
        publish(settings, failing)
        page = http_receiver.wait("/hook", lambda r: len(r) >= 1, timeout=60)[0].json
        # the model's next run succeeds: its resolve comes after every event of the failing run (one partition:
        # the job's), so any second page of the failing run would have been sent before it
        publish(settings, failing + dbt_events(str(uuid.uuid4()), now, ("START", 10), ("COMPLETE", 11)))
        got = http_receiver.wait("/hook", lambda r: any(x.json["status"] == "resolved" for x in r), timeout=60)
    finally:
        runtime.stop()
        thread.join(60)
    alert = page["alerts"][0]
    assert (alert["labels"]["alertname"], alert["labels"]["job"]) == ("dbt-failed", BROKEN)
    assert 'column "nope" not found' in alert["annotations"]["error_message"]
    assert [(a["labels"]["alertname"], a["status"]) for r in got for a in r.json["alerts"]] == [
        ("dbt-failed", "firing"), ("dbt-failed", "resolved")]
