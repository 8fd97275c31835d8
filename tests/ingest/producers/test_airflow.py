"""An Airflow 3 DAG run (``airflow dags test``) with the OpenLineage provider reporting to the receiver, whose task
starts a PySpark job under OUR emitter (examples/ingest/dags/orders_dag.py): the provider's macros hand the task's
run to the job (OPENLINEAGE_PARENT_ID), so the registry shows the Airflow task run as the Spark run's parent.

Airflow runs from a venv of its own (its constraints clash with ours); the Spark job from the main venv, as a
team's Spark environment is not its Airflow's. Run once for the module.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from .conftest import AIRFLOW_VENV, EXAMPLES, Estate, Outputs, SparkRun, producer_venv, run_logged, tail

# the venv first (usefixtures come before a test's arguments): without it the module skips before the Spark job
pytestmark = [pytest.mark.producers, pytest.mark.integration, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.usefixtures("airflow_venv")]

NAMESPACE = "airflow-test"
DAG = "orders_dag"
TASK = "orders_dag.customer_totals"


@dataclass
class DagRun:
    log: str


# session-scoped: pytest sets up wider scopes first, and this must come before the estate
@pytest.fixture(scope="session")
def airflow_venv() -> pathlib.Path:
    return producer_venv(AIRFLOW_VENV, "Airflow")


@pytest.fixture(scope="module")
def dag_run(airflow_venv: pathlib.Path, estate: Estate, orders_landed: SparkRun) -> DagRun:
    venv = airflow_venv
    home = estate.base / "airflow"
    home.mkdir()
    env = estate.env(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="false",
                     AIRFLOW__CORE__DAGS_FOLDER=str(EXAMPLES / "dags"),
                     AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps({"type": "http", "url": estate.url}),
                     AIRFLOW__OPENLINEAGE__NAMESPACE=NAMESPACE,
                     LINEAGEWIRE_EXAMPLE_PYTHON=sys.executable, LINEAGEWIRE_EXAMPLE_LAKE=str(estate.lake),
                     LINEAGEWIRE_EMITTER__OUTBOX_DIR=str(estate.base / "emitter-outbox"))
    airflow = str(venv / "bin" / "airflow")
    done = run_logged([airflow, "db", "migrate"], estate.base / "airflow-migrate.log", timeout=300, cwd=home,
                      env=env)
    assert done.returncode == 0, tail(done.stdout)
    done = run_logged([airflow, "dags", "test", DAG], estate.base / "airflow-dags-test.log", timeout=600,
                      cwd=home, env=env)
    assert done.returncode == 0 and "state=success" in done.stdout, tail(done.stdout)
    return DagRun(done.stdout)


def _runs(outputs: Outputs, job: str) -> list[dict[str, Any]]:
    return outputs.registry("jobs", "show", job)["runs"]  # type: ignore[no-any-return]


def test_the_airflow_task_run_is_the_parent_of_the_spark_run_it_started(estate: Estate, outputs: Outputs,
                                                                        dag_run: DagRun) -> None:
    outputs.settle()
    estate.check_receiver()
    producers = {j["job"]: j["last_producer"] for j in outputs.registry("jobs", "list")}
    assert (producers[f"{NAMESPACE}/{TASK}"], producers[f"{NAMESPACE}/{DAG}"]) == ("Airflow", "Airflow"), producers
    task_runs = _runs(outputs, f"{NAMESPACE}/{TASK}")
    assert [r["status"] for r in task_runs] == ["FINISHED"], task_runs
    dag_runs = _runs(outputs, f"{NAMESPACE}/{DAG}")
    # `airflow dags test` reports the DAG run's COMPLETE without its START: the run starts at its first event
    assert [r["status"] for r in dag_runs] == ["FINISHED"], dag_runs
    task_run = task_runs[0]["run_id"]
    children = outputs.registry("runs", "children", task_run)["runs"]
    assert [c["job"] for c in children if c["job"].endswith("/customer_totals")], children
    spark = next(c for c in children if c["job"].endswith("/customer_totals"))
    assert (spark["parent_job"], spark["root_parent_job"]) == (f"{NAMESPACE}/{TASK}", f"{NAMESPACE}/{DAG}"), spark
    assert spark["status"] == "FINISHED" and producers[spark["job"]] == "lineagewire", (spark, producers)
    # the DAG run is the root of the chain: its Spark runs are listed by it too
    assert spark["run_id"] in {c["run_id"] for c in outputs.registry("runs", "children", dag_runs[0]["run_id"])["runs"]}

    got = outputs.openlineage.wait_for(
        lambda evs: any(e["job"]["name"] == DAG and e["eventType"] == "COMPLETE" for e in evs)
        and any(e["job"]["name"] == "customer_totals" and e["eventType"] == "COMPLETE" for e in evs), 60)
    ours = [e for e in got if e["job"]["name"] == "customer_totals" and e["eventType"] == "COMPLETE"]
    parent = ours[0]["run"]["facets"]["parent"]
    assert (parent["job"]["namespace"], parent["job"]["name"], parent["run"]["runId"]) == (NAMESPACE, TASK,
                                                                                          task_run), parent
    task_events = [e for e in got if e["job"]["name"] == TASK]
    assert task_events and all("airflow" in e["run"]["facets"] for e in task_events), task_events

    # DataHub: the Spark run's instance has the Airflow task run's (DataHub's OpenLineage converter's URN, the
    # OpenLineage run id) as its parent instance
    task_instance = f"urn:li:dataProcessInstance:{task_run}"

    def linked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in records if r["aspectName"] == "dataProcessInstanceRelationships"
                and r["entityUrn"] != task_instance and r["aspect"]["json"].get("parentInstance") == task_instance]

    assert linked(outputs.datahub(linked)), f"no DataHub run instance with {task_instance} as its parent instance"


def test_the_spark_job_started_by_airflow_reads_what_openlineage_spark_wrote(outputs: Outputs,
                                                                             orders_landed: SparkRun,
                                                                             dag_run: DagRun) -> None:
    """Our emitter and openlineage-spark name the same Parquet folder the same way: one node in the graph."""
    outputs.settle()
    graph = outputs.registry("lineage", "downstream", str(orders_landed.orders))
    totals = os.path.join(os.path.dirname(orders_landed.orders), "customer_totals")
    edges = {(e["source"], e["sink"]): e["jobs"] for e in graph["edges"]}
    assert edges.get((f"file {orders_landed.orders}", f"file {totals}")) == ["spark/customer_totals"], graph
