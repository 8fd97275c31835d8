"""Orchestrator parents (issue 22, item 5): Airflow's spark.openlineage.* conf keys and OPENLINEAGE_*_ID."""

from __future__ import annotations

import logging
import uuid

import pytest

from lineagewire.producers.spark import job_run
from lineagewire.producers.spark.parents import orchestrator_parents
from tests.helpers import read_topic

TASK_RUN, DAG_RUN = str(uuid.uuid4()), str(uuid.uuid4())
AIRFLOW_CONF = {
    "spark.openlineage.parentJobNamespace": "airflow", "spark.openlineage.parentJobName": "orders_dag.load",
    "spark.openlineage.parentRunId": TASK_RUN,
    "spark.openlineage.rootParentJobNamespace": "airflow", "spark.openlineage.rootParentJobName": "orders_dag",
    "spark.openlineage.rootParentRunId": DAG_RUN,
}
TASK = {"job_namespace": "airflow", "job_name": "orders_dag.load", "run_id": TASK_RUN}
DAG = {"job_namespace": "airflow", "job_name": "orders_dag", "run_id": DAG_RUN}


def test_airflow_conf_keys_give_parent_and_root() -> None:
    assert orchestrator_parents(AIRFLOW_CONF, {}) == (TASK, DAG)


def test_environment_forms_and_conf_precedence() -> None:
    env = {"OPENLINEAGE_PARENT_ID": f"airflow/orders_dag/load/{TASK_RUN}",  # a job name with a slash
           "OPENLINEAGE_ROOT_PARENT_ID": f"airflow/orders_dag/{DAG_RUN}"}
    assert orchestrator_parents({}, env) == ({**TASK, "job_name": "orders_dag/load"}, DAG)
    other = str(uuid.uuid4())
    conf = {"spark.openlineage.parentJobNamespace": "ns", "spark.openlineage.parentJobName": "j",
            "spark.openlineage.parentRunId": other}
    assert orchestrator_parents(conf, env) == ({"job_namespace": "ns", "job_name": "j", "run_id": other}, DAG)
    assert orchestrator_parents({}, {}) == (None, None)


@pytest.mark.parametrize(("conf", "env", "says"), [
    ({"spark.openlineage.parentRunId": TASK_RUN}, {}, "set without spark.openlineage.parentJobNamespace"),
    ({}, {"OPENLINEAGE_PARENT_ID": "airflow/only-two"}, "expected namespace/job/runId"),
    ({**AIRFLOW_CONF, "spark.openlineage.parentRunId": "not-a-uuid"}, {}, "is not a UUID"),
])
def test_a_malformed_parent_is_left_out_with_a_warning(conf, env, says, caplog) -> None:  # noqa: ANN001
    with caplog.at_level(logging.WARNING, logger="lineagewire.producers.spark.parents"):
        parent, _root = orchestrator_parents(conf, env)
    assert parent is None
    assert says in caplog.text


@pytest.mark.integration
@pytest.mark.spark
def test_runs_and_actions_carry_the_airflow_parent_and_root(spark, settings, make_emitter) -> None:  # noqa: ANN001
    # Airflow passes them to spark-submit as --conf; the session's conf is where both forms land.
    for key, value in AIRFLOW_CONF.items():
        spark.conf.set(key, value)
    try:
        emitter = make_emitter(settings=settings, listeners=["kafka"], job_name="orders-load")
    finally:
        for key in AIRFLOW_CONF:
            spark.conf.unset(key)
    spark.range(3).count()
    emitter.flush()  # its callback lands in the application run before the job_run opens
    with job_run(spark, "step") as step:
        spark.range(4).count()
    emitter.close(20)

    events = read_topic(settings, settings.topics.jobs, expected=8, timeout=60)
    app = [e for e in events if e["header"]["run_id"] == emitter.app_run.run_id]
    assert app and all(e["header"]["parent_run"] == TASK and e["header"]["root_parent_run"] == DAG for e in app
                       if not e["header"]["schema_name"].endswith("ActionLineageEvent"))
    app_ref = emitter.app_run.ref
    action = next(e for e in app if e["header"]["schema_name"].endswith("ActionLineageEvent"))
    assert action["header"]["parent_run"] == app_ref and action["header"]["root_parent_run"] == DAG
    child = [e for e in events if e["header"]["run_id"] == step.run_id]
    assert child and all(e["header"]["root_parent_run"] == DAG for e in child)
    assert child[0]["header"]["parent_run"] == app_ref


@pytest.mark.integration
@pytest.mark.spark
def test_the_environment_parent_alone_is_the_root_of_the_runs_below(spark, settings, make_emitter,  # noqa: ANN001
                                                                    monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("OPENLINEAGE_PARENT_ID", f"airflow/orders_dag.load/{TASK_RUN}")
    monkeypatch.delenv("OPENLINEAGE_ROOT_PARENT_ID", raising=False)
    emitter = make_emitter(settings=settings, listeners=["kafka"], job_name="orders-load-env")
    spark.range(3).count()
    emitter.close(20)

    events = read_topic(settings, settings.topics.jobs, expected=4, timeout=60)
    kinds = {e["header"]["schema_name"].rsplit(".", 1)[1]: e for e in events}
    assert kinds["JobCreatedEvent"]["header"]["parent_run"] == TASK
    assert kinds["JobCreatedEvent"]["header"]["root_parent_run"] is None, "the parent is the root itself"
    action = kinds["ActionLineageEvent"]["header"]
    assert action["parent_run"] == emitter.app_run.ref and action["root_parent_run"] == TASK
