"""Views and Iceberg tables in DataHub: named and described as DataHub's own sources do.

A view gets ``upstreamLineage``, ``subTypes`` [View] and ``viewProperties`` (its SQL text), as acryl-datahub's
SQL sources describe views; an Iceberg table is ``urn:li:dataPlatform:iceberg`` with ``db.table`` and its
Spark catalog as platform instance, as DataHub's Iceberg source names it. Checked on the translator, with
``datahub check metadata-file``, and through the real broker into the GMS stand-in on 127.0.0.1.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from typing import Any

import pytest
from datahub.ingestion.sink.file import write_metadata_file

from lineagewire.consumers.datahub.config import DataHubConfig, load_config
from lineagewire.consumers.datahub.handler import DataHubHandler
from lineagewire.consumers.datahub.proposals import record as render
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy
from lineagewire.exceptions import ConfigError
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import action_lineage, dataset, header, schema_field
from tests.helpers import wait_for

from .check import check_aspects_belong, check_metadata_file
from .gms import FakeGms

WAREHOUSE = "file:/data/warehouse"
VIEW_SQL = "SELECT id, upper(k) AS uk FROM orders WHERE v > 0"
TABLE = "urn:li:dataset:(urn:li:dataPlatform:hive,default.orders,PROD)"
VIEW = "urn:li:dataset:(urn:li:dataPlatform:hive,default.orders_v,PROD)"
ICEBERG_T = "urn:li:dataset:(urn:li:dataPlatform:iceberg,ice.db.t,PROD)"
ICEBERG_S = "urn:li:dataset:(urn:li:dataPlatform:iceberg,ice.db.s,PROD)"


def _table(name: str, **kw: Any) -> dict[str, Any]:
    return dataset("file", f"/data/warehouse/{name}", format="parquet", fields=[schema_field("id", "int")],
                   symlinks=[{"namespace": WAREHOUSE, "name": f"default.{name}", "type": "TABLE"}], **kw)


def _view(**kw: Any) -> dict[str, Any]:
    """A view as the emitter names it: the catalog's namespace and name, a TABLE symlink of the same name."""
    return dataset(WAREHOUSE, "default.orders_v", fields=[schema_field("id", "int"), schema_field("uk", "string")],
                   symlinks=[{"namespace": WAREHOUSE, "name": "default.orders_v", "type": "TABLE"}],
                   dataset_type="VIEW", **kw)


def _iceberg(table: str, catalog: str | None = "ice") -> dict[str, Any]:
    """An Iceberg table as the emitter names it: its location, a TABLE symlink in the warehouse's namespace and the
    Spark catalog's name in properties."""
    return dataset("file", f"/lake/db/{table}", format="iceberg", fields=[schema_field("id", "int")],
                   symlinks=[{"namespace": "file:/lake", "name": f"db.{table}", "type": "TABLE"}],
                   properties={"version": "42", **({"catalog": catalog} if catalog else {})})


def _action(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], plan_node: str, action_id: str,
            sql: str | None = None, run_id: str = "r-1") -> dict[str, Any]:
    hdr = header("ActionLineageEvent", job_namespace="spark", job_name="views", run_id=run_id,
                 event_time=dt.datetime(2026, 11, 1, 3, 0, tzinfo=dt.UTC))
    out = outputs[0] if outputs else None
    column_lineage = [] if out is None else [{
        "namespace": out["namespace"], "name": out["name"], "field": "id",
        "inputs": [{"namespace": i["namespace"], "name": i["name"], "field": "id", "transformations": [
            {"type": "DIRECT", "subtype": "IDENTITY", "description": "", "masking": False}]} for i in inputs]}]
    return action_lineage(hdr, action_id, "command", inputs=inputs, outputs=outputs, plan_node=plan_node, sql=sql,
                          column_lineage=column_lineage, duration_ms=5)


def view_events(run_id: str = "r-1") -> list[dict[str, Any]]:
    """CREATE VIEW orders_v AS ... FROM orders; a write that reads the view; an Iceberg write from another."""
    return [
        _action([_table("orders")], [_view(operation="CreateView", view_sql=VIEW_SQL)], "CreateViewCommand", "0",
                f"CREATE VIEW orders_v AS {VIEW_SQL}", run_id),
        _action([_view()], [_table("report", operation="Overwrite")], "InsertIntoHadoopFsRelationCommand", "1",
                run_id=run_id),
        _action([_iceberg("s")], [_iceberg("t")], "AppendData", "2", run_id=run_id),
    ]


def rendered(events: list[dict[str, Any]], config: DataHubConfig | None = None) -> list[dict[str, Any]]:
    t = Translator(config)
    return [render(p) for e in events for p in t.translate(e)]


def aspects(records: list[dict[str, Any]], urn: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["entityUrn"] == urn:
            out.setdefault(r["aspectName"], []).append(r["aspect"]["json"])
    return out


def test_a_view_gets_upstream_lineage_subtype_and_view_properties(tmp_path) -> None:  # noqa: ANN001
    records = rendered(view_events())
    view = aspects(records, VIEW)
    assert view["subTypes"] == [{"typeNames": ["View"]}] * 2  # as the output that made it, and as the read input
    assert view["viewProperties"] == [{"materialized": False, "viewLogic": VIEW_SQL, "viewLanguage": "SQL"}]
    (upstream,) = view["upstreamLineage"]
    assert [u["dataset"] for u in upstream["upstreams"]] == [TABLE]
    assert upstream["fineGrainedLineages"][0]["upstreams"] == [f"urn:li:schemaField:({TABLE},id)"]
    # The write reading the view is fed by the view, not by the view's table.
    (report,) = aspects(records, "urn:li:dataset:(urn:li:dataPlatform:hive,default.report,PROD)")["upstreamLineage"]
    assert [u["dataset"] for u in report["upstreams"]] == [VIEW]
    # A table is no view.
    assert "subTypes" not in aspects(records, TABLE) and "viewProperties" not in aspects(records, TABLE)
    path = tmp_path / "mcps.json"
    t = Translator()
    write_metadata_file(path, [p for e in view_events() for p in t.translate(e)])
    check_metadata_file(path)
    check_aspects_belong(json.loads(path.read_text()))


def test_a_view_without_its_sql_and_a_dataset_of_version_one_events() -> None:
    no_sql = _action([_table("orders")], [_view(operation="CreateView")], "CreateViewCommand", "0")
    assert aspects(rendered([no_sql]), VIEW)["viewProperties"] == [
        {"materialized": False, "viewLogic": "", "viewLanguage": "SQL"}]
    old = _action([_table("orders")], [_table("report")], "InsertIntoHadoopFsRelationCommand", "0")
    for d in (*old["inputs"], *old["outputs"]):  # datasets decoded from a version-1 event have no such keys
        del d["dataset_type"], d["view_sql"]
    assert not {"subTypes", "viewProperties"} & {r["aspectName"] for r in rendered([old])}


def test_iceberg_tables_are_named_as_datahubs_iceberg_source_names_them() -> None:
    records = rendered(view_events())
    io = [r["aspect"]["json"] for r in records if r["aspectName"] == "dataJobInputOutput"][-1]
    assert [e["destinationUrn"] for e in io["inputDatasetEdges"]] == [ICEBERG_S]
    assert [e["destinationUrn"] for e in io["outputDatasetEdges"]] == [ICEBERG_T]
    assert io["outputDatasetFields"] == [f"urn:li:schemaField:({ICEBERG_T},id)"]
    (upstream,) = aspects(records, ICEBERG_T)["upstreamLineage"]
    assert [u["dataset"] for u in upstream["upstreams"]] == [ICEBERG_S]
    assert aspects(records, ICEBERG_T)["schemaMetadata"][0]["platform"] == "urn:li:dataPlatform:iceberg"


def test_the_platform_instance_of_an_iceberg_catalog_is_configurable() -> None:
    cfg = DataHubConfig(env="DEV", iceberg_platform_instances={"ice": "prod-lake"}, platform_instance="other")
    names = Translator(cfg).names
    assert names.urn(_iceberg("t")) == "urn:li:dataset:(urn:li:dataPlatform:iceberg,prod-lake.db.t,DEV)"
    # A catalog not listed is its own instance; an event without the catalog (older emitters) gets the
    # platform's configured instance.
    assert names.urn(_iceberg("t", "lake2")) == "urn:li:dataset:(urn:li:dataPlatform:iceberg,lake2.db.t,DEV)"
    assert names.urn(_iceberg("t", None)) == "urn:li:dataset:(urn:li:dataPlatform:iceberg,other.db.t,DEV)"
    # An Iceberg table read by path (no catalog table) keeps its path, as any file.
    by_path = dataset("file", "/lake/db/t", format="iceberg")
    assert names.urn(by_path) == "urn:li:dataset:(urn:li:dataPlatform:file,other./lake/db/t,DEV)"
    with pytest.raises(ConfigError, match=r"iceberg_platform_instances.*expected a Spark catalog name mapped to"):
        load_config(iceberg_platform_instances={"ice": "a,b"})


@pytest.mark.integration
def test_views_and_iceberg_tables_reach_gms_through_the_broker(settings, group_id) -> None:  # noqa: ANN001
    events = view_events(str(uuid.uuid4()))
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)

    def got(gms: FakeGms) -> dict[tuple[str, str], Any]:
        return {(m["entityUrn"], m["aspectName"]): json.loads(m["aspect"]["value"]) for m in gms.snapshot()}

    with FakeGms() as gms:
        rt = ConsumerRuntime(settings, DataHubHandler(load_config(rest={"gms_url": gms.url})), group_id=group_id,
                             retry=RetryPolicy(initial=0.05, maximum=0.5, jitter=0.01))
        thread = threading.Thread(target=rt.run, daemon=True)
        thread.start()
        wait_for(lambda: {(VIEW, "viewProperties"), (ICEBERG_T, "upstreamLineage")} <= set(got(gms)), timeout=90)
        rt.stop()
        thread.join(30)
        assert gms.rejected == []
        seen = got(gms)
    assert seen[(VIEW, "subTypes")] == {"typeNames": ["View"]}
    assert seen[(VIEW, "viewProperties")]["viewLogic"] == VIEW_SQL
    assert [u["dataset"] for u in seen[(VIEW, "upstreamLineage")]["upstreams"]] == [TABLE]
    assert [u["dataset"] for u in seen[(ICEBERG_T, "upstreamLineage")]["upstreams"]] == [ICEBERG_S]
