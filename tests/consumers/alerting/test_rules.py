"""Each rule kind on hand-made events: pure logic, no database, no broker."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.engine import RuleEngine
from lineagewire.consumers.alerting.exceptions import RulesError
from lineagewire.consumers.alerting.facts import Facts
from lineagewire.consumers.alerting.model import Signal

from .events import T0, RunBuilder, at, error, table


def engine(*rules: dict) -> RuleEngine:
    return RuleEngine(parse_config({"rules": list(rules)}).build_rules())


def feed(e: RuleEngine, events: list[dict]) -> list[Signal]:
    out: list[Signal] = []
    for ev in events:
        out.extend(e.process(ev))
    return out


def firing(signals: list[Signal]) -> list[Signal]:
    return [s for s in signals if s.firing]


def cleared(signals: list[Signal]) -> list[Signal]:
    return [s for s in signals if not s.firing]


# -- run_failed ------------------------------------------------------------------------------------------------------

def test_run_failed_fires_with_error_and_first_stack_lines_and_next_good_run_clears_it() -> None:
    e = engine({"name": "failed", "kind": "run_failed", "severity": "critical", "stack_lines": 3,
                "labels": {"team": "data"}})
    bad = RunBuilder()
    fired = firing(feed(e, bad.life(T0, 10, end="FAILED", error=error())))
    assert len(fired) == 1
    s = fired[0]
    assert s.labels == {"alertname": "failed", "kind": "run_failed", "severity": "critical", "namespace": "prod",
                        "job": "nightly_orders", "team": "data"}
    assert s.annotations["error_class"] == "org.apache.spark.SparkException"
    assert s.annotations["error_message"] == "Job aborted: boom"
    assert len(s.annotations["stack"].splitlines()) == 3
    assert s.annotations["run_id"] == bad.run_id
    good = feed(e, RunBuilder().life(at(100), 10))
    assert [c.fingerprint for c in cleared(good)] == [s.fingerprint]
    assert not firing(good)


def test_rules_match_on_namespace_and_job_globs_and_tags() -> None:
    e = engine({"name": "f", "kind": "run_failed",
                "match": {"namespace": "prod", "job": ["nightly_*", "weekly_*"], "tags": {"team": "d*"}}})
    assert firing(feed(e, RunBuilder("nightly_a", tags={"team": "data"}).life(T0, 1, end="FAILED")))
    assert firing(feed(e, RunBuilder("weekly_b", tags={"team": "dev"}).life(T0, 1, end="FAILED")))
    assert not firing(feed(e, RunBuilder("hourly_a", tags={"team": "data"}).life(T0, 1, end="FAILED")))
    assert not firing(feed(e, RunBuilder("nightly_c", tags={"team": "ops"}).life(T0, 1, end="FAILED")))
    assert not firing(feed(e, RunBuilder("nightly_d").life(T0, 1, end="FAILED")))
    assert not firing(feed(e, RunBuilder("nightly_e", "staging", tags={"team": "data"}).life(T0, 1, end="FAILED")))


def test_a_redelivered_event_gives_no_second_signal() -> None:
    e = engine({"name": "f", "kind": "run_failed"})
    events = RunBuilder().life(T0, 1, end="FAILED")
    assert len(firing(feed(e, events))) == 1
    assert feed(e, events) == []


# -- run_stuck -------------------------------------------------------------------------------------------------------

def test_run_stuck_fires_on_the_clock_after_max_duration_and_the_terminal_status_clears_it() -> None:
    e = engine({"name": "stuck", "kind": "run_stuck", "max_duration": "1h"})
    r = RunBuilder()
    feed(e, [r.created(T0), r.status("RUNNING", "CREATED", T0)])
    assert e.check(at(3500)) == []
    fired = e.check(at(3700))
    assert len(fired) == 1 and fired[0].firing and fired[0].labels["run_id"] == r.run_id
    assert "no terminal status" in fired[0].annotations["summary"]
    assert e.check(at(3800)) == []  # flagged: not re-fired every tick
    done = feed(e, [r.status("FINISHED", "RUNNING", at(3900))])
    assert [s.fingerprint for s in cleared(done)] == [fired[0].fingerprint]


def test_run_stuck_heartbeat_of_a_streaming_query() -> None:
    e = engine({"name": "hb", "kind": "run_stuck", "max_duration": None, "heartbeat": "5m"})
    r = RunBuilder("clicks_stream", job_type="STREAMING")
    feed(e, [r.created(T0), r.status("RUNNING", "CREATED", T0)])
    batch = RunBuilder("batch_job")
    feed(e, [batch.created(T0), batch.status("RUNNING", "CREATED", T0)])
    fired = e.check(at(400))
    assert [s.labels["job"] for s in fired] == ["clicks_stream"]  # batch runs have no heartbeat
    alive = feed(e, [r.action(at(450))])
    assert [s.fingerprint for s in cleared(alive)] == [fired[0].fingerprint]


# -- restart_storm ---------------------------------------------------------------------------------------------------

def test_restart_storm_counts_restarts_and_failures_in_the_window_and_clears_as_it_drains() -> None:
    e = engine({"name": "storm", "kind": "restart_storm", "max_restarts": 3, "window": "10m"})
    r = RunBuilder()
    events = [r.created(T0), r.status("RUNNING", "CREATED", T0)]
    for i in range(3):
        events += [r.status("RESTARTING", "RUNNING", at(10 * i + 1), restarts=i + 1),
                   r.status("RUNNING", "RESTARTING", at(10 * i + 2), restarts=i + 1)]
    assert not firing(feed(e, events))
    fired = firing(feed(e, [r.status("FAILED", "RUNNING", at(60), restarts=3, error=error())]))
    assert len(fired) == 1 and fired[0].annotations["restarts"] == "4"
    assert firing(e.check(at(300)))
    assert [s.fingerprint for s in cleared(e.check(at(620)))] == [fired[0].fingerprint]


# -- duration_anomaly ------------------------------------------------------------------------------------------------

def test_duration_anomaly_needs_k_runs_then_flags_a_slow_run_and_a_normal_one_clears_it() -> None:
    e = engine({"name": "slow", "kind": "duration_anomaly", "runs": 5, "threshold": 3})
    for i, secs in enumerate([100, 104, 98, 101, 99]):
        assert not firing(feed(e, RunBuilder().life(at(1000 * i), secs)))
    # five runs in the baseline now: a normal run is fine, a slow one is not
    assert not firing(feed(e, RunBuilder().life(at(6000), 103)))
    fired = firing(feed(e, RunBuilder().life(at(7000), 400)))
    assert len(fired) == 1
    assert fired[0].annotations["median_ms"] == "101000"
    assert [s.fingerprint for s in cleared(feed(e, RunBuilder().life(at(8000), 102)))] == [fired[0].fingerprint]


def test_duration_anomaly_is_silent_before_k_runs_even_for_a_very_slow_run() -> None:
    e = engine({"name": "slow", "kind": "duration_anomaly", "runs": 5})
    for i, secs in enumerate([100, 100, 100, 100]):
        feed(e, RunBuilder().life(at(1000 * i), secs))
    assert feed(e, RunBuilder().life(at(9000), 10_000)) == []


# -- refresh_missed --------------------------------------------------------------------------------------------------

def _refresh(attempt: int, cid: str, nominal: dt.datetime = T0) -> RunBuilder:
    return RunBuilder("refresh sales.daily", "lake", tags={"table": "sales.daily"},
                      schedule={"workflow_id": "wf1", "command_id": cid, "nominal_time": nominal, "attempt": attempt})


def test_refresh_missed_fires_on_the_last_failed_attempt_only_and_the_next_completion_clears_it() -> None:
    e = engine({"name": "missed", "kind": "refresh_missed", "max_attempts": 2, "deadline": "1d"})
    cid = str(uuid.uuid4())
    assert not firing(feed(e, _refresh(1, cid).life(T0, 5, end="FAILED", error=error())))
    fired = firing(feed(e, _refresh(2, cid).life(at(60), 5, end="FAILED", error=error())))
    assert len(fired) == 1
    assert fired[0].labels["table"] == "sales.daily"
    assert "no retry left" in fired[0].annotations["summary"]
    nxt = feed(e, _refresh(1, str(uuid.uuid4()), at(86400)).life(at(86400), 5))
    assert [s.fingerprint for s in cleared(nxt)] == [fired[0].fingerprint]


def test_refresh_missed_fires_on_the_clock_when_not_completed_by_the_deadline() -> None:
    e = engine({"name": "missed", "kind": "refresh_missed", "deadline": "30m"})
    cid = str(uuid.uuid4())
    r = _refresh(1, cid)
    feed(e, [r.created(T0), r.status("RUNNING", "CREATED", T0)])
    assert e.check(at(1700)) == []
    fired = e.check(at(1900))
    assert len(fired) == 1 and "not COMPLETED by" in fired[0].annotations["summary"]
    assert fired[0].annotations["command_id"] == cid


def test_refresh_missed_uses_the_command_deadline_even_when_no_run_ever_started() -> None:
    from lineagewire.schemas import header, refresh_command

    e = engine({"name": "missed", "kind": "refresh_missed", "deadline": "1d"})
    cid = str(uuid.uuid4())
    h = header("RefreshCommand", job_namespace="lake", job_name="refresh sales.daily", run_id=str(uuid.uuid4()),
               event_time=T0)
    e.process(dict(refresh_command(h, command_id=cid, workflow_id="wf1", table="sales.daily", nominal_time=T0,
                                   query="SELECT 1", deadline=at(600))))
    assert e.check(at(500)) == []
    fired = e.check(at(700))
    assert len(fired) == 1 and fired[0].labels["table"] == "sales.daily"
    assert "PENDING" in fired[0].annotations["summary"]


# -- illegal_transition ----------------------------------------------------------------------------------------------

def test_illegal_transition_flags_forbidden_changes_contradictions_and_out_of_order_events() -> None:
    e = engine({"name": "bad", "kind": "illegal_transition"})
    r = RunBuilder()
    assert not firing(feed(e, r.life(T0, 5)))
    after_end = firing(feed(e, [r.status("RUNNING", "FINISHED", at(10))]))
    assert len(after_end) == 1 and "FINISHED -> RUNNING" in after_end[0].annotations["reason"]

    r2 = RunBuilder("other")
    feed(e, [r2.created(T0), r2.status("RUNNING", "CREATED", T0)])
    contra = firing(feed(e, [r2.status("FINISHED", "CANCELLING", at(5))]))
    assert len(contra) == 1 and "last status was RUNNING" in contra[0].annotations["reason"]

    r3 = RunBuilder("third")
    feed(e, [r3.created(T0), r3.status("RUNNING", "CREATED", T0, seq=5)])
    late = firing(feed(e, [r3.status("RUNNING", "CREATED", T0, seq=2)]))
    assert len(late) == 1 and "out of order" in late[0].annotations["reason"]

    r4 = RunBuilder("fourth")
    legal = [r4.created(T0), r4.status("RUNNING", "CREATED", at(1)), r4.status("FAILING", "RUNNING", at(2)),
             r4.status("RESTARTING", "FAILING", at(3)), r4.status("RUNNING", "RESTARTING", at(4)),
             r4.status("CANCELLING", "RUNNING", at(5)), r4.status("CANCELED", "CANCELLING", at(6))]
    assert not firing(feed(e, legal))


def test_illegal_transition_clears_on_a_later_clean_run_not_on_the_bad_one() -> None:
    e = engine({"name": "bad", "kind": "illegal_transition"})
    r = RunBuilder()
    feed(e, [r.created(T0), r.status("RUNNING", "CREATED", T0)])
    fired = firing(feed(e, [r.status("CREATED", "RUNNING", at(1))]))
    assert fired
    assert not cleared(feed(e, [r.status("RUNNING", "CREATED", at(2)), r.status("FINISHED", "RUNNING", at(3))]))
    assert [s.fingerprint for s in cleared(feed(e, RunBuilder().life(at(100), 5)))] == [fired[0].fingerprint]


# -- schema_changed and lineage_incomplete ---------------------------------------------------------------------------

def test_schema_changed_lists_added_removed_and_retyped_columns_and_a_stable_run_clears_it() -> None:
    e = engine({"name": "schema", "kind": "schema_changed"})
    r1, r2, r3 = RunBuilder(), RunBuilder(), RunBuilder()
    assert not firing(feed(e, [r1.created(T0), r1.action(T0, outputs=[table("/out/t", {"a": "int", "b": "string"})])]))
    second = feed(e, [r2.created(at(10)),
                      r2.action(at(10), outputs=[table("/out/t", {"a": "bigint", "c": "double"})]),
                      r2.action(at(11), outputs=[table("/out/t", {"a": "bigint", "c": "double"})])])
    changed = firing(second)
    assert len(changed) == 1
    assert not cleared(second)  # writing it twice in the changing run does not clear it
    ann = changed[0].annotations
    assert (ann["added"], ann["removed"], ann["retyped"]) == ("c", "b", "a: int -> bigint")
    assert changed[0].labels["dataset"] == "file//out/t"
    stable = feed(e, [r3.created(at(20)), r3.action(at(20), outputs=[table("/out/t", {"a": "bigint", "c": "double"})])])
    assert [s.fingerprint for s in cleared(stable)] == [changed[0].fingerprint]


def test_lineage_incomplete_fires_with_the_reason_and_a_complete_run_clears_it() -> None:
    e = engine({"name": "cut", "kind": "lineage_incomplete"})
    r = RunBuilder()
    fired = firing(feed(e, [r.created(T0), r.action(T0, complete=False, reason="plan walk timed out"),
                            r.status("FINISHED", "CREATED", at(5))]))
    assert len(fired) == 1 and fired[0].annotations["reason"] == "plan walk timed out"
    good = RunBuilder()
    assert [s.fingerprint for s in cleared(feed(e, [good.created(at(9)), good.action(at(9)),
                                                   good.status("FINISHED", "CREATED", at(10))]))] == \
        [fired[0].fingerprint]


# -- facts persistence and config errors -----------------------------------------------------------------------------

def test_facts_survive_a_dump_and_load_so_baselines_and_open_runs_outlive_a_restart() -> None:
    e = engine({"name": "slow", "kind": "duration_anomaly", "runs": 3},
               {"name": "stuck", "kind": "run_stuck", "max_duration": "1h"})
    for i in range(3):
        feed(e, RunBuilder().life(at(100 * i), 60))
    open_run = RunBuilder("long_job")
    feed(e, [open_run.created(at(500)), open_run.status("RUNNING", "CREATED", at(500))])
    rows = [(k, key, v) for k, key, v in e.facts.dump_dirty() if v is not None]
    facts = Facts()
    facts.load(rows)
    e2 = RuleEngine(e.rules, facts)
    assert firing(feed(e2, RunBuilder().life(at(1000), 600)))
    assert [s.labels["job"] for s in e2.check(at(500 + 3700))] == ["long_job"]


@pytest.mark.parametrize(("rule", "expected"), [
    ({"name": "x", "kind": "run_exploded"}, "rule kind 'run_exploded' is unknown; expected one of"),
    ({"name": "x", "kind": "run_stuck", "max_duration": "soon"}, "max_duration"),
    ({"name": "x", "kind": "run_failed", "severity": "loud"}, "severity='loud'; expected one of critical"),
    ({"name": "x", "kind": "run_failed", "channels": ["pager"]}, "channel(s) pager not defined"),
    ({"name": "x", "kind": "duration_anomaly", "runs": 1}, "runs: Input should be greater than or equal to 3"),
])
def test_a_wrong_rule_is_refused_with_what_was_expected(rule: dict, expected: str) -> None:
    with pytest.raises(RulesError) as info:
        parse_config({"rules": [rule]})
    assert expected in str(info.value)
