"""``refresh_held`` (issue 41.2): the scheduler held a table's refresh (a RefreshHeld event on the refresh-commands
topic). The rule alone, then through the service with a real SQLite database and a recording channel: one page
per held table with its reasons, a resolve on the table's next RefreshCommand, and the held refresh attached to
the incident of the upstream run that failed (named by the event even when no lineage links the two yet)."""

from __future__ import annotations

import uuid
from typing import Any

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.engine import RuleEngine
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.schemas import header, refresh_command, refresh_held

from .events import T0, at
from .fakes import Clock, Recorder
from .test_dataset_stale import run, tick
from .test_incidents import feed, told

REFRESH = ("lake", "refresh mart.sessions")


def held(table: str = "mart.sessions", *, failed_run: str | None = "r-1", when: float = 0) -> dict[str, Any]:
    h = header("RefreshHeld", job_namespace=REFRESH[0], job_name=REFRESH[1], run_id=str(uuid.uuid4()),
               event_time=at(when))
    reasons: list[Any] = [{"condition": "UPSTREAM_FAILED", "input": {"namespace": "s3://lake", "name": "raw_events"},
                           "upstream_run": {"job_namespace": "prod", "job_name": "producer", "run_id": failed_run}
                           if failed_run else None, "detail": "ValueError: bad amount 25.0"},
                          {"condition": "INPUT_STALE", "input": {"namespace": "s3://lake", "name": "dims"},
                           "upstream_run": None, "detail": "never written"}]
    return dict(refresh_held(h, command_id="cmd-1", workflow_id="wf-1", table=table, nominal_time=T0,
                             reasons=reasons))


def command(table: str = "mart.sessions", when: float = 60) -> dict[str, Any]:
    h = header("RefreshCommand", job_namespace=REFRESH[0], job_name=REFRESH[1], run_id=str(uuid.uuid4()),
               event_time=at(when))
    return dict(refresh_command(h, command_id="cmd-1", workflow_id="wf-1", table=table, nominal_time=T0,
                                query="SELECT 1"))


def test_a_held_refresh_fires_with_its_reasons_and_the_tables_next_command_clears_it() -> None:
    e = RuleEngine(parse_config({"rules": [{"name": "held", "kind": "refresh_held"}]}).build_rules())
    (fired,) = e.process(held())
    assert fired.firing and (fired.labels["table"], fired.labels["job"]) == ("mart.sessions", REFRESH[1])
    ann = fired.annotations
    assert ann["summary"] == ("refresh of mart.sessions for 2026-11-23T12:00:00Z held: raw_events: its writer's last "
                              "run failed (run r-1 of prod/producer): ValueError: bad amount 25.0 (+1 more)"), ann
    assert ann["reasons"].splitlines()[1] == "dims: staler than its freshness promise (never written): never written"
    assert (ann["upstream_runs"], ann["upstream_jobs"], ann["conditions"]) == (
        "r-1", '[["prod", "producer"]]', "INPUT_STALE, UPSTREAM_FAILED")
    (again,) = e.process(held(when=30))
    assert again.fingerprint == fired.fingerprint  # held again: the same alert
    assert [s.firing for s in e.process(command("mart.other"))] == [False]
    assert e.process(command("mart.other"))[0].fingerprint != fired.fingerprint  # another table's command
    (cleared,) = e.process(command())
    assert not cleared.firing and cleared.fingerprint == fired.fingerprint


def handler(tmp_path, clock: Clock, rec: Recorder, rules: list[dict[str, Any]]) -> AlertingHandler:  # noqa: ANN001
    cfg = parse_config({
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "0s", "channels": ["rec"]},
        "channels": {"rec": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}}, "rules": rules})
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", channels={"rec": rec}, clock=clock)
    h.open()
    return h


def test_one_page_per_held_table_resolved_by_its_next_command(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec, [{"name": "held", "kind": "refresh_held"}])
    feed(h, clock, [held()])
    tick(h, clock, 30)
    feed(h, clock, [held(when=30)])  # the scheduler says it again
    assert told(rec) == [(REFRESH[1], "firing")]
    assert "raw_events: its writer's last run failed" in rec.sent[0].alerts[0].annotations["summary"]
    clock.advance(30)
    feed(h, clock, [command()])
    assert told(rec) == [(REFRESH[1], "firing"), (REFRESH[1], "resolved")]
    h.close()


def test_a_held_refresh_joins_the_incident_of_the_failed_upstream_run(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec, [{"name": "failed", "kind": "run_failed"},
                                       {"name": "held", "kind": "refresh_held"}])
    feed(h, clock, run("producer", -3600) + run("sessions", -3500))  # sessions reads what the producer writes
    failed = run("producer", 0, "FAILED")
    feed(h, clock, failed)
    assert told(rec) == [("producer", "firing")]
    clock.advance(60)
    feed(h, clock, [held(failed_run=failed[0]["header"]["run_id"], when=60)])
    assert told(rec) == [("producer", "firing")]  # attached: the refresh job has no lineage yet, the event names it
    (inc,) = h.store.incidents()
    assert [m.labels["alertname"] for m in inc.members.values()] == ["held"]
    h.close()
