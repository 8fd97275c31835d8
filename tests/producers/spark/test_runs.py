"""Run events through a real SparkSession and the real broker."""

from __future__ import annotations

import pytest

from lineagewire.producers.spark import job_run
from tests.helpers import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _by_run(events: list[dict]) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for e in events:
        runs.setdefault(e["header"]["run_id"], []).append(e)
    for evs in runs.values():
        evs.sort(key=lambda e: e["header"]["sequence"])
    return runs


def _statuses(events: list[dict]) -> list[tuple]:
    return [(e["old_status"], e["new_status"], e["lifecycle_state"]) for e in events
            if e["header"]["schema_name"].endswith("JobStatusChangedEvent")]


def test_application_run_created_running_finished(spark, settings, make_emitter) -> None:  # noqa: ANN001
    emitter = make_emitter(settings=settings, listeners=["kafka"], job_name="app-under-test")
    spark.range(5).selectExpr("id * 2 AS x").count()
    emitter.close(20)

    events = read_topic(settings, settings.topics.jobs, expected=4, timeout=60)
    runs = _by_run(events)
    assert list(runs) == [emitter.app_run.run_id]
    evs = runs[emitter.app_run.run_id]
    assert [e["header"]["sequence"] for e in evs] == list(range(len(evs)))
    assert evs[0]["header"]["schema_name"].endswith("JobCreatedEvent")
    assert evs[0]["spec"]["engine"] == "spark" and evs[0]["spec"]["engine_version"] == spark.version
    assert evs[0]["spec"]["conf"]["spark.app.name"] == spark.sparkContext.appName
    assert _statuses(evs) == [("CREATED", "RUNNING", "STARTED"), ("RUNNING", "FINISHED", "FINISHED")]
    actions = [e for e in evs if e["header"]["schema_name"].endswith("ActionLineageEvent")]
    assert [a["action_name"] for a in actions] == ["count"]
    assert actions[0]["header"]["parent_run"]["run_id"] == emitter.app_run.run_id
    assert all(e["header"]["job_name"] == "app-under-test" for e in evs)


def test_job_run_carries_parent_schedule_and_given_run_id(spark, settings, make_emitter) -> None:  # noqa: ANN001
    import datetime as dt

    emitter = make_emitter(settings=settings, listeners=["kafka"])
    parent = {"job_namespace": "wf", "job_name": "workflow", "run_id": "wf-run-1"}
    schedule = {"workflow_id": "w1", "command_id": "c1", "nominal_time": dt.datetime(2026, 11, 22, tzinfo=dt.UTC),
                "attempt": 1}
    with job_run(spark, "refresh t", parent=parent, schedule=schedule, run_id="cmd-123", sql="SELECT 1") as run:
        assert run.run_id == "cmd-123"
        spark.range(3).count()
    emitter.close(20)

    events = read_topic(settings, settings.topics.jobs, expected=7, timeout=60)
    mine = _by_run(events)["cmd-123"]
    assert [e["header"]["sequence"] for e in mine] == list(range(len(mine)))
    # the fields a job_run was not given (what triggered the refresh) read back as null
    assert all(e["header"]["schedule"] == {**schedule, "trigger": None, "trigger_run": None} for e in mine)
    created, *rest = mine
    assert created["header"]["parent_run"] == parent and created["spec"]["sql"] == "SELECT 1"
    assert _statuses(mine) == [("CREATED", "RUNNING", "STARTED"), ("RUNNING", "FINISHED", "FINISHED")]
    actions = [e for e in rest if e["header"]["schema_name"].endswith("ActionLineageEvent")]
    assert [a["action_name"] for a in actions] == ["count"]
    assert actions[0]["header"]["parent_run"] == run.ref
    # the application run saw no action of its own
    app = _by_run(events)[emitter.app_run.run_id]
    assert not [e for e in app if e["header"]["schema_name"].endswith("ActionLineageEvent")]
