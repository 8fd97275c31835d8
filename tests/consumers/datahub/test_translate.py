"""The translator: lineagewire events -> DataHub proposals (pure; no broker, no DataHub)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import uuid

import pytest
from datahub.ingestion.sink.file import write_metadata_file

from lineagewire.consumers.datahub.config import DataHubConfig
from lineagewire.consumers.datahub.exceptions import TranslationError
from lineagewire.consumers.datahub.proposals import record as render
from lineagewire.consumers.datahub.translate import Translator, instance_urn
from lineagewire.schemas import action_lineage, dataset, header
from tests.consumers.openlineage.samples import app_run, refresh_run
from tests.drift import assert_same

from .check import check_aspects_belong, check_metadata_file

ORDERS = "urn:li:dataset:(urn:li:dataPlatform:hive,sales.orders,PROD)"
OUT = "urn:li:dataset:(urn:li:dataPlatform:file,/data/daily_orders_out,PROD)"


def rendered(events: list[dict], config: DataHubConfig | None = None) -> list[dict]:
    t = Translator(config)
    return [render(p) for e in events for p in t.translate(e)]


def by(records: list[dict], aspect: str, urn: str | None = None) -> list[dict]:
    return [r["aspect"]["json"] for r in records
            if r["aspectName"] == aspect and (urn is None or r["entityUrn"] == urn)]


def test_same_events_give_byte_identical_proposals() -> None:
    events = app_run() + app_run("hourly", fail=True) + refresh_run()
    first = json.dumps(rendered(events))
    again = json.dumps(rendered(copy.deepcopy(events)))
    assert first == again
    assert len(json.loads(first)) > 50


@pytest.mark.upstream
def test_output_passes_datahubs_own_check(tmp_path) -> None:  # noqa: ANN001
    events = app_run() + app_run("hourly", fail=True) + refresh_run()
    t = Translator()
    path = tmp_path / "mcps.json"
    write_metadata_file(path, [p for e in events for p in t.translate(e)])
    check_metadata_file(path)
    check_aspects_belong(json.loads(path.read_text()))


def test_flow_jobs_and_runs_of_an_application() -> None:
    events = app_run(actions=2)
    records = rendered(events)
    flow = "urn:li:dataFlow:(spark,daily_orders,prod)"
    assert by(records, "dataFlowInfo", flow)[0]["name"] == "daily_orders"
    job = f"urn:li:dataJob:({flow},daily_orders.insert_into_hadoop_fs_relation_command.daily_orders_out)"
    io = by(records, "dataJobInputOutput", job)[0]
    assert [e["destinationUrn"] for e in io["inputDatasetEdges"]] == [ORDERS]
    assert [e["destinationUrn"] for e in io["outputDatasetEdges"]] == [OUT]
    assert io["inputDatasets"] == [] and io["outputDatasets"] == []
    # The column lineage names the input by its path; its URN is the catalog table's, as for the dataset.
    assert io["inputDatasetFields"] == [f"urn:li:schemaField:({ORDERS},amount)", f"urn:li:schemaField:({ORDERS},id)"]
    assert io["outputDatasetFields"] == [f"urn:li:schemaField:({OUT},amount)"]
    ops = {f["transformOperation"]: f["upstreams"] for f in io["fineGrainedLineages"]}
    assert ops == {"DIRECT:AGGREGATION": [f"urn:li:schemaField:({ORDERS},amount)"],
                   "INDIRECT:GROUP_BY": [f"urn:li:schemaField:({ORDERS},id)"]}
    hdr = events[0]["header"]
    app = instance_urn("spark", "daily_orders", hdr["run_id"])
    rel = by(records, "dataProcessInstanceRelationships", app)[0]
    assert rel["parentTemplate"] == flow
    assert by(records, "dataProcessInstanceProperties", app)[0]["customProperties"]["master"] == "local[2]"
    app_events = by(records, "dataProcessInstanceRunEvent", app)
    assert [(r["status"], (r.get("result") or {}).get("type")) for r in app_events] == [
        ("STARTED", None), ("COMPLETE", "SUCCESS")]
    action = instance_urn("spark", "daily_orders", hdr["run_id"], "0")
    assert by(records, "dataProcessInstanceRelationships", action)[0] == {
        "upstreamInstances": [], "parentTemplate": job, "parentInstance": app}
    runs = by(records, "dataProcessInstanceRunEvent", action)
    assert [r["status"] for r in runs] == ["STARTED", "COMPLETE"]
    assert runs[1]["timestampMillis"] - runs[0]["timestampMillis"] == 12 == runs[1]["durationMillis"]
    upstream = by(records, "upstreamLineage", OUT)[-1]
    assert [u["dataset"] for u in upstream["upstreams"]] == [ORDERS]
    assert len(upstream["fineGrainedLineages"]) == 2
    fields = [f["fieldPath"] for f in by(records, "schemaMetadata", OUT)[0]["fields"]]
    assert fields == ["id", "amount", "customer", "customer.name"]


@pytest.mark.parametrize(("status", "result"), [("FAILED", "FAILURE"), ("CANCELED", "SKIPPED"),
                                               ("FINISHED", "SUCCESS")])
def test_terminal_status_gives_complete_with_its_result(status: str, result: str) -> None:
    events = app_run(actions=0)
    events[-1]["new_status"] = status
    records = rendered(events)
    last = by(records, "dataProcessInstanceRunEvent")[-1]
    assert last["status"] == "COMPLETE" and last["result"] == {"type": result, "nativeResultType": status}


def test_indirect_lineage_can_be_dropped_as_datahubs_agent_does() -> None:
    records = rendered(app_run(actions=1), DataHubConfig(include_indirect=False, table_platform=None))
    ops = [f["transformOperation"] for io in by(records, "dataJobInputOutput") for f in io["fineGrainedLineages"]]
    assert ops and set(ops) == {"DIRECT:AGGREGATION"}
    # Without catalog tables the input is its path.
    assert "urn:li:dataset:(urn:li:dataPlatform:file,/data/orders,PROD)" in {
        e["destinationUrn"] for io in by(records, "dataJobInputOutput") for e in io["inputDatasetEdges"]}


def test_refresh_run_is_an_instance_of_the_workflow_flow_with_its_nominal_time() -> None:
    events = refresh_run()
    records = rendered(events)
    flow = "urn:li:dataFlow:(lineagewire,wf-1,prod)"
    assert by(records, "dataFlowInfo", flow)[0]["customProperties"]["table"] == "daily_orders"
    run = events[1]["header"]
    dpi = instance_urn(run["job_namespace"], run["job_name"], run["run_id"])
    props = by(records, "dataProcessInstanceProperties", dpi)[0]
    assert props["type"] == "BATCH_SCHEDULED"
    assert props["customProperties"]["nominalTime"] == "2026-11-01T00:00:00.000Z"
    assert by(records, "dataProcessInstanceRelationships", dpi)[0]["parentTemplate"] == flow
    assert {r["attempt"] for r in by(records, "dataProcessInstanceRunEvent", dpi)} == {1}


def _file_ds(namespace: str, name: str, **kw) -> dict:  # noqa: ANN003
    return dataset(namespace, name, **kw)


@pytest.mark.parametrize(("namespace", "name", "urn"), [
    ("file", "/data/orders/date=2026-11-01/hour=3", "urn:li:dataset:(urn:li:dataPlatform:file,/data/orders,PROD)"),
    ("s3://bucket", "warehouse/orders/", "urn:li:dataset:(urn:li:dataPlatform:s3,bucket/warehouse/orders,PROD)"),
    ("s3a://bucket", "raw//x/dt=1", "urn:li:dataset:(urn:li:dataPlatform:s3,bucket/raw/x,PROD)"),
    ("gs://b", "k", "urn:li:dataset:(urn:li:dataPlatform:gcs,b/k,PROD)"),
    ("hdfs://nn:8020", "/user/x", "urn:li:dataset:(urn:li:dataPlatform:hdfs,/user/x,PROD)"),
    ("postgres://db:5432", "shop.public.t", "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.public.t,PROD)"),
    ("sqlserver://db:1433", "shop.orders", "urn:li:dataset:(urn:li:dataPlatform:mssql,shop.orders,PROD)"),
    ("kafka://broker:9092", "orders", "urn:li:dataset:(urn:li:dataPlatform:kafka,orders,PROD)"),
    # Namespaces of other forms (issue 21 item 4): named, never refused.
    ("derby:/path/db", "APP.ORDERS", "urn:li:dataset:(urn:li:dataPlatform:derby,/path/db/APP.ORDERS,PROD)"),
    ("jdbc:derby:/path/db", "APP.ORDERS", "urn:li:dataset:(urn:li:dataPlatform:derby,/path/db/APP.ORDERS,PROD)"),
    ("h2:mem:testdb", "PUBLIC.T", "urn:li:dataset:(urn:li:dataPlatform:h2,mem:testdb/PUBLIC.T,PROD)"),
    ("sqlite:app.db", "orders", "urn:li:dataset:(urn:li:dataPlatform:sqlite,app.db/orders,PROD)"),
    ("warehouse", "orders", "urn:li:dataset:(urn:li:dataPlatform:warehouse,orders,PROD)"),
    ("My Warehouse!", "orders", "urn:li:dataset:(urn:li:dataPlatform:my-warehouse,orders,PROD)"),
    ("/data/lake", "orders/d=1", "urn:li:dataset:(urn:li:dataPlatform:file,/data/lake/orders,PROD)"),
    ("C:\\data", "orders", "urn:li:dataset:(urn:li:dataPlatform:file,C:\\data/orders,PROD)"),
    ("file:/data/x", "/abs/y", "urn:li:dataset:(urn:li:dataPlatform:file,/abs/y,PROD)"),
    ("", "orders", "urn:li:dataset:(urn:li:dataPlatform:unknown,orders,PROD)"),
    ("kafka://broker:9092", "", "urn:li:dataset:(urn:li:dataPlatform:kafka,broker:9092,PROD)"),
])
def test_dataset_urns_by_platform(namespace: str, name: str, urn: str) -> None:
    t = Translator()
    assert t.names.urn(_file_ds(namespace, name)) == urn


def test_an_odd_dataset_keeps_the_rest_of_its_event_and_each_form_is_logged_once(caplog) -> None:  # noqa: ANN001
    e = action_lineage(header("ActionLineageEvent", job_namespace="n", job_name="j", run_id="r"), "0", "Save",
                       inputs=[dataset("derby:/var/db/shop", "APP.ORDERS"), dataset("file", "/in")],
                       outputs=[dataset("file", "/out")])
    caplog.set_level("WARNING", logger="lineagewire.consumers.datahub.datasets")
    t = Translator()
    records = [render(p) for p in t.translate(e)]
    urns = {r["entityUrn"] for r in records}
    assert {"urn:li:dataset:(urn:li:dataPlatform:derby,/var/db/shop/APP.ORDERS,PROD)",
            "urn:li:dataset:(urn:li:dataPlatform:file,/in,PROD)",
            "urn:li:dataset:(urn:li:dataPlatform:file,/out,PROD)"} <= urns
    other = copy.deepcopy(e)
    other["inputs"][0] = dataset("derby:/var/db/other", "APP.X")
    other["header"]["event_id"] = str(uuid.uuid4())
    t.translate(other)
    t.translate(action_lineage(header("ActionLineageEvent", job_namespace="n", job_name="k", run_id="r"), "0", "S",
                               inputs=[dataset("Bad Scheme", "x")], outputs=[dataset("file", "/o")]))
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2, logged  # one per form: embedded database, not a scheme
    assert "'derby:/var/db/shop'" in logged[0] and "'Bad Scheme'" in logged[1]


def test_dataset_naming_is_configurable() -> None:
    cfg = DataHubConfig(env="DEV", platform_instance="lake", platform_instances={"postgres": "main"},
                        platform_aliases={"lakefs": "s3"}, path_specs={"s3": ["bucket/*/{table}"]},
                        strip_partitions=False)
    t = Translator(cfg)
    assert t.names.urn(dataset("lakefs://bucket", "raw/orders/2026/11/01")) == \
        "urn:li:dataset:(urn:li:dataPlatform:s3,lake.bucket/raw/orders,DEV)"
    assert t.names.urn(dataset("postgres://h:1", "a.b")) == "urn:li:dataset:(urn:li:dataPlatform:postgres,main.a.b,DEV)"
    assert t.names.urn(dataset("file", "/x/d=1")) == "urn:li:dataset:(urn:li:dataPlatform:file,lake./x/d=1,DEV)"


def test_split_action_lineage_patches_later_parts_and_ends_the_run_once() -> None:
    events = app_run(actions=1)
    action = events[2]
    second = copy.deepcopy(action)
    action["parts"], second["part"], second["parts"] = 2, 1, 2
    second["header"] = {**second["header"], "event_id": str(uuid.uuid4()), "sequence": 99}
    second["column_lineage"][0]["field"] = "id"
    t = Translator()
    first_out = [render(p) for p in t.translate(action)]
    later = [render(p) for p in t.translate(second)]
    assert not by(first_out, "dataProcessInstanceRunEvent")
    patches = [r for r in later if r["changeType"] == "PATCH"]
    assert {r["aspectName"] for r in patches} == {"dataJobInputOutput", "upstreamLineage"}
    assert [r["status"] for r in by(later, "dataProcessInstanceRunEvent")] == ["STARTED", "COMPLETE"]
    assert "/fineGrainedLineages/" in json.dumps([r["aspect"] for r in patches])


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda e: e["header"].pop("schema_name"), "header.schema_name"),
    (lambda e: e["header"].__setitem__("schema_name", "io.lineagewire.x.Nope"), "Nope"),
    (lambda e: e.pop("outputs"), "outputs"),
])
def test_bad_events_raise_a_translation_error_naming_what_was_wrong(mutate, needle: str) -> None:  # noqa: ANN001
    e = action_lineage(header("ActionLineageEvent", job_namespace="n", job_name="j", run_id="r"), "0", "Save",
                       inputs=[dataset("file", "/in")], outputs=[dataset("file", "/out")])
    mutate(e)
    with pytest.raises(TranslationError, match=needle.replace("(", r"\(")):
        Translator().translate(e)


def test_summary_names_flows_jobs_runs_and_column_lineage() -> None:
    from lineagewire.consumers.datahub.summary import summarize

    text = "\n".join(summarize(rendered(app_run(actions=1) + app_run("hourly", fail=True, actions=0))))
    assert "DataFlow urn:li:dataFlow:(spark,daily_orders,prod) (daily_orders)" in text
    assert "column /data/daily_orders_out.amount <- sales.orders.amount [DIRECT:AGGREGATION]" in text
    assert ": COMPLETE SUCCESS" in text and ": COMPLETE FAILURE" in text


@pytest.mark.upstream
def test_proposals_are_what_acryl_datahub_serialises() -> None:
    """Every upsert's aspect text is acryl-datahub's own serialisation (``MetadataChangeProposalWrapper.make_mcp``)
    of the aspect it describes, also those whose times and run ids are set in their JSON per event."""
    from datahub.emitter.aspect import ASPECT_MAP
    from datahub.emitter.mcp import MetadataChangeProposalWrapper
    from datahub.emitter.serialization_helper import post_json_transform

    later = app_run(fail=True)
    for e in later:
        e["header"]["event_time"] += dt.timedelta(hours=3, milliseconds=7)
        e["header"]["run_id"] = "other-run"
    t = Translator()
    proposals = [p for e in app_run() + later + app_run("hourly") + refresh_run() for p in t.translate(e)]
    plain = [p for p in proposals if p.changeType == "UPSERT"]
    assert len(plain) > 40
    kinds = set()
    for p in plain:
        aspect = ASPECT_MAP[p.aspectName].from_obj(post_json_transform(json.loads(p.aspect.value)))
        built = MetadataChangeProposalWrapper(entityUrn=p.entityUrn, aspect=aspect, systemMetadata=p.systemMetadata)
        assert_same(p.to_obj(), built.make_mcp().to_obj(), library="acryl-datahub",
                    what=f"the {p.aspectName} proposal of {p.entityUrn} (ours, and make_mcp's of its aspect)")
        kinds.add(p.aspectName)
    assert {"dataProcessInstanceRunEvent", "upstreamLineage", "dataProcessInstanceProperties"} <= kinds
    times = {json.loads(p.aspect.value)["timestampMillis"] for p in plain
             if p.aspectName == "dataProcessInstanceRunEvent"}
    assert len(times) > 4  # the per-event time is set in each, not the template's 0
    assert 0 not in times
    stamps = {u["auditStamp"]["time"] for p in plain if p.aspectName == "upstreamLineage"
              for u in json.loads(p.aspect.value)["upstreams"]}
    assert len(stamps) > 1 and 0 not in stamps
    names = {json.loads(p.aspect.value)["name"] for p in plain if p.aspectName == "dataProcessInstanceProperties"}
    assert any(n.startswith("other-run/") for n in names) and "" not in names


@pytest.mark.upstream
def test_a_proposals_json_for_the_emitters_is_the_one_its_class_gives() -> None:
    """``Proposal.to_obj`` (what acryl-datahub's emitters send) equals ``MetadataChangeProposalClass.to_obj``, also
    once an emitter stamped its systemMetadata, and for systemMetadata of other shapes."""
    from datahub.cli.cli_utils import ensure_has_system_metadata
    from datahub.emitter.serialization_helper import pre_json_transform
    from datahub.metadata.schema_classes import AuditStampClass, MetadataChangeProposalClass, SystemMetadataClass

    from lineagewire.consumers.datahub.proposals import Proposal
    from lineagewire.consumers.datahub.sinks.delivery import for_emitter

    proposals = [p for e in app_run() + split_like() + refresh_run() for p in Translator().translate(e)]
    ours = [p for p in proposals if isinstance(p, Proposal)]
    assert len(ours) > 40
    stamped = for_emitter(ours)
    for p in stamped:
        ensure_has_system_metadata(p)
    odd = [Proposal(entityType=p.entityType, entityUrn=p.entityUrn, changeType=p.changeType, aspectName=p.aspectName,
                    aspect=p.aspect, systemMetadata=sm) for p in ours[:1] for sm in (
        None, SystemMetadataClass(lastObserved=1, aspectCreated=AuditStampClass(time=1, actor="urn:li:corpuser:x")))]
    for p in ours + stamped + odd:
        assert_same(pre_json_transform(p.to_obj()), pre_json_transform(MetadataChangeProposalClass.to_obj(p)),
                    library="acryl-datahub", what=f"Proposal.to_obj of the {p.aspectName} proposal of {p.entityUrn}")
    assert all(p.systemMetadata.properties["clientId"] for p in stamped)
    assert all(p.systemMetadata.properties is None for p in ours)  # the translator's were not changed


def split_like() -> list[dict]:
    run = app_run("split", actions=1)
    second = copy.deepcopy(run[2])
    run[2]["parts"], second["part"], second["parts"] = 2, 1, 2
    second["header"] = {**second["header"], "event_id": str(uuid.uuid4())}
    return [*run, second]
