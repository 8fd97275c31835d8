"""A Spark run started by an Airflow task: its DataProcessInstance and DataJobs link to the task as DataHub's
Airflow plugin and OpenLineage converter name it (unit), and through the real broker and ``consume datahub``."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from datahub.api.entities.datajob import DataJob
from datahub.api.entities.dataprocess.dataprocess_instance import DataProcessInstance
from datahub.utilities.urns.data_flow_urn import DataFlowUrn
from openlineage.client.uuid import generate_static_uuid

from lineagewire.consumers.datahub.config import DataHubConfig, load_config
from lineagewire.consumers.datahub.parents import airflow_task
from lineagewire.consumers.datahub.translate import instance_urn
from lineagewire.exceptions import ConfigError
from tests.consumers.openlineage.samples import app_run
from tests.drift import assert_same

from .check import check_aspects_belong, check_metadata_file
from .test_translate import by, rendered

LOGICAL = dt.datetime(2026, 11, 1, 0, 0, tzinfo=dt.UTC)
OL_NAMESPACE = "airflow-prod"  # Airflow's [openlineage] namespace


def task_run(dag_id: str, task_id: str, try_number: int = 1) -> tuple[dict, dict]:
    """(the task run, the DAG run) as Airflow's OpenLineage provider injects them into spark-submit, with the run
    ids built as ``OpenLineageAdapter.build_task_instance_run_id`` / ``build_dag_run_id`` build them."""
    task = {"job_namespace": OL_NAMESPACE, "job_name": f"{dag_id}.{task_id}", "run_id": str(generate_static_uuid(
        instant=LOGICAL, data=f"{OL_NAMESPACE}.{dag_id}.{task_id}.{try_number}.-1".encode()))}
    dag = {"job_namespace": OL_NAMESPACE, "job_name": dag_id, "run_id": str(generate_static_uuid(
        instant=LOGICAL, data=f"{OL_NAMESPACE}.{dag_id}.0".encode()))}
    return task, dag


def orchestrated(dag_id: str = "orders_daily", task_id: str = "spark_aggregate", **kw: object) -> tuple[list[dict],
                                                                                                        dict]:
    """An application run whose parent is an Airflow task run, its events as the emitter writes them: the
    application's headers carry the task (parent) and the DAG run (root); its actions' the application
    (parent) and the DAG run (root)."""
    task, dag = task_run(dag_id, task_id)
    events = app_run(parent=task, **kw)  # type: ignore[arg-type]
    for e in events:
        e["header"]["root_parent_run"] = dag
    return events, task


def plugin_task_job(dag_id: str, task_id: str, cluster: str = "prod", platform_instance: str | None = None) -> str:
    """The DataJob URN DataHub's Airflow plugin gives a task (``AirflowGenerator.generate_datajob``'s calls)."""
    flow = DataFlowUrn.create_from_ids(orchestrator="airflow", env=cluster, flow_id=dag_id,
                                       platform_instance=platform_instance)
    return str(DataJob(id=task_id, flow_urn=flow, platform_instance=platform_instance).urn)


@pytest.mark.upstream
@pytest.mark.parametrize(("dag_id", "task_id"), [("orders_daily", "spark_aggregate"),
                                                 ("team.etl", "group.load")])  # dotted DAG id, task-group task
def test_an_airflow_parent_gives_the_plugins_flow_and_job_and_the_converters_instance(dag_id, task_id) -> None:  # noqa: ANN001
    task, dag = task_run(dag_id, task_id)
    got = airflow_task({"parent_run": task, "root_parent_run": dag}, "prod")
    assert got is not None
    assert (got.dag_id, got.task_id, got.run_id) == (dag_id, task_id, task["run_id"])
    assert got.flow == f"urn:li:dataFlow:(airflow,{dag_id},prod)"
    assert_same(got.job, plugin_task_job(dag_id, task_id), library="acryl-datahub",
                what="the DataJob URN of an Airflow task (ours, and DataHub's Airflow plugin's)")
    assert got.job == f"urn:li:dataJob:({got.flow},{task_id})"
    # DataHub's OpenLineage converter (Spark agent, GMS's OpenLineage endpoint) names a run by its run id.
    assert got.instance == f"urn:li:dataProcessInstance:{task['run_id']}"
    # The plugin's own instance needs Airflow's run id string, which the OpenLineage run id does not carry.
    plugin_dpi = DataProcessInstance.from_datajob(DataJob(id=task_id, flow_urn=DataFlowUrn.from_string(got.flow)),
                                                  id=f"{dag_id}_{task_id}_scheduled__{LOGICAL.isoformat()}")
    assert str(plugin_dpi.urn) != got.instance
    staged = airflow_task({"parent_run": task, "root_parent_run": dag}, "staging", "eu")
    assert staged is not None
    assert_same(staged.job, plugin_task_job(dag_id, task_id, "staging", "eu"), library="acryl-datahub",
                what="the DataJob URN of an Airflow task in a cluster and platform instance of its own")


def test_parents_of_other_shapes_are_not_airflow_tasks() -> None:
    task, dag = task_run("orders_daily", "spark_aggregate")
    app = {"job_namespace": "spark", "job_name": "orders_daily.spark_aggregate", "run_id": str(uuid.uuid4())}
    for hdr in ({"parent_run": task},  # no root: cannot split <dag_id>.<task_id> without guessing
                {"parent_run": app, "root_parent_run": dag},  # a sub-run's parent: our application run
                {"parent_run": {**task, "job_name": "other.spark_aggregate"}, "root_parent_run": dag},
                {"parent_run": {**task, "job_name": "orders_daily."}, "root_parent_run": dag},
                {"parent_run": {**task, "job_name": "orders_daily.a,b"}, "root_parent_run": {**dag}},
                {"parent_run": task, "root_parent_run": dag, "schedule": {"workflow_id": "wf"}}):
        assert airflow_task(hdr, "prod") is None, hdr


def test_the_application_run_links_to_the_airflow_task_run_and_its_jobs_to_the_task() -> None:
    events, task = orchestrated()
    records = rendered(events, DataHubConfig(orchestrator_cluster="airflow-eu"))
    hdr = events[0]["header"]
    dpi = instance_urn(hdr["job_namespace"], hdr["job_name"], hdr["run_id"])
    rel = by(records, "dataProcessInstanceRelationships", dpi)[0]
    assert rel["parentInstance"] == f"urn:li:dataProcessInstance:{task['run_id']}"
    assert rel["parentTemplate"] == "urn:li:dataFlow:(spark,daily_orders,prod)"
    task_job = plugin_task_job("orders_daily", "spark_aggregate", "airflow-eu")
    props = by(records, "dataProcessInstanceProperties", dpi)[0]["customProperties"]
    assert (props["airflow.dagId"], props["airflow.taskId"], props["airflow.taskRunId"], props["airflow.dataJob"]) \
        == ("orders_daily", "spark_aggregate", task["run_id"], task_job)
    # The DataJob the run's own lineage gives, and each action's DataJob, have the task as an upstream job.
    flow = "urn:li:dataFlow:(spark,daily_orders,prod)"
    own = by(records, "dataJobInputOutput", f"urn:li:dataJob:({flow},daily_orders)")[0]
    assert own["inputDatajobEdges"] == [{"destinationUrn": task_job}]
    action_job = f"urn:li:dataJob:({flow},daily_orders.insert_into_hadoop_fs_relation_command.daily_orders_out)"
    patches = [r for r in records if r["changeType"] == "PATCH" and r["entityUrn"] == action_job]
    assert len(patches) == 2  # one per action
    assert all(p["aspect"]["json"] == [{"op": "add", "path": f"/inputDatajobEdges/{task_job}",
                                        "value": {"destinationUrn": task_job}}] for p in patches)


def test_a_run_without_an_airflow_parent_keeps_its_links() -> None:
    parent = {"job_namespace": "team", "job_name": "wrapper", "run_id": str(uuid.uuid4())}
    events = app_run(parent=parent)
    records = rendered(events)
    hdr = events[0]["header"]
    dpi = instance_urn(hdr["job_namespace"], hdr["job_name"], hdr["run_id"])
    assert by(records, "dataProcessInstanceRelationships", dpi)[0]["parentInstance"] == instance_urn(
        "team", "wrapper", parent["run_id"])
    assert not any(r["changeType"] == "PATCH" for r in records)
    assert all("inputDatajobEdges" not in r["aspect"]["json"] for r in records
               if r["aspectName"] == "dataJobInputOutput")


def test_orchestrator_cluster_is_checked_like_cluster() -> None:
    with pytest.raises(ConfigError, match=r"orchestrator_cluster='a,b'"):
        load_config(orchestrator_cluster="a,b", file={"path": "x.json"})
    assert load_config(file={"path": "x.json"}).orchestrator_cluster == "prod"


@pytest.mark.integration
@pytest.mark.slow
def test_consume_datahub_file_links_the_spark_run_to_the_airflow_task(settings, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from .test_service import consume_into_file, publish

    events, task = orchestrated(actions=1)
    publish(settings, events)
    out = tmp_path / "out.json"
    monkeypatch.setenv("LINEAGEWIRE_DATAHUB__ORCHESTRATOR_CLUSTER", "airflow-eu")
    consume_into_file(settings, out, len(events), tmp_path)
    check_metadata_file(out)
    records = json.loads(out.read_text())
    check_aspects_belong(records)
    hdr = events[0]["header"]
    dpi = instance_urn(hdr["job_namespace"], hdr["job_name"], hdr["run_id"])
    assert by(records, "dataProcessInstanceRelationships", dpi)[0]["parentInstance"] == \
        f"urn:li:dataProcessInstance:{task['run_id']}"
    task_job = plugin_task_job("orders_daily", "spark_aggregate", "airflow-eu")
    # Each DataJob's upstream jobs: the run's own (upserted) and the action's (patched), both the Airflow task.
    edges = {(r["entityUrn"], p["value"]["destinationUrn"]) for r in records if r["changeType"] == "PATCH"
             and r["aspectName"] == "dataJobInputOutput" for p in r["aspect"]["json"]}
    edges |= {(r["entityUrn"], e["destinationUrn"]) for r in records if r["changeType"] == "UPSERT"
              and r["aspectName"] == "dataJobInputOutput" for e in r["aspect"]["json"].get("inputDatajobEdges") or ()}
    flow = "urn:li:dataFlow:(spark,daily_orders,prod)"
    assert edges == {(f"urn:li:dataJob:({flow},daily_orders)", task_job), (
        f"urn:li:dataJob:({flow},daily_orders.insert_into_hadoop_fs_relation_command.daily_orders_out)", task_job)}
