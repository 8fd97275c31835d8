"""The mapping to OpenLineage: status table, run ids, facets, and validity against the spec."""

from __future__ import annotations

import copy
import json
import pathlib
import uuid

import pytest
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage import EVENT_TYPE_OF_STATUS, TranslationError, Translator, ol_run_id
from lineagewire.consumers.openlineage.translate import EVENT_TYPE_OF_ACTION, action_job_name, action_run_id
from lineagewire.schemas import Codec, header, job_status_changed
from lineagewire.schemas.events import LIFECYCLE_OF_STATUS

from .samples import app_run, refresh_run

codec = Codec()


def ol(event: dict) -> list[dict]:
    # Through the codec first: the translator sees what a consumer decodes.
    return [json.loads(Serde.to_json(e)) for e in Translator().translate(codec.decode(codec.encode(event)))]


def test_every_sample_event_is_valid_openlineage(assert_valid_openlineage) -> None:  # noqa: ANN001
    out = [o for e in [*app_run(), *app_run(fail=True), *refresh_run()] for o in ol(e)]
    assert len(out) == 5 + 5 + 4
    assert_valid_openlineage(out)


@pytest.mark.parametrize(("status", "expected"), [
    ("INITIALIZING", "START"), ("CREATED", "START"), ("RUNNING", "RUNNING"), ("RESTARTING", "RUNNING"),
    ("RECONCILING", "RUNNING"), ("FAILING", "RUNNING"), ("CANCELLING", "RUNNING"), ("FINISHED", "COMPLETE"),
    ("FAILED", "FAIL"), ("CANCELED", "ABORT"), ("SUSPENDED", "OTHER"), ("UNKNOWN", "OTHER"),
])
def test_status_table(status: str, expected: str, assert_valid_openlineage) -> None:  # noqa: ANN001
    h = header("JobStatusChangedEvent", job_namespace="ns", job_name="j", run_id=str(uuid.uuid4()))
    [out] = ol(job_status_changed(h, status))  # type: ignore[arg-type]
    assert out["eventType"] == expected
    assert_valid_openlineage([out])


def _avro_symbols(name: str) -> list[str]:
    # The contract itself (the .avsc files the schemas are built from), not another Python table.
    path = pathlib.Path(__file__).resolve().parents[3] / "schemas" / "avro" / f"{name}.avsc"
    return json.loads(path.read_text())["symbols"]


def test_status_tables_cover_every_symbol_of_the_contract() -> None:
    job_status = _avro_symbols("io.lineagewire.jobs.JobStatus")
    assert len(job_status) >= 10
    assert sorted(EVENT_TYPE_OF_STATUS) == sorted(job_status)
    assert sorted(LIFECYCLE_OF_STATUS) == sorted(job_status)
    assert sorted(EVENT_TYPE_OF_ACTION) == sorted(_avro_symbols("io.lineagewire.jobs.ActionStatus"))


def test_application_run_start_carries_lineage_and_engine() -> None:
    events = app_run()
    start = ol(events[0])[0]
    assert start["eventType"] == "START"
    assert start["run"]["runId"] == events[0]["header"]["run_id"]
    assert start["run"]["facets"]["processing_engine"]["version"] == "4.0.0"
    assert start["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"
    assert start["job"]["facets"]["sql"]["query"].startswith("INSERT OVERWRITE")
    [inp], [out] = start["inputs"], start["outputs"]
    assert [f["name"] for f in inp["facets"]["schema"]["fields"]] == ["id", "amount", "customer"]
    assert inp["facets"]["schema"]["fields"][2]["fields"][0]["name"] == "name"
    assert inp["facets"]["symlinks"]["identifiers"] == [{"namespace": "hive://metastore", "name": "sales.orders",
                                                         "type": "TABLE"}]
    cl = out["facets"]["columnLineage"]["fields"]["amount"]["inputFields"]
    assert [(i["field"], i["transformations"][0]["type"]) for i in cl] == [("amount", "DIRECT"), ("id", "INDIRECT")]
    assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert out["facets"]["dataSource"]["name"] == "file"


def test_action_is_its_own_run_with_the_application_as_parent() -> None:
    events = app_run(actions=2)
    app_id = events[0]["header"]["run_id"]
    a0, a1 = ol(events[2])[0], ol(events[3])[0]
    assert a0["eventType"] == "COMPLETE"
    assert a0["job"]["name"] == "daily_orders.insert_into_hadoop_fs_relation_command.daily_orders_out"
    assert a0["run"]["runId"] == action_run_id("spark", "daily_orders", app_id, "0")
    assert a0["run"]["runId"] != a1["run"]["runId"] != app_id
    parent = a0["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == app_id
    assert (parent["job"]["namespace"], parent["job"]["name"]) == ("spark", "daily_orders")
    assert a0["outputs"][0]["facets"]["columnLineage"]["fields"]["amount"]


def test_an_orchestrator_root_parent_becomes_the_parent_facets_root(assert_valid_openlineage) -> None:  # noqa: ANN001
    task = {"job_namespace": "airflow", "job_name": "orders_dag.load", "run_id": str(uuid.uuid4())}
    dag = {"job_namespace": "airflow", "job_name": "orders_dag", "run_id": str(uuid.uuid4())}
    h = header("JobStatusChangedEvent", job_namespace="spark", job_name="orders", run_id=str(uuid.uuid4()),
               parent_run=task, root_parent_run=dag)
    out = ol(job_status_changed(h, "RUNNING", "CREATED"))
    parent = out[0]["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == task["run_id"] and parent["job"]["name"] == "orders_dag.load"
    root = parent["root"]
    assert root["run"]["runId"] == dag["run_id"]
    assert (root["job"]["namespace"], root["job"]["name"]) == ("airflow", "orders_dag")
    assert_valid_openlineage(out)
    without = ol(job_status_changed({**h, "root_parent_run": None}, "RUNNING", "CREATED"))
    assert "root" not in without[0]["run"]["facets"]["parent"]


def test_failure_carries_error_message() -> None:
    fail = ol(app_run(fail=True)[-1])[0]
    assert fail["eventType"] == "FAIL"
    err = fail["run"]["facets"]["errorMessage"]
    assert err["message"] == "org.apache.spark.SparkException: Job aborted"
    assert err["programmingLanguage"] == "JVM"
    assert err["stackTrace"] == "at ..."


def test_scheduled_refresh_has_nominal_time_and_workflow_parent() -> None:
    cmd, created, *rest = refresh_run()
    assert ol(cmd) == []  # commands are not runs
    start = ol(created)[0]
    assert start["run"]["facets"]["nominalTime"]["nominalStartTime"] == "2026-11-01T00:00:00.000Z"
    parent = start["run"]["facets"]["parent"]
    assert parent["job"]["namespace"] == "lineagewire.scheduler"
    assert parent["run"]["runId"] == created["header"]["parent_run"]["run_id"]
    assert all("nominalTime" in o["run"]["facets"] for e in rest for o in ol(e))


def test_translation_is_deterministic() -> None:
    events = app_run()
    assert [ol(e) for e in events] == [ol(e) for e in events]


def test_run_ids_are_uuids_even_when_the_run_id_is_not() -> None:
    rid = ol_run_id("ns", "job", "application_1700000000_0001")
    assert uuid.UUID(rid).version == 5
    assert rid == ol_run_id("ns", "job", "application_1700000000_0001")
    assert rid != ol_run_id("ns", "other", "application_1700000000_0001")


def test_action_job_names_follow_the_plan_node_and_the_output() -> None:
    assert action_job_name("app", "CreateDataSourceTableAsSelectCommand") == \
        "app.create_data_source_table_as_select_command"
    assert action_job_name("app", "collect") == "app.collect"
    assert action_job_name("app", "command", "InsertIntoHadoopFsRelationCommand", "/tmp/marts/Daily-Revenue/") == \
        "app.insert_into_hadoop_fs_relation_command.daily_revenue"
    assert action_job_name("app", "command", None, "spark_catalog.default.daily_nl") == \
        "app.command.spark_catalog_default_daily_nl"


def test_split_action_parts_are_running_until_the_last() -> None:
    e = app_run(actions=1)[2]
    first, last = {**e, "part": 0, "parts": 2}, {**e, "part": 1, "parts": 2}
    assert ol(first)[0]["eventType"] == "RUNNING"
    assert ol(last)[0]["eventType"] == "COMPLETE"
    assert ol(first)[0]["run"]["runId"] == ol(last)[0]["run"]["runId"]


def test_untranslatable_event_names_the_problem() -> None:
    e = app_run()[1]
    bad = {**e, "new_status": "EXPLODED"}
    with pytest.raises(TranslationError, match="new_status='EXPLODED'"):
        Translator().translate(bad)
    with pytest.raises(TranslationError, match="schema_name"):
        Translator().translate({"nothing": 1})
    with pytest.raises(TranslationError, match="no OpenLineage mapping"):
        Translator().translate({"header": {**e["header"], "schema_name": "io.x.Unknown"}})


def _fresh(event: dict) -> list[dict]:
    # A new translator per event: nothing comes from a cache.
    return [json.loads(Serde.to_json(o)) for o in Translator().translate(event)]


def test_cached_facets_follow_the_content_of_a_dataset_not_only_its_name() -> None:
    # Two jobs write one table with different column lineage, and its schema changes: the same name with
    # different content, alternating, must each time give the facets of that content.
    a, b = app_run("job_a", actions=1)[2], app_run("job_b", actions=1)[2]
    b = {**b, "outputs": a["outputs"], "column_lineage": [{**a["column_lineage"][0], "field": "total"}]}
    c = {**a, "outputs": [{**a["outputs"][0], "fields": a["outputs"][0]["fields"][:1]}]}
    tr = Translator()
    for e in [a, b, c, a, c, b, a]:
        got = [json.loads(Serde.to_json(o)) for o in tr.translate(e)]
        assert got == _fresh(e)
    assert set(_fresh(b)[0]["outputs"][0]["facets"]["columnLineage"]["fields"]) == {"total"}
    assert len(_fresh(c)[0]["outputs"][0]["facets"]["schema"]["fields"]) == 1


def test_changing_an_event_after_translating_it_does_not_change_the_cache() -> None:
    e = copy.deepcopy(app_run(actions=1)[2])
    tr = Translator()
    before = [json.loads(Serde.to_json(o)) for o in tr.translate(e)]
    e["outputs"][0]["fields"][0]["name"] = "renamed"
    e["column_lineage"][0]["inputs"][0]["field"] = "price"
    changed = [json.loads(Serde.to_json(o)) for o in tr.translate(e)]
    assert changed == _fresh(e)
    assert changed[0]["outputs"][0]["facets"]["schema"]["fields"][0]["name"] == "renamed"
    e["outputs"][0]["fields"][0]["name"] = "id"
    e["column_lineage"][0]["inputs"][0]["field"] = "amount"
    assert [json.loads(Serde.to_json(o)) for o in tr.translate(e)] == before


def test_the_facet_cache_is_bounded() -> None:
    tr = Translator(cache_size=3)
    for i in range(20):
        for e in app_run(f"job{i}", actions=1):
            assert [json.loads(Serde.to_json(o)) for o in tr.translate(e)] == _fresh(e)
    assert len(tr._facet_cache) <= 3


def test_a_producer_that_is_not_a_uri_is_refused_once_at_construction() -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - openlineage-python's own validator's message
        Translator(producer="http://[::1")


def test_a_view_is_a_dataset_of_type_view(assert_valid_openlineage) -> None:  # noqa: ANN001
    action = copy.deepcopy(app_run(actions=1)[2])
    action["outputs"][0]["dataset_type"] = "VIEW"
    [out] = ol(action)
    assert out["outputs"][0]["facets"]["datasetType"]["datasetType"] == "VIEW"
    assert "datasetType" not in out["inputs"][0]["facets"]  # a table stays without the facet
    assert_valid_openlineage([out])


def _with_change(change: str | None, previous: dict | None = None, operation: str | None = None) -> dict:
    action = copy.deepcopy(app_run(actions=1)[2])
    out = action["outputs"][0]
    out["lifecycle_change"], out["previous_identifier"], out["operation"] = change, previous, operation
    return action


@pytest.mark.parametrize("change", ["CREATE", "ALTER", "TRUNCATE", "DROP", "OVERWRITE"])
def test_a_lifecycle_change_is_the_outputs_lifecycle_state_change_facet(change: str,
                                                                         assert_valid_openlineage) -> None:  # noqa: ANN001
    [out] = ol(_with_change(change))
    facet = out["outputs"][0]["facets"]["lifecycleStateChange"]
    assert facet["lifecycleStateChange"] == change
    assert "previousIdentifier" not in facet
    assert "lifecycleStateChange" not in out["inputs"][0]["facets"]
    assert_valid_openlineage([out])


def test_a_rename_carries_the_previous_identifier(assert_valid_openlineage) -> None:  # noqa: ANN001
    before = {"namespace": "file", "name": "/warehouse/orders_old"}
    [out] = ol(_with_change("RENAME", before))
    assert out["outputs"][0]["facets"]["lifecycleStateChange"] == {
        "_producer": out["producer"], "lifecycleStateChange": "RENAME", "previousIdentifier": before,
        "_schemaURL": out["outputs"][0]["facets"]["lifecycleStateChange"]["_schemaURL"]}
    assert_valid_openlineage([out])


def test_lifecycle_change_wins_over_operation_and_events_without_it_keep_the_operation() -> None:
    [out] = ol(_with_change("DROP", operation="OVERWRITE"))
    assert out["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    # Before contract v2 (no key at all) and with the field null: OVERWRITE read from the operation, as before.
    old = copy.deepcopy(app_run(actions=1)[2])
    del old["outputs"][0]["lifecycle_change"], old["outputs"][0]["previous_identifier"]
    old["outputs"][0]["operation"] = "overwrite"
    for event in (old, _with_change(None, operation="overwrite")):
        [got] = [json.loads(Serde.to_json(e)) for e in Translator().translate(event)]
        assert got["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    [plain] = ol(_with_change(None, operation="append"))
    assert "lifecycleStateChange" not in plain["outputs"][0]["facets"]


def test_an_unknown_lifecycle_change_gives_no_facet_and_keeps_the_lineage() -> None:
    [out] = ol(_with_change("EXPLODE"))
    assert "lifecycleStateChange" not in out["outputs"][0]["facets"]
    assert out["outputs"][0]["facets"]["columnLineage"]


def test_cached_facets_follow_the_lifecycle_change() -> None:
    tr = Translator()
    seq = [_with_change("CREATE"), _with_change("DROP"), _with_change("RENAME", {"namespace": "file", "name": "/x"}),
           _with_change("CREATE")]
    for e in seq:
        assert [json.loads(Serde.to_json(o)) for o in tr.translate(e)] == _fresh(e)
