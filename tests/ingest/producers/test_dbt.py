"""``dbt-ol run`` (openlineage-dbt) with dbt-duckdb on examples/ingest/dbt_project: three models, one failing, reading
what the openlineage-spark job wrote, reported over HTTP to the receiver. In its own venv (dbt's pins clash with
ours), run once for the module in each of dbt-ol's two ways:

* from dbt's artifacts once dbt is done (the default): a run per model, named ``<db>.<schema>.<project>.<model>``,
  no error message for a failed model (openlineage-dbt 1.54 sends none that way);
* from dbt's structured logs as dbt runs (``--consume-structured-logs``): a run per model named
  ``model.<project>.<model>``, a child run per SQL statement, and the error message of a failed model.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
from dataclasses import dataclass
from typing import Any

import pytest

from .conftest import DBT_VENV, EXAMPLES, Estate, Outputs, SparkRun, producer_venv, run_logged, tail

# the venv first (usefixtures come before a test's arguments): without it the module skips before the Spark job
pytestmark = [pytest.mark.producers, pytest.mark.integration, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.usefixtures("dbt_venv")]

NAMESPACE = "dbt-test"  # the artifacts way's; the structured logs' is NAMESPACE + "-logs"
PROJECT = "lineagewire_orders"
MODELS = {"customer_revenue": "FINISHED", "big_customers": "FINISHED", "customer_margin": "FAILED"}


@dataclass
class DbtRun:
    code: int
    log: str
    logs_code: int
    logs_log: str
    db: pathlib.Path


# session-scoped: pytest sets up wider scopes first, and this must come before the estate
@pytest.fixture(scope="session")
def dbt_venv() -> pathlib.Path:
    return producer_venv(DBT_VENV, "dbt")


@pytest.fixture(scope="module")
def dbt_run(dbt_venv: pathlib.Path, estate: Estate, orders_landed: SparkRun) -> DbtRun:
    venv = dbt_venv
    project = estate.base / "dbt_project"
    shutil.copytree(EXAMPLES / "dbt_project", project)
    db = estate.base / "orders.duckdb"
    env = estate.env(PATH=f"{venv / 'bin'}:{estate.env()['PATH']}", OPENLINEAGE_URL=estate.url,
                     LAKE_DIR=str(estate.lake), DBT_DUCKDB_PATH=str(db), DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    args = [str(venv / "bin" / "dbt-ol"), "run", "--profiles-dir", str(project), "--project-dir", str(project)]
    done = run_logged(args, estate.base / "dbt.log", timeout=300, cwd=project,
                      env={**env, "OPENLINEAGE_NAMESPACE": NAMESPACE})
    logs = run_logged([*args, "--consume-structured-logs"], estate.base / "dbt-logs.log", timeout=300, cwd=project,
                      env={**env, "OPENLINEAGE_NAMESPACE": f"{NAMESPACE}-logs"})
    return DbtRun(done.returncode, done.stdout, logs.returncode, logs.stdout, db)


def _job(outputs: Outputs, model: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    jobs = [j for j in outputs.registry("jobs", "list") if j["job"].startswith(f"{namespace}/")
            and j["job"].endswith(f".{model}")]
    assert len(jobs) == 1, (model, outputs.registry("jobs", "list"))
    return jobs[0]


def _only_run(outputs: Outputs, job: str) -> str:
    runs = outputs.registry("jobs", "show", job)["runs"]
    assert len(runs) == 1, runs
    return runs[0]["run_id"]  # type: ignore[no-any-return]


def test_the_dbt_model_reading_the_spark_output_is_downstream_of_the_spark_job(outputs: Outputs,
                                                                              orders_landed: SparkRun,
                                                                              dbt_run: DbtRun) -> None:
    """openlineage-spark names the Parquet folder (file, /…/lake/orders); openlineage-dbt names dbt-duckdb's
    source by its relation (duckdb:///…/orders.duckdb, orders.main.orders), and the SQL reads the folder
    (read_parquet): the translation names the input as the folder, so the graph goes on from Spark to dbt."""
    outputs.settle()
    nodes = outputs.registry("lineage", "downstream", str(orders_landed.orders))["nodes"]
    names = [n["name"] for n in nodes]
    assert f"{dbt_run.db.stem}.main.customer_revenue" in names, names
    # and at column level: dbt's column lineage named the table function (read_parquet), now the folder
    column = outputs.registry("lineage", "upstream", "--namespace", _duckdb(dbt_run),
                              f"{dbt_run.db.stem}.main.customer_revenue", "--column", "revenue")["nodes"]
    assert (str(orders_landed.orders), "amount", 1) in {(n["name"], n["field"], n["depth"]) for n in column}, column


def test_dbt_models_arrive_with_their_status_parent_and_lineage(estate: Estate, outputs: Outputs,
                                                                dbt_run: DbtRun) -> None:
    # dbt itself fails (one model does); dbt-ol still reports every model, then exits with dbt's status
    assert dbt_run.code == 1 and "Emitted 8 OpenLineage events" in dbt_run.log, tail(dbt_run.log)
    # (as many as dbt's log has statements for: their number varies)
    assert dbt_run.logs_code == 1 and re.search(r"Emitted \d\d+ OpenLineage events", dbt_run.logs_log), \
        tail(dbt_run.logs_log)
    outputs.settle()
    estate.check_receiver()
    for namespace in (NAMESPACE, f"{NAMESPACE}-logs"):
        for model, status in MODELS.items():
            job = _job(outputs, model, namespace)
            assert (job["last_status"], job["last_producer"]) == (status, "dbt"), (namespace, job)
        # each model's run is a child of the dbt command's run (dbt-ol's ParentRunFacet)
        command = _only_run(outputs, f"{namespace}/dbt-run-{PROJECT}")
        children = {c["job"].rsplit(".", 1)[-1]: c["status"]
                    for c in outputs.registry("runs", "children", command)["runs"]
                    if c["job"].rsplit(".", 1)[-1] in MODELS}
        assert children == MODELS, (namespace, outputs.registry("runs", "children", command))
    # big_customers reads customer_revenue: one graph across the models
    revenue = [n["name"] for n in outputs.registry("lineage", "downstream", "--namespace", _duckdb(dbt_run),
                                                   f"{dbt_run.db.stem}.main.customer_revenue")["nodes"]]
    assert f"{dbt_run.db.stem}.main.big_customers" in revenue, revenue
    # and at column level, as dbt-ol's columnLineage says (big_customers.revenue is customer_revenue.revenue)
    column = outputs.registry("lineage", "upstream", "--namespace", _duckdb(dbt_run),
                              f"{dbt_run.db.stem}.main.big_customers", "--column", "revenue")["nodes"]
    assert (f"{dbt_run.db.stem}.main.customer_revenue", "revenue", 1) in {(n["name"], n["field"], n["depth"])
                                                                          for n in column}, column

    got = outputs.openlineage.wait_for(
        lambda evs: sum(e["job"]["namespace"] == NAMESPACE and e["eventType"] in ("COMPLETE", "FAIL")
                        for e in evs) >= 4, 60)
    ended = {e["job"]["name"].rsplit(".", 1)[-1]: e["eventType"] for e in got
             if e["job"]["namespace"] == NAMESPACE and e["eventType"] in ("COMPLETE", "FAIL")}
    assert ended == {"customer_revenue": "COMPLETE", "big_customers": "COMPLETE", "customer_margin": "FAIL",
                     f"dbt-run-{PROJECT}": "FAIL"}, ended
    # dbt's own facets come back out unchanged (lossless OpenLineage in and out)
    assert all("dbt_version" in e["run"]["facets"] for e in got if e["job"]["namespace"] == NAMESPACE)

    def failed_in_datahub(records: list[dict[str, Any]]) -> bool:
        return any(r["aspectName"] == "dataProcessInstanceRunEvent" and "customer_margin" in json.dumps(r)
                   and (r["aspect"]["json"].get("result") or {}).get("type") == "FAILURE" for r in records)

    records = outputs.datahub(failed_in_datahub)
    assert failed_in_datahub(records), "no failed run of customer_margin in DataHub"
    assert any(r["entityType"] == "dataJob" and "customer_margin" in r["entityUrn"] for r in records)


def _duckdb(run: DbtRun) -> str:
    return f"duckdb://{run.db}"


def _spark_page() -> dict[str, Any]:
    """The page the same rule gives for a Spark job of ours that fails (events as the emitter sends them)."""
    from lineagewire.consumers.alerting.engine import RuleEngine
    from tests.consumers.alerting.events import T0, RunBuilder

    engine = RuleEngine(outputs_rules().build_rules())
    error = {"error_class": "org.apache.spark.SparkException", "message": "Job aborted", "stack_trace": None}
    fired = [s for ev in RunBuilder().life(T0, 10, end="FAILED", error=error) for s in engine.process(ev)
             if s.firing]
    assert len(fired) == 1
    return {"labels": fired[0].labels, "annotations": fired[0].annotations}


def outputs_rules() -> Any:
    from lineagewire.consumers.alerting.config import parse_config

    return parse_config({"rules": [{"name": "failed", "kind": "run_failed"}]})


def test_a_failing_dbt_model_pages_like_a_failing_spark_job(outputs: Outputs, dbt_run: DbtRun) -> None:
    outputs.settle()
    alerts = outputs.alerts.wait("/hook", lambda rs: sum("customer_margin" in r.body.decode() for r in rs) >= 2,
                                 timeout=60)
    fired = {a["labels"]["namespace"]: a for r in alerts for a in r.json["alerts"]
             if a["labels"]["job"].endswith(".customer_margin") and a["status"] == "firing"}
    assert set(fired) == {NAMESPACE, f"{NAMESPACE}-logs"}, [r.json for r in alerts]
    spark = _spark_page()
    for alert in fired.values():
        # the labels and annotations a failing Spark job's page carries
        assert set(alert["labels"]) == set(spark["labels"]), (alert["labels"], spark["labels"])
        assert set(alert["annotations"]) >= set(spark["annotations"]), (alert["annotations"], spark["annotations"])
        assert alert["labels"]["alertname"] == "failed" and alert["labels"]["kind"] == "run_failed", alert
    # the structured logs carry dbt's error, and the page says it
    said = fired[f"{NAMESPACE}-logs"]["annotations"]
    assert "Runtime Error in model customer_margin" in said["summary"], said
    assert 'Binder Error: Referenced column "cost" not found' in said["error_message"], said
