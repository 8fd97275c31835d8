"""``dataset_stale`` (issue 41.3): a freshness promise of a dataset, broken when no run wrote it successfully
within its freshness. First the rule on the engine alone (events and the clock in, signals out), then through the
service with a real SQLite database and a recording channel: one page naming the upstream cause, none again on
later ticks or after a restart, a resolve on the next good write, and the alert attached to the incident of the
upstream failure when ``run_failed`` pages for it."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.engine import RuleEngine
from lineagewire.consumers.alerting.exceptions import RulesError
from lineagewire.consumers.alerting.model import Signal
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.schemas import action_lineage, dataset, header, job_created, job_spec, job_status_changed

from .events import at, error
from .fakes import Clock, Recorder, record
from .test_incidents import feed, told

H = 3600.0
#: producer writes raw.events; sessions reads it and writes mart.sessions (a table: symlinked); report reads that
JOBS = {"producer": ((), ("raw_events",)), "sessions": (("raw_events",), ("sessions",)),
        "report": (("sessions",), ("report",))}
TABLES = {"raw_events": "raw.events", "sessions": "mart.sessions"}


def _ds(name: str) -> Any:
    table = TABLES.get(name)
    return dataset("s3://lake", name, symlinks=[{"namespace": "hive://meta", "name": table, "type": "TABLE"}]
                   if table else None)


class Run:
    """The events of one run of a job of ``JOBS``: created, running, its action, its end ``seconds`` later."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.inputs, self.outputs = JOBS[job]
        self.run_id, self.seq = str(uuid.uuid4()), 0

    def _h(self, kind: str, when: dt.datetime) -> Any:
        self.seq += 1
        return header(kind, job_namespace="prod", job_name=self.job, run_id=self.run_id, sequence=self.seq,
                      event_time=when)

    def start(self, t: float) -> list[dict[str, Any]]:
        return [dict(job_created(self._h("JobCreatedEvent", at(t)), job_spec(self.job, "4.0.0"))),
                dict(job_status_changed(self._h("JobStatusChangedEvent", at(t)), "RUNNING", "CREATED"))]

    def action(self, t: float) -> dict[str, Any]:
        return dict(action_lineage(self._h("ActionLineageEvent", at(t)), "1", "save",
                                   inputs=[_ds(n) for n in self.inputs], outputs=[_ds(n) for n in self.outputs]))

    def end(self, t: float, status: str = "FINISHED") -> dict[str, Any]:
        return dict(job_status_changed(self._h("JobStatusChangedEvent", at(t)), status, "RUNNING",
                                       error=error("ValueError", "bad amount 25.0") if status == "FAILED" else None))

    def events(self, t: float, status: str = "FINISHED") -> list[dict[str, Any]]:
        return [*self.start(t), self.action(t + 1), self.end(t + 5, status)]


def run(job: str, t: float, status: str = "FINISHED") -> list[dict[str, Any]]:
    return Run(job).events(t, status)


def engine(datasets: list[dict[str, Any]], **params: Any) -> RuleEngine:
    cfg = parse_config({"rules": [{"name": "stale", "kind": "dataset_stale", **params}], "datasets": datasets})
    return RuleEngine(cfg.build_rules())


def feed_engine(e: RuleEngine, events: list[dict[str, Any]]) -> list[Signal]:
    return [s for ev in events for s in e.process(ev)]


# -- the rule on the engine ---------------------------------------------------------------------------------


def test_a_promise_fires_once_past_its_freshness_naming_the_last_write_and_clears_on_the_next_good_write() -> None:
    e = engine([{"dataset": "mart.sessions", "freshness": "1h", "owner": "web-team"}])
    first = Run("sessions")
    feed_engine(e, first.events(0))
    assert e.check(at(H)) == []  # written at 00:01, due at 01:01
    (fired,) = e.check(at(H + 120))
    assert fired.firing and fired.labels["job"] == "sessions" and fired.labels["dataset"] == "s3://lake/sessions"
    ann = fired.annotations
    assert ann["summary"].startswith("mart.sessions is stale: last written 2026-11-23 12:00:01 UTC by run "
                                     f"{first.run_id} of job sessions"), ann
    assert (ann["last_run"], ann["owner"], ann["promise"]) == (first.run_id, "web-team", "mart.sessions")
    assert e.check(at(H + 180)) == [] and e.check(at(3 * H)) == []  # once per window
    (cleared,) = feed_engine(e, run("sessions", 3 * H))
    assert not cleared.firing and cleared.labels == fired.labels
    (again,) = e.check(at(5 * H))  # the next window is a new alert
    assert again.firing and again.fingerprint != fired.fingerprint


def test_a_write_counts_only_when_its_run_finishes() -> None:
    e = engine([{"dataset": "s3://lake/sessions", "freshness": "1h"}])  # by URI this time
    feed_engine(e, run("sessions", 0))
    failed = Run("sessions")
    assert feed_engine(e, failed.events(1800, "FAILED")) == []  # its overwrite left nothing to read as fresh
    (fired,) = e.check(at(H + 60))
    assert "its writer job sessions FAILED at 2026-11-23 12:30:05 UTC: ValueError: bad amount" in \
        fired.annotations["causes"], fired.annotations
    late = Run("sessions")
    feed_engine(e, [*late.start(2 * H), late.end(2 * H + 5)])
    (cleared,) = feed_engine(e, [late.action(2 * H + 6)])  # its lineage came after its end: it counts at once
    assert not cleared.firing and cleared.fingerprint == fired.fingerprint


def test_the_alert_names_the_failing_input_upstream_and_how_far() -> None:
    e = engine([{"dataset": "report", "freshness": "1h"}])
    feed_engine(e, run("producer", 0) + run("sessions", 60) + run("report", 120))
    feed_engine(e, run("producer", 1800, "FAILED"))  # raw.events is not written again
    (fired,) = e.check(at(H + 300))
    ann = fired.annotations
    assert ann["causes"] == ("raw.events has not been written since 2026-11-23 12:00:01 UTC (job producer FAILED: "
                             "ValueError: bad amount 25.0)"), ann  # two hops up: report <- sessions <- producer
    assert ann["summary"].endswith("; stale because " + ann["causes"])
    assert json.loads(ann["upstream_jobs"]) == [["prod", "producer"]]
    shallow = engine([{"dataset": "report", "freshness": "1h"}], depth=1)
    feed_engine(shallow, run("producer", 0) + run("sessions", 60) + run("report", 120)
                + run("producer", 1800, "FAILED"))
    (near,) = shallow.check(at(H + 300))
    assert "causes" not in near.annotations  # one hop reaches sessions, which is fine


def test_a_stale_input_by_its_own_promise_is_named_too() -> None:
    e = engine([{"dataset": "report", "freshness": "1h"}, {"dataset": "raw.events", "freshness": "30m"}])
    feed_engine(e, run("producer", 0) + run("sessions", 60) + run("report", 120))
    fired = {s.labels["dataset"]: s for s in e.check(at(H + 300))}
    assert set(fired) == {"s3://lake/report", "s3://lake/raw_events"}
    assert "raw.events has not been written since 2026-11-23 12:00:01 UTC (promised raw.events written at least " \
           "every 30m)" in fired["s3://lake/report"].annotations["causes"]


def test_a_promise_of_a_dataset_never_written_counts_from_the_first_look_and_clears_on_its_first_write() -> None:
    e = engine([{"dataset": "mart.sessions", "freshness": "1h"}])
    assert e.check(at(0)) == []
    assert e.check(at(H - 1)) == []
    (fired,) = e.check(at(H + 1))
    assert (fired.labels["dataset"], fired.labels["window"], fired.labels["job"]) == ("mart.sessions", "never", "")
    assert fired.annotations["summary"].startswith("mart.sessions has never been written")
    assert e.check(at(H + 2)) == []
    signals = feed_engine(e, run("sessions", H + 60))
    assert [(s.firing, s.fingerprint) for s in signals] == [(False, fired.fingerprint)]


def test_business_hours_limit_when_a_broken_promise_fires() -> None:
    # T0 is Monday 2026-11-23 12:00 UTC, 13:00 in Paris
    e = engine([{"dataset": "mart.sessions", "freshness": "1h", "business_hours": "* 8-17 * * MON-FRI",
                 "time_zone": "Europe/Paris"}])
    feed_engine(e, run("sessions", 0))
    assert e.check(at(6 * H)) == []  # 19:00 in Paris
    assert e.check(at(18 * H)) == []  # Tuesday 07:00
    (fired,) = e.check(at(19 * H))  # Tuesday 08:00
    assert fired.firing


def test_promises_are_checked_when_the_file_is_loaded() -> None:
    with pytest.raises(RulesError, match=r"datasets\[0\] \(x\): freshness='soon': expected a duration"):
        parse_config({"rules": [], "datasets": [{"dataset": "x", "freshness": "soon"}]})
    with pytest.raises(RulesError, match=r"depth"):
        parse_config({"rules": [{"name": "s", "kind": "dataset_stale", "depth": 0}]})


# -- through the service --------------------------------------------------------------------------------------


def handler(tmp_path, clock: Clock, rec: Recorder, rules: list[dict[str, Any]]) -> AlertingHandler:  # noqa: ANN001
    cfg = parse_config({
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "0s", "channels": ["rec"]},
        "channels": {"rec": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}},
        "rules": rules, "datasets": [{"dataset": "mart.sessions", "freshness": "1h"}],
    })
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", channels={"rec": rec}, clock=clock)
    h.open()
    return h


def tick(h: AlertingHandler, clock: Clock, seconds: float) -> None:
    clock.advance(seconds)
    h.tick(clock())
    assert h.settle()


def test_one_page_names_the_cause_none_again_after_a_restart_and_the_next_good_write_resolves(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec, [{"name": "stale", "kind": "dataset_stale"}])
    feed(h, clock, run("producer", 0) + run("sessions", 60) + run("producer", 1800, "FAILED"))
    tick(h, clock, H + 120)
    assert told(rec) == [("sessions", "firing")]
    assert "stale because raw.events has not been written since 2026-11-23 12:00:01 UTC (job producer FAILED" in \
        rec.sent[0].alerts[0].annotations["summary"]
    h.close()
    h = handler(tmp_path, clock, rec, [{"name": "stale", "kind": "dataset_stale"}])  # the same window: the same alert
    tick(h, clock, 60)
    assert told(rec) == [("sessions", "firing")]
    feed(h, clock, run("producer", 2 * H) + run("sessions", 2 * H + 60))
    assert told(rec) == [("sessions", "firing"), ("sessions", "resolved")]
    h.close()


def test_the_stale_dataset_is_attached_to_the_incident_of_its_upstream_failure(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec, [{"name": "failed", "kind": "run_failed"},
                                       {"name": "stale", "kind": "dataset_stale"}])
    feed(h, clock, run("producer", 0) + run("sessions", 60))
    clock.advance(1800)
    feed(h, clock, run("producer", 1800, "FAILED"))
    assert told(rec) == [("producer", "firing")]
    tick(h, clock, 1900)  # sessions is stale at 01:01
    assert told(rec) == [("producer", "firing")]  # attached, not paged
    (inc,) = h.store.incidents()
    assert [m.labels["alertname"] for m in inc.members.values()] == ["stale"]
    h.close()


def test_with_two_instances_the_writers_instance_pages_and_the_other_does_not_call_it_never_written(
        tmp_path) -> None:  # noqa: ANN001
    clock, rec_a, rec_b = Clock(), Recorder(), Recorder()
    a = handler(tmp_path, clock, rec_a, [{"name": "stale", "kind": "dataset_stale"}])
    b = handler(tmp_path, clock, rec_b, [{"name": "stale", "kind": "dataset_stale"}])
    a.on_assign([("lineage.jobs", 0)])
    b.on_assign([("lineage.jobs", 1)])  # the sessions job's events are on partition 1
    for h in (a, b):
        tick(h, clock, 0)
    for offset, ev in enumerate(run("sessions", 0)):
        b.handle(record(ev, offset, partition=1))
    b.batch_done()
    clock.advance(H + 60)
    for h in (a, b):
        tick(h, clock, 0)
    assert (told(rec_a), told(rec_b)) == ([], [("sessions", "firing")])
    a.close()
    b.close()


def test_write_states_and_fired_alerts_survive_a_save_and_load_of_the_facts() -> None:
    e = engine([{"dataset": "mart.sessions", "freshness": "1h"}])
    feed_engine(e, run("producer", 0) + run("sessions", 60) + run("producer", 1800, "FAILED"))
    pending = Run("sessions")
    feed_engine(e, [*pending.start(1900), pending.action(1901)])  # writing, not ended
    (fired,) = e.check(at(H + 120))
    rows = [(kind, key, doc) for kind, key, doc in e.facts.dump_dirty() if doc is not None]
    again = engine([{"dataset": "mart.sessions", "freshness": "1h"}])
    again.facts.load(rows)
    again.facts.started = e.facts.started
    assert again.facts.writes.states == e.facts.writes.states and again.facts.writes.fired == e.facts.writes.fired
    assert again.facts.jobs[("prod", "producer")].last_status == "FAILED"
    assert again.check(at(H + 180)) == []  # fired already, for this window
    (cleared,) = feed_engine(again, [pending.end(H + 200)])  # the pending write counts when its run ends
    assert not cleared.firing and cleared.fingerprint == fired.fingerprint


def test_a_late_event_of_an_older_write_neither_freshens_nor_clears() -> None:
    from lineagewire.consumers.alerting.writes import Writes

    writes = Writes()
    ds = {"namespace": "file", "name": "/lake/orders", "symlinks": []}
    job = ("spark", "orders")
    t0 = dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC)
    first = writes.wrote(ds, job, "run-2", t0, finished=True, partition=None)
    assert first is not None and first.state.last_success == t0
    writes.fired["file//lake/orders"] = {"dataset_stale": {"dataset": "/lake/orders"}}  # paged after run-2
    late = writes.wrote(ds, job, "run-1", t0 - dt.timedelta(hours=2), finished=True, partition=None)
    assert late is not None and late.fired == {} and late.state.last_success == t0 and late.state.last_run == "run-2"
    assert "file//lake/orders" in writes.fired  # still paged: only a newer write clears it
    newer = writes.wrote(ds, job, "run-3", t0 + dt.timedelta(hours=1), finished=True, partition=None)
    assert newer is not None and newer.fired == {"dataset_stale": {"dataset": "/lake/orders"}}
