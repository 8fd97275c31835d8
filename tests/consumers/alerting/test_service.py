"""The service on the real broker: ``lineagewire consume alerting`` against a real failing PySpark job run
under ``lineagewire instrument``, across a service restart; and a missed scheduled refresh."""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import signal
import subprocess
import sys
import threading
import uuid

import pytest
import yaml

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import header, job_created, job_spec, job_status_changed, refresh_command

from .receivers import HttpReceiver

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "daily_orders.py"

pytestmark = [pytest.mark.integration]


def _service(settings, rules: pathlib.Path, db: str, group: str, log: pathlib.Path) -> subprocess.Popen:  # noqa: ANN001
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
    with open(log, "ab") as err:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers, "consume",
             "alerting", "--rules", str(rules), "--database", db, "--topic", settings.topics.jobs, "--group", group],
            cwd=rules.parent, env=env, stdout=subprocess.DEVNULL, stderr=err)


def _stop(proc: subprocess.Popen, log: pathlib.Path) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    assert proc.returncode == 0, log.read_text()[-3000:]


def _job(settings, tmp_path: pathlib.Path, out: str, *args: str) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
    env["PYSPARK_PYTHON"] = sys.executable
    # time_budget_ms=10000, not the shipped 5 s: this test is about alerts, not extraction speed, and the first
    # plans of a cold JVM on a loaded CI machine can overrun 1 s (then the lineage is cut, the alert is the same).
    return subprocess.run([sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers,
                           "instrument", "--topic", settings.topics.jobs, "--namespace", "examples",
                           "--set", f"outbox_dir={tmp_path / 'outbox'}", "--set", "time_budget_ms=10000",
                           "--", sys.executable, str(EXAMPLE), str(tmp_path / out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)  # two Spark applications on a shared machine
def test_a_failing_spark_job_pages_and_its_next_good_run_resolves_with_no_duplicate_across_a_restart(
        settings, tmp_path, http_receiver: HttpReceiver) -> None:  # noqa: ANN001
    pytest.importorskip("pyspark")
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({
        "route": {"group_wait": "0s", "group_interval": "0s", "channels": ["pager", "hook"]},
        "channels": {"pager": {"type": "pagerduty", "routing_key": "k", "url": f"{http_receiver.url}/v2/enqueue"},
                     "hook": {"type": "webhook", "url": f"{http_receiver.url}/hook"}},
        "rules": [{"name": "orders-failed", "kind": "run_failed", "severity": "critical",
                   "match": {"namespace": "examples", "job": "daily_*"}}],
    }))
    db, group, log = f"sqlite:///{tmp_path / 'alerts.db'}", f"alerting-{uuid.uuid4().hex[:8]}", tmp_path / "svc.log"
    svc = _service(settings, rules, db, group, log)
    try:
        bad = _job(settings, tmp_path, "out-bad", "fail")
        assert bad.returncode != 0, "the failing variant should fail"
        triggers = http_receiver.wait("/v2/enqueue", lambda got: len(got) >= 1, timeout=120)
    finally:
        _stop(svc, log)
    assert triggers[0].json["event_action"] == "trigger"
    fp = triggers[0].json["dedup_key"]
    assert "daily_orders" in triggers[0].json["payload"]["source"]

    svc = _service(settings, rules, db, group, log)  # a restart: same database, same group
    try:
        good = _job(settings, tmp_path, "out-good")
        assert good.returncode == 0, good.stderr[-3000:]
        got = http_receiver.wait("/v2/enqueue", lambda r: any(x.json["event_action"] == "resolve" for x in r),
                                 timeout=120)
    finally:
        _stop(svc, log)
    assert [(r.json["event_action"], r.json["dedup_key"]) for r in got] == [("trigger", fp), ("resolve", fp)]
    assert [r.json["status"] for r in http_receiver.on("/hook")] == ["firing", "resolved"]


@pytest.mark.slow
def test_a_missed_scheduled_refresh_raises_refresh_missed(settings, topic_factory, tmp_path,  # noqa: ANN001
                                                         http_receiver: HttpReceiver) -> None:
    # The scheduler's side is played by publishing what it and the refresh runner publish, with the
    # contract's constructors: a RefreshCommand with a deadline, then a run that starts and never completes.
    commands = topic_factory("cmds", 1)
    settings = settings.model_copy(update={"topics": settings.topics.model_copy(
        update={"refresh_commands": commands})})
    now = dt.datetime.now(dt.UTC)
    cid, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    sched = {"workflow_id": "wf-1", "command_id": cid, "nominal_time": now - dt.timedelta(minutes=5), "attempt": 1}
    hdr = dict(job_namespace="lake", job_name="refresh sales.daily", run_id=run_id, schedule=sched)
    cmd = refresh_command(header("RefreshCommand", **hdr), command_id=cid, workflow_id="wf-1", table="sales.daily",
                          nominal_time=sched["nominal_time"], query="SELECT 1", deadline=now + dt.timedelta(seconds=3))
    created = job_created(header("JobCreatedEvent", sequence=0, **hdr),
                          job_spec("refresh sales.daily", "4.0.0", tags={"table": "sales.daily"}))
    running = job_status_changed(header("JobStatusChangedEvent", sequence=1, **hdr), "RUNNING", "CREATED")
    with Publisher(settings) as pub:
        pub.publish(dict(cmd), topic=commands, key="sales.daily")
        pub.publish(dict(created))
        pub.publish(dict(running))
        pub.flush(30)

    cfg = parse_config({"route": {"group_wait": "0s", "channels": ["hook"]},
                        "channels": {"hook": {"type": "webhook", "url": f"{http_receiver.url}/hook"}},
                        "rules": [{"name": "missed", "kind": "refresh_missed", "deadline": "1h"}]})
    handler = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'a.db'}")
    runtime = ConsumerRuntime(settings, handler, topics=[settings.topics.jobs, commands],
                              group_id=f"g-{uuid.uuid4().hex[:8]}", dead_letters=False)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    try:
        got = http_receiver.wait("/hook", lambda r: len(r) >= 1, timeout=60)
    finally:
        runtime.stop()
        thread.join(60)
    alert = got[0].json["alerts"][0]
    assert alert["labels"]["alertname"] == "missed" and alert["labels"]["table"] == "sales.daily"
    assert alert["annotations"]["command_id"] == cid and "RUNNING" in alert["annotations"]["summary"]
