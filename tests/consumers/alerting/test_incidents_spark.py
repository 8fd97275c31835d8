"""The issue's chain end to end: real PySpark jobs under ``lineagewire instrument``, the real broker, ``consume
alerting`` and a webhook at a real HTTP receiver on 127.0.0.1. A producer writes orders, which two consumer jobs
read; the producer fails (its overwrite leaves no orders), then both consumers fail: one page, the incident's,
naming both consumers, whose failures are attached to it. The producer's next good run resolves the incident, and
the consumers' failures, still firing, then page on their own."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import uuid

import pytest
import sqlalchemy as sa
import yaml

from tests.helpers import wait_for

from .receivers import HttpReceiver
from .test_service import _service, _stop

ROOT = pathlib.Path(__file__).resolve().parents[3]
JOB = pathlib.Path(__file__).with_name("chain_job.py")
CONSUMERS = ("consumer_a", "consumer_b")

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def _jobs(settings, tmp_path: pathlib.Path, roles: tuple[str, ...], *args: str) -> list[int]:  # noqa: ANN001
    """Run the chain's jobs ``roles`` side by side (each a Spark application); their exit codes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
    env["PYSPARK_PYTHON"] = sys.executable
    procs = []
    for role in roles:
        log = open(tmp_path / f"{role}.log", "ab")  # noqa: SIM115 - the child holds its own copy
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers, "instrument",
             "--topic", settings.topics.jobs, "--namespace", "chain", "--set", f"outbox_dir={tmp_path / 'outbox'}",
             "--set", "time_budget_ms=10000", "--", sys.executable, str(JOB), role, str(tmp_path / "data"), *args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        log.close()
    return [p.wait(400) for p in procs]


def _count(db: str, sql: str) -> int:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as c:
            return int(c.execute(sa.text(sql)).scalar())
    finally:
        engine.dispose()


def _told(receiver: HttpReceiver) -> list[tuple[str, str]]:
    return [(a["status"], a["labels"]["job"]) for r in receiver.on("/hook") for a in r.json["alerts"]]


@pytest.mark.timeout(1200)  # seven Spark applications, two at a time, on a shared machine
def test_a_failing_producer_pages_once_for_its_failing_consumers_which_page_after_it_recovers(
        settings, tmp_path, http_receiver: HttpReceiver) -> None:  # noqa: ANN001
    pytest.importorskip("pyspark")
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({
        "route": {"group_wait": "0s", "group_interval": "0s", "channels": ["hook"]},
        "channels": {"hook": {"type": "webhook", "url": f"{http_receiver.url}/hook"}},
        "rules": [{"name": "failed", "kind": "run_failed", "match": {"namespace": "chain"}}],
        "incidents": {"window": "2h"},
    }))
    db, group, log = f"sqlite:///{tmp_path / 'alerts.db'}", f"alerting-{uuid.uuid4().hex[:8]}", tmp_path / "svc.log"
    svc = _service(settings, rules, db, group, log)
    try:
        # good runs first: the service learns from their lineage that both consumers read the producer's orders
        assert _jobs(settings, tmp_path, ("producer",)) == [0], (tmp_path / "producer.log").read_text()[-3000:]
        assert _jobs(settings, tmp_path, CONSUMERS) == [0, 0], (tmp_path / "consumer_a.log").read_text()[-3000:]
        reads = ("SELECT count(*) FROM alerting_lineage_edges WHERE job IN ('consumer_a', 'consumer_b') "
                 "AND writes = 0 AND dataset LIKE '%/orders'")
        wait_for(lambda: _count(db, reads) == 2, timeout=120)

        assert _jobs(settings, tmp_path, ("producer",), "fail") == [1]
        (page,) = http_receiver.wait("/hook", lambda got: len(got) >= 1, timeout=120)
        (alert,) = page.json["alerts"]
        assert (alert["status"], alert["labels"]["job"]) == ("firing", "producer")
        assert alert["annotations"]["affects"] == "chain/consumer_a, chain/consumer_b", alert["annotations"]
        assert "bad amount" in alert["annotations"]["summary"]

        assert _jobs(settings, tmp_path, CONSUMERS) == [1, 1], "the consumers should fail without orders"
        wait_for(lambda: _count(db, "SELECT count(*) FROM alerting_incident_alerts") == 2, timeout=120)
        wait_for(lambda: _count(db, "SELECT count(*) FROM alerting_alerts WHERE state = 'firing'") == 3, timeout=60)
        assert _told(http_receiver) == [("firing", "producer")]  # attached, not paged

        assert _jobs(settings, tmp_path, ("producer",)) == [0]
        http_receiver.wait("/hook", lambda got: len(_told(http_receiver)) >= 4, timeout=120)
    finally:
        _stop(svc, log)
    told = _told(http_receiver)
    assert told[:2] == [("firing", "producer"), ("resolved", "producer")], told
    assert sorted(told[2:]) == [("firing", "consumer_a"), ("firing", "consumer_b")], told
    assert _count(db, "SELECT count(*) FROM alerting_incidents WHERE state = 'resolved'") == 1
