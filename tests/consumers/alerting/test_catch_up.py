"""A fresh alerting deployment does not page history: ``lineagewire consume alerting`` on a topic that already
holds 20 old failures, 15 of them resolved by a later good run, sends exactly the 5 still open, once; a restart
sends none of them again; new failures are paged as always."""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import uuid

import pytest
import sqlalchemy as sa
import yaml

from lineagewire.consumers.alerting.catchup import CatchUp, CatchUpPlan
from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from tests.helpers import wait_for

from .events import RunBuilder, at, error
from .receivers import HttpReceiver

pytestmark = [pytest.mark.integration]


def _service(settings, rules: pathlib.Path, db: str, group: str, log: pathlib.Path,  # noqa: ANN001
             *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers, "consume",
             "alerting", "--rules", str(rules), "--database", db, "--topic", settings.topics.jobs, "--group", group,
             *extra], cwd=rules.parent, env=env, stdout=subprocess.DEVNULL, stderr=err)


def _stop(proc: subprocess.Popen, log: pathlib.Path) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    assert proc.returncode == 0, log.read_text()[-3000:]


def _failure(job: str, when: dt.datetime) -> list[dict]:
    return RunBuilder(job, namespace="prod").life(when, 5, end="FAILED", error=error())


def _success(job: str, when: dt.datetime) -> list[dict]:
    return RunBuilder(job, namespace="prod").life(when, 5)


def _publish(settings, events: list[dict]) -> None:  # noqa: ANN001
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
        pub.flush(60)


def _firing_jobs(receiver: HttpReceiver) -> list[tuple[str, str]]:
    return [(a["labels"]["job"], a["status"]) for r in receiver.on("/hook") for a in r.json["alerts"]]


def _rules(tmp_path: pathlib.Path, receiver: HttpReceiver) -> pathlib.Path:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "0s", "channels": ["hook"]},
        "channels": {"hook": {"type": "webhook", "url": f"{receiver.url}/hook"}},
        "rules": [{"name": "failed", "kind": "run_failed"}],
    }))
    return rules


@pytest.mark.slow
def test_a_fresh_deployment_pages_only_what_is_still_open_once_and_a_restart_sends_nothing_again(
        settings, tmp_path, http_receiver: HttpReceiver) -> None:  # noqa: ANN001
    history: list[dict] = []
    for i in range(20):
        history += _failure(f"job{i:02d}", at(i * 60))
    for i in range(15):  # a good run of the job an hour later resolves its failure
        history += _success(f"job{i:02d}", at(3600 + i * 60))
    _publish(settings, history)
    rules = _rules(tmp_path, http_receiver)
    db, group, log = f"sqlite:///{tmp_path / 'alerts.db'}", f"alerting-{uuid.uuid4().hex[:8]}", tmp_path / "svc.log"

    svc = _service(settings, rules, db, group, log)
    try:
        got = http_receiver.wait("/hook", lambda r: len(r) >= 5, timeout=120)
        # Something new after history: its page comes after whatever history produced, so counting then is exact.
        now = dt.datetime.now(dt.UTC)
        _publish(settings, _failure("live1", now))
        got = http_receiver.wait("/hook", lambda r: any(a["labels"]["job"] == "live1" for x in r
                                                        for a in x.json["alerts"]), timeout=120)
    finally:
        _stop(svc, log)
    assert len(got) == 6, _firing_jobs(http_receiver)
    assert sorted(_firing_jobs(http_receiver)[:5]) == [(f"job{i}", "firing") for i in range(15, 20)]
    assert _firing_jobs(http_receiver)[5] == ("live1", "firing")

    svc = _service(settings, rules, db, group, log)  # a restart: same group, same database
    try:
        _publish(settings, _failure("live2", dt.datetime.now(dt.UTC)) + _success("live1", dt.datetime.now(dt.UTC)))
        http_receiver.wait("/hook", lambda r: sum(a["labels"]["job"] in ("live1", "live2") for x in r
                                                  for a in x.json["alerts"]) >= 3, timeout=120)
    finally:
        _stop(svc, log)
    assert sorted(_firing_jobs(http_receiver)[6:]) == [("live1", "resolved"), ("live2", "firing")]
    engine = sa.create_engine(db)
    with engine.connect() as c:
        plan = json.loads(c.execute(sa.text("SELECT value FROM alerting_facts WHERE kind='catchup' AND key=:g"),
                                    {"g": group}).scalar())
    engine.dispose()
    assert plan["done"] and sum(plan["ends"].values()) == len(history)


@pytest.mark.slow
def test_a_restart_in_the_middle_of_history_carries_on_silently_and_notify_since_lets_newer_alerts_through(
        settings, topic_factory, tmp_path, http_receiver: HttpReceiver) -> None:  # noqa: ANN001
    """A new group on a 4-partition topic stops after 25 of 66 events (committed offsets exist then); the next
    instance carries on with the plan in the database: alerts from before --notify-since wait for the end of
    history and only those still open are paged; an alert after it is news, paged and resolved as it happens."""
    topic = topic_factory("catchup", 4)
    settings = settings.model_copy(update={"topics": settings.topics.model_copy(update={"jobs": topic})})
    since = at(10_000)
    history: list[dict] = []
    for i in range(12):  # old: 4 stay open
        history += _failure(f"old{i:02d}", at(i * 60))
    for i in range(8):
        history += _success(f"old{i:02d}", at(3600 + i * 60))
    history += _failure("recent", at(20_000)) + _success("recent", at(20_100))  # after --notify-since: news
    _publish(settings, history)
    cfg = parse_config(yaml.safe_load(_rules(tmp_path, http_receiver).read_text()))
    db, group = f"sqlite:///{tmp_path / 'alerts.db'}", f"g-{uuid.uuid4().hex[:8]}"

    def runtime() -> ConsumerRuntime:
        handler = AlertingHandler(cfg, database=db, catch_up=CatchUp(settings, group, [topic], notify_since=since))
        return ConsumerRuntime(settings, handler, topics=[topic], group_id=group, dead_letters=False)

    first = runtime()
    assert first.run(max_events=25).consumed == 25
    assert first.handler.plan is not None and not first.handler.plan.done
    assert not any(j.startswith("old") for j, _ in _firing_jobs(http_receiver))

    second = runtime()
    thread = threading.Thread(target=second.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: second.handler.plan is not None and second.handler.plan.done, timeout=120)
        _publish(settings, _failure("live", dt.datetime.now(dt.UTC)))
        http_receiver.wait("/hook", lambda r: any(a["labels"]["job"] == "live" for x in r for a in x.json["alerts"]),
                           timeout=120)
    finally:
        second.stop()
        thread.join(60)
    jobs = _firing_jobs(http_receiver)
    assert sorted(j for j in jobs if j[0].startswith("old")) == [(f"old{i:02d}", "firing") for i in range(8, 12)]
    assert [j for j in jobs if j[0] == "recent"] == [("recent", "firing"), ("recent", "resolved")]
    assert jobs.count(("live", "firing")) == 1 and len(jobs) == 7, jobs


def test_instances_sharing_a_database_hold_history_until_all_partitions_are_read_whoever_reads_them(
        tmp_path) -> None:  # noqa: ANN001
    """Two handlers of one group on one SQLite database, each reading one partition (what a rebalance hands
    out): neither pages its history until both partitions reached their ends; the one that sees the end last
    marks the plan done and pages every alert still open, its own and the other's, once; the other notices the
    plan is done and pages none of them again."""
    from lineagewire.config import Settings

    from .fakes import Clock, Recorder, record

    db, group = f"sqlite:///{tmp_path / 'alerts.db'}", "g-shared"
    cfg = parse_config({"route": {"group_wait": "0s", "group_interval": "0s", "channels": ["rec"]},
                        "channels": {"rec": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}},
                        "rules": [{"name": "failed", "kind": "run_failed"}]})
    since = at(10_000)
    plan = {"since": since.isoformat(), "ends": {"lineage.jobs[0]": 3, "lineage.jobs[1]": 6}, "done": False}
    clock, recs, handlers = Clock(since.timestamp() + 60), [Recorder("rec"), Recorder("rec")], []
    for rec in recs:
        h = AlertingHandler(cfg, database=db, channels={"rec": rec}, clock=clock,
                            catch_up=CatchUp(Settings(), group, ["lineage.jobs"]))
        h.open()
        handlers.append(h)
    a, b = handlers
    a.store.start_catchup(group, plan)

    def tick(h: AlertingHandler) -> None:
        clock.advance(1.1)
        h.tick(clock())
        assert h.settle()

    for off, ev in enumerate(_failure("a-job", at(0))):  # partition 0: A's, read to its end (3)
        a.handle(record(ev, off, partition=0))
    a.batch_done()
    tick(a)
    assert a.catching_up and recs[0].sent == []
    for off, ev in enumerate(_failure("b-job", at(0)) + _failure("b-gone", at(0))[:2]):  # B: 5 of 6
        b.handle(record(ev, off, partition=1))
    b.batch_done()
    tick(b)
    tick(a)
    assert a.catching_up and b.catching_up and recs[0].sent == recs[1].sent == []
    b.handle(record(_failure("b-gone", at(0))[2], 5, partition=1))  # the end of partition 1
    b.batch_done()
    tick(b)
    assert not b.catching_up
    assert sorted(x.labels["job"] for n in recs[1].sent for x in n.alerts) == ["a-job", "b-gone", "b-job"]
    tick(a)  # A learns it from the database
    assert not a.catching_up and recs[0].sent == []
    tick(a)
    tick(b)
    assert len(recs[0].sent) == 0 and len(recs[1].sent) == 3
    for h in handlers:
        h.close()


def test_the_plan_reads_the_partition_ends_for_a_new_group_and_is_done_for_one_with_committed_offsets(
        settings) -> None:  # noqa: ANN001
    """``CatchUp.plan`` on the real broker: a new group catches up to each non-empty partition's end; once the
    group committed an offset, there is nothing to catch up."""
    from confluent_kafka import Consumer, TopicPartition

    topic = settings.topics.jobs
    history = _failure("old", at(0))
    _publish(settings, history)
    group, started = f"g-{uuid.uuid4().hex[:8]}", dt.datetime.now(dt.UTC)
    plan = CatchUp(settings, group, [topic, "no.such.topic"]).plan(started)
    assert not plan.done and plan.since == started and sum(plan.ends.values()) == len(history)
    assert set(plan.ends) <= {f"{topic}[{p}]" for p in range(3)}

    committer = Consumer({**settings.as_librdkafka_dict(), "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        committer.close()
    assert CatchUp(settings, group, [topic]).plan(started) == CatchUpPlan(None, {}, done=True)
