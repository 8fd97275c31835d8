"""The openlineage-spark jar (Maven Central) on a PySpark job that does not use our emitter, over HTTP into the
receiver: a team that already runs OpenLineage on Spark adopts lineagewire by changing one URL."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Estate, Outputs, SparkRun

pytestmark = [pytest.mark.producers, pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

APP = "orders_ingest"


def _ours(outputs: Outputs) -> list[dict[str, Any]]:
    return [j for j in outputs.registry("jobs", "list") if j["job"].split("/", 1)[1].startswith(APP)]


def test_an_openlineage_spark_job_arrives_in_every_output(estate: Estate, outputs: Outputs,
                                                          orders_landed: SparkRun) -> None:
    outputs.settle()
    estate.check_receiver()
    jobs = _ours(outputs)
    # The application and its write action, both from openlineage-spark (namespace spark-ol), none from our
    # emitter: it was off (spark.lineagewire.enabled=false).
    assert jobs and all(j["job"].startswith("spark-ol/") for j in jobs), jobs
    assert {(j["last_status"], j["last_producer"]) for j in jobs} == {("FINISHED", "openlineage-spark")}, jobs
    orders = str(orders_landed.orders)
    action = next(j for j in jobs if j["job"] != f"spark-ol/{APP}")
    shown = outputs.registry_text("runs", "show", action["last_run"])
    assert f"file {orders}" in shown.split("outputs:")[1], shown
    assert f"spark-ol/{APP}" in shown, "the action run does not name its application run as its parent"

    got = outputs.openlineage.wait_for(
        lambda evs: any(e["job"]["name"] == APP and e["eventType"] == "COMPLETE" for e in evs), 60)
    written = [o for e in got if e["job"]["name"].startswith(f"{APP}.") for o in e.get("outputs", [])]
    assert {(o["namespace"], o["name"]) for o in written} == {("file", orders)}, written
    assert any("schema" in o.get("facets", {}) for o in written)

    def arrived(records: list[dict[str, Any]]) -> bool:
        return any(r["entityType"] == "dataset" and orders in r["entityUrn"] for r in records) and \
            any(r["entityType"] == "dataJob" and APP in r["entityUrn"] for r in records)

    assert arrived(outputs.datahub(arrived)), "no DataHub dataset for the Spark output, or no dataJob for its job"
