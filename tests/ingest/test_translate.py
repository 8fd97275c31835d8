"""OpenLineage -> contract translation (producers/ingest/translate.py), with no broker.

The corpus (tests/ingest/corpus/) holds events shaped as openlineage-spark, dbt-ol, Airflow's provider and
static-lineage producers write them, every one valid by the spec; more are built here with openlineage-python's
own model. Each test checks what a consumer of the contract reads from the translation.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import random
from typing import Any

import pytest

from lineagewire.exceptions import LineagewireError
from lineagewire.producers.ingest.exceptions import TranslationError
from lineagewire.producers.ingest.translate import OpenLineageTranslator, static_run_id
from lineagewire.schemas import Codec, job_key, kind_of
from lineagewire.schemas.openlineage import apply_patch, diff, origin, restore

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
TRANSLATOR = OpenLineageTranslator()
CODEC = Codec()


def corpus(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / f"{name}.json").read_text())


def all_corpus() -> list[tuple[str, dict[str, Any]]]:
    return [(p.stem, json.loads(p.read_text())) for p in sorted(CORPUS.glob("*.json"))]


def python_client_events() -> list[dict[str, Any]]:
    """Events built with openlineage-python's model, as a service using the client sends them."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.generated import (
        column_lineage_dataset as cl,
    )
    from openlineage.client.generated import (
        data_quality_metrics_input_dataset as dq,
    )
    from openlineage.client.generated import (
        error_message_run,
        job_type_job,
        nominal_time_run,
        ownership_job,
        parent_run,
        schema_dataset,
        sql_job,
        tags_job,
    )
    from openlineage.client.serde import Serde

    run_id, parent_id = "0199c000-0000-7000-8000-0000000000a1", "0199c000-0000-7000-8000-0000000000a2"
    job = Job(namespace="billing", name="invoices.load", facets={
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="PYTHON", jobType="JOB"),
        "sql": sql_job.SQLJobFacet(query="INSERT INTO invoices SELECT * FROM staged", dialect="postgres"),
        "ownership": ownership_job.OwnershipJobFacet(owners=[ownership_job.Owner(name="billing-team", type="TEAM")]),
        "tags": tags_job.TagsJobFacet(tags=[tags_job.TagsJobFacetFields(key="env", value="prod", source="CONFIG")])})
    run_facets: dict[str, Any] = {
        "parent": parent_run.ParentRunFacet(run=parent_run.Run(runId=parent_id),
                                            job=parent_run.Job(namespace="billing", name="nightly")),
        "nominalTime": nominal_time_run.NominalTimeRunFacet(nominalStartTime="2026-11-20T00:00:00Z")}
    staged = InputDataset(namespace="postgres://db:5432", name="billing.public.staged", facets={
        "schema": schema_dataset.SchemaDatasetFacet(fields=[
            schema_dataset.SchemaDatasetFacetFields(name="id", type="integer"),
            schema_dataset.SchemaDatasetFacetFields(name="total", type="numeric", description="in cents")])},
        inputFacets={"dataQualityMetrics": dq.DataQualityMetricsInputDatasetFacet(
            rowCount=10, columnMetrics={"id": dq.ColumnMetrics(nullCount=0, distinctCount=10)})})
    invoices = OutputDataset(namespace="postgres://db:5432", name="billing.public.invoices", facets={
        "columnLineage": cl.ColumnLineageDatasetFacet(fields={"total": cl.Fields(inputFields=[cl.InputField(
            namespace="postgres://db:5432", name="billing.public.staged", field="total",
            transformations=[cl.Transformation(type="DIRECT", subtype="IDENTITY", masking=False)])])})})
    start = RunEvent(eventType=RunState.START, eventTime="2026-11-20T00:00:01.000001+00:00",
                     run=Run(runId=run_id, facets=run_facets), job=job, inputs=[staged], outputs=[invoices],
                     producer="https://github.com/OpenLineage/OpenLineage/tree/1.40.0/client/python")
    fail = RunEvent(eventType=RunState.FAIL, eventTime="2026-11-20T00:00:09.5+00:00", run=Run(runId=run_id, facets={
        **run_facets, "errorMessage": error_message_run.ErrorMessageRunFacet(
            message="division by zero", programmingLanguage="python", stackTrace="Traceback ...")}),
        job=Job(namespace="billing", name="invoices.load"),
        producer="https://github.com/OpenLineage/OpenLineage/tree/1.40.0/client/python")
    return [json.loads(Serde.to_json(start)), json.loads(Serde.to_json(fail))]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [kind_of(e) for e in events]


# -- run events -------------------------------------------------------------------------------------------

def test_start_creates_the_run_with_its_spec_then_runs_it_and_reports_its_datasets() -> None:
    events = TRANSLATOR.translate(corpus("dbt_model_start"))
    assert kinds(events) == ["JobCreatedEvent", "JobStatusChangedEvent", "ActionLineageEvent"]
    created, status, action = events
    assert created["status"] == "CREATED"
    assert (status["old_status"], status["new_status"], status["lifecycle_state"]) == (None, "RUNNING", "STARTED")
    spec = created["spec"]
    assert (spec["engine"], spec["engine_version"], spec["job_type"]) == ("dbt", "1.8.9", "BATCH")
    assert spec["sql"].startswith("select c.id, count(o.id)")
    assert spec["tags"] == {"openlineage.integration": "DBT", "openlineage.jobType": "MODEL"}
    assert [d["name"] for d in action["inputs"]] == ["jaffle_shop.main.stg_customers", "jaffle_shop.main.stg_orders"]
    assert action["outputs"][0]["fields"][1]["name"] == "orders" and action["sql"] == spec["sql"]
    assert {(c["field"], c["inputs"][0]["name"], c["inputs"][0]["field"]) for c in action["column_lineage"]} == {
        ("id", "jaffle_shop.main.stg_customers", "id"), ("orders", "jaffle_shop.main.stg_orders", "id")}
    for e in events:
        h = e["header"]
        assert job_key(e) == "dbt/jaffle_shop.main.customers"
        assert h["run_id"] == "0199b9a5-2222-7e01-8a11-111111111105"
        assert h["producer"] == {"name": "https://github.com/OpenLineage/OpenLineage/tree/1.38.0/integration/dbt",
                                 "version": "1.38.0", "host": ""}
        assert h["event_time"] == dt.datetime(2026, 11, 20, 9, 5, 0, 101234, tzinfo=dt.UTC)
        assert h["parent_run"] == {"job_namespace": "dbt", "job_name": "dbt-run-jaffle_shop",
                                   "run_id": "0199b9a5-2000-7e01-8a11-111111111106"}


@pytest.mark.parametrize(("event_type", "status"), [
    ("RUNNING", "RUNNING"), ("COMPLETE", "FINISHED"), ("FAIL", "FAILED"), ("ABORT", "CANCELED")])
def test_an_event_type_without_start_changes_the_status_from_unknown(event_type: str, status: str) -> None:
    ev = {**corpus("airflow_dag_abort"), "eventType": event_type}
    events = TRANSLATOR.translate(ev)
    assert kinds(events) == ["JobStatusChangedEvent"]
    change = events[0]
    # old_status null: the translator does not know the run's last status; downstream a run it never saw starts
    assert (change["old_status"], change["new_status"]) == (None, status)
    assert change["transition_time"] == dt.datetime(2026, 11, 20, 9, 30, tzinfo=dt.UTC)


def test_other_and_a_missing_event_type_change_no_status_and_keep_the_run() -> None:
    for name in ("spark_other_no_datasets", "no_event_type"):
        events = TRANSLATOR.translate(corpus(name))
        assert kinds(events) == ["ActionLineageEvent"], name
        assert events[0]["action_status"] == "UNKNOWN" and not events[0]["inputs"] and not events[0]["outputs"]


def test_fail_carries_the_error_facet_on_the_status_and_on_the_lineage() -> None:
    status, action = TRANSLATOR.translate(corpus("dbt_model_fail"))
    assert status["new_status"] == "FAILED" and action["action_status"] == "FAILED"
    for e in (status, action):
        assert e["error"] == {"error_class": "SQL", "stack_trace": None, "message": (
            "Runtime Error in model broken_model (models/broken_model.sql)\n"
            "  Binder Error: Referenced column \"nope\" not found")}
    (airflow,) = TRANSLATOR.translate(corpus("airflow_task_fail"))
    assert airflow["error"]["stack_trace"].endswith("AirflowException: Cannot execute")
    assert airflow["header"]["root_parent_run"] == {"job_namespace": "airflow", "job_name": "orders_dag",
                                                    "run_id": "0199b9a3-ffff-7c10-8e21-51c9a7d0b002"}


def test_dataset_facets_become_the_fields_the_contract_carries() -> None:
    _, action = TRANSLATOR.translate(corpus("spark_sql_complete"))
    (src,), (out,) = action["inputs"], action["outputs"]
    assert src["symlinks"] == [{"namespace": "hive://metastore:9083", "name": "raw.orders", "type": "TABLE"}]
    assert (src["format"], src["properties"]) == ("parquet", {"storage_layer": "hive"})
    assert [f["name"] for f in src["fields"][2]["fields"]] == ["city", "zip"]
    assert src["fields"][1]["description"] == "customer name"
    assert (out["lifecycle_change"], out["row_count"], out["byte_count"]) == ("OVERWRITE", 1250, 48213)
    amount = next(c for c in action["column_lineage"] if c["field"] == "amount")
    assert amount["inputs"][0]["transformations"] == [
        {"type": "DIRECT", "subtype": "AGGREGATION", "description": "sum", "masking": False}]
    assert action["header"]["root_parent_run"]["job_name"] == "orders_dag"
    # START and COMPLETE report the run's one action: its lifecycle change is one change, its DataHub run one run
    start = TRANSLATOR.translate(corpus("spark_sql_start"))[-1]
    assert (start["action_id"], start["action_status"]) == (action["action_id"], "RUNNING")
    assert action["action_status"] == "SUCCEEDED"


def test_a_real_openlineage_spark_run_links_its_sql_run_to_the_application_and_the_dag() -> None:
    # captured from openlineage-spark 1.53.0 on Spark 4.0.0, run with spark.openlineage.parent* and rootParent*
    app = TRANSLATOR.translate(corpus("spark_real_app_start"))
    status, action = TRANSLATOR.translate(corpus("spark_real_sql_complete"))
    assert action["header"]["parent_run"] == {"job_namespace": "spark-ol", "job_name": "ol_corpus",
                                              "run_id": app[0]["header"]["run_id"]}
    assert action["header"]["root_parent_run"]["job_name"] == "orders_dag"
    assert app[0]["header"]["parent_run"]["job_name"] == "orders_dag.run_spark"
    assert (app[0]["spec"]["engine"], app[0]["spec"]["engine_version"]) == ("spark", "4.0.0")
    assert {(c["field"], c["inputs"][0]["field"]) for c in action["column_lineage"]} == {
        ("customer", "customer"), ("total", "amount")}
    running = TRANSLATOR.translate(corpus("spark_real_sql_running"))
    assert running[-1]["header"]["sequence"] < status["header"]["sequence"]


def test_job_facets_become_the_spec_tags() -> None:
    created, _ = TRANSLATOR.translate(corpus("airflow_task_start"))
    assert created["spec"]["tags"] == {
        "team": "orders", "tier": "gold", "owner": "data-platform,alice@example.com",
        "openlineage.integration": "AIRFLOW", "openlineage.jobType": "TASK"}
    assert (created["spec"]["engine"], created["spec"]["engine_version"]) == ("airflow", "3.1.0")


def test_dataset_and_job_events_become_lineage_of_a_static_run() -> None:
    (ds,) = TRANSLATOR.translate(corpus("dataset_event_rename"))
    h = ds["header"]
    assert kind_of(ds) == "ActionLineageEvent" and not ds["inputs"]
    assert (h["job_namespace"], h["job_name"]) == ("postgres://db.example.com:5432", "shop.public.customers_v2")
    assert h["run_id"] == static_run_id(h["job_namespace"], h["job_name"])
    (out,) = ds["outputs"]
    assert out["lifecycle_change"] == "RENAME"
    assert out["previous_identifier"] == {"namespace": "postgres://db.example.com:5432",
                                          "name": "shop.public.customers"}
    assert (out["dataset_type"], out["fields"][1]["name"]) == ("TABLE", "né")
    (job,) = TRANSLATOR.translate(corpus("job_event_static"))
    assert (job_key(job), job["sql"]) == ("reports/weekly_revenue", "select sum(amount) from orders_clean")
    assert [d["name"] for d in job["inputs"] + job["outputs"]] == ["/warehouse/orders_clean", "weekly/revenue.csv"]
    assert job["outputs"][0]["format"] == "csv"


# -- identity, order, duplicates -------------------------------------------------------------------------------

def test_the_same_event_twice_gives_byte_identical_events_and_distinct_events_distinct_ids() -> None:
    seen: set[str] = set()
    for name, ev in all_corpus():
        first = [CODEC.encode(e) for e in OpenLineageTranslator().translate(ev)]
        assert [CODEC.encode(e) for e in TRANSLATOR.translate(json.loads(json.dumps(ev)))] == first, name
        ids = [CODEC.decode(b)["header"]["event_id"] for b in first]
        assert len(set(ids)) == len(first) and not set(ids) & seen, name
        seen |= set(ids)
        # sent again by another serialiser (its keys in another order): the same ids and sequence numbers
        shuffled = json.loads(json.dumps(ev), object_pairs_hook=lambda kv: dict(random.sample(kv, len(kv))))
        assert [(e["header"]["event_id"], e["header"]["sequence"]) for e in TRANSLATOR.translate(shuffled)] == [
            (CODEC.decode(b)["header"]["event_id"], CODEC.decode(b)["header"]["sequence"]) for b in first], name


def test_sequence_orders_a_runs_events_by_event_time() -> None:
    spark = [corpus(n) for n in ("spark_sql_complete", "spark_sql_start")]  # arriving out of order
    events = [e for ev in spark for e in TRANSLATOR.translate(ev)]
    by_sequence = sorted(events, key=lambda e: e["header"]["sequence"])
    in_time_order = TRANSLATOR.translate(spark[1]) + TRANSLATOR.translate(spark[0])
    assert [(e["header"]["event_time"], kind_of(e)) for e in by_sequence] == [
        (e["header"]["event_time"], kind_of(e)) for e in in_time_order]
    assert len({e["header"]["sequence"] for e in events}) == len(events)
    # one instant: START before COMPLETE whatever their arrival
    start = corpus("airflow_dag_abort") | {"eventType": "START"}
    end = corpus("airflow_dag_abort") | {"eventType": "COMPLETE"}
    assert max(e["header"]["sequence"] for e in TRANSLATOR.translate(start)) < min(
        e["header"]["sequence"] for e in TRANSLATOR.translate(end))


# -- lossless --------------------------------------------------------------------------------------------------

def test_the_last_event_of_each_group_gives_the_openlineage_event_back_after_avro() -> None:
    for name, ev in all_corpus() + [(f"python-{i}", e) for i, e in enumerate(python_client_events())]:
        decoded = [CODEC.decode(CODEC.encode(e)) for e in TRANSLATOR.translate(ev)]
        assert [origin(e) for e in decoded[:-1]] == [{"v": 1, "derived": True}] * (len(decoded) - 1), name
        assert restore(decoded[-1]) == ev, name
        assert all(restore(e) is None for e in decoded[:-1]), name


def test_what_the_event_fields_carry_is_not_copied_into_the_patch() -> None:
    for ev in python_client_events():
        patch = origin(TRANSLATOR.translate(ev)[-1])["patch"]
        text = json.dumps(patch)
        # the parent run, error, schema, column lineage and SQL are the event's own fields
        for carried in ("0199c000-0000-7000-8000-0000000000a2", "division by zero", "Traceback", "in cents",
                        '"columnLineage": ["="', '"inputFields": ["="', "INSERT INTO invoices", "IDENTITY",
                        "billing.public"):
            assert carried not in text, (carried, text)
        assert "nominalTime" in text  # not modelled: kept
    # the facets' _producer (the client library's URI, not the event's) is said once, not for each facet
    assert origin(TRANSLATOR.translate(ev)[-1])["facetProducer"].endswith("/client/python")


def test_patch_and_apply_are_inverse_on_any_json() -> None:
    rnd = random.Random(7)

    def value(depth: int) -> Any:
        pick = rnd.randrange(8 if depth < 3 else 5)
        # (no ints: ``diff`` takes ``==`` values as the same, and 1 == True; see its docstring)
        return [None, True, 2.5, 1.5, "x"][pick] if pick < 5 else (
            [value(depth + 1) for _ in range(rnd.randrange(3))] if pick == 5 else
            {rnd.choice("abcd"): value(depth + 1) for _ in range(rnd.randrange(4))})

    for _ in range(500):
        a, b = value(0), value(0)
        assert apply_patch(b, diff(a, b)) == a
        assert diff(a, a) is None
    assert apply_patch({"k": [1, 2]}, diff({"k": [1.5]}, {"k": [1, 2]})) == {"k": [1.5]}
    assert apply_patch({"a": {"b": 1}}, diff({}, {"a": {"b": 1}})) == {}


def test_values_past_what_avro_holds_are_kept_in_the_patch_only() -> None:
    ev = corpus("spark_sql_complete")
    ev["eventTime"] = "9999-12-31T23:59:59.999999Z"
    ev["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] = 2**64
    events = TRANSLATOR.translate(ev)
    decoded = [CODEC.decode(CODEC.encode(e)) for e in events]  # encodes: every number fits a long
    assert decoded[-1]["outputs"][0]["row_count"] is None and restore(decoded[-1]) == ev
    assert sorted(e["header"]["sequence"] for e in decoded) == [e["header"]["sequence"] for e in decoded]


# -- refusals --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    (lambda ev: ev.update(eventTime="yesterday"), "$.eventTime"),
    (lambda ev: ev["job"].update(name=""), "$.job.name"),
    (lambda ev: ev["run"].pop("runId"), "$.run.runId"),
    (lambda ev: ev["outputs"][0].pop("namespace"), "$.outputs[0].namespace"),
    (lambda ev: ev["outputs"][0]["facets"]["columnLineage"].update(fields=[]),
     "$.outputs[0].facets.columnLineage.fields"),
])
def test_an_event_that_does_not_fit_names_the_field(change: Any, field: str) -> None:
    ev = corpus("spark_sql_complete")
    change(ev)
    with pytest.raises(TranslationError) as caught:
        TRANSLATOR.translate(ev)
    assert caught.value.field == field and str(caught.value).startswith(f"{field}: ")
    assert isinstance(caught.value, LineagewireError)


def test_a_value_that_is_not_an_event_is_refused() -> None:
    with pytest.raises(TranslationError, match=r"^\$: got list; expected a JSON object"):
        TRANSLATOR.translate([])  # type: ignore[arg-type]
    with pytest.raises(TranslationError, match="has none of run, job, dataset"):
        TRANSLATOR.translate({"eventTime": "2026-11-20T00:00:00Z", "producer": "https://x"})


def test_event_ids_are_the_uuid5_of_the_event_digest_and_slot() -> None:
    # the ids are made without uuid.UUID (a few µs per contract event): they must stay uuid5's, forever
    import hashlib
    import uuid

    from lineagewire.producers.ingest.translate import INGEST_NAMESPACE

    ev = corpus("dbt_model_start")
    run, job = ev["run"], ev["job"]
    names = [[f"{d['namespace']}/{d['name']}" for d in ev[side]] or None for side in ("inputs", "outputs")]
    identity = json.dumps((run["runId"], ev["eventType"], ev["eventTime"], job["namespace"], job["name"], None,
                           None, *names))
    digest = hashlib.sha256(identity.encode()).hexdigest()
    assert [e["header"]["event_id"] for e in TRANSLATOR.translate(ev)] == [
        str(uuid.uuid5(INGEST_NAMESPACE, f"{digest}/{slot}")) for slot in range(3)]


def test_the_openlineage_text_is_what_origin_text_writes() -> None:
    # the translator writes header.openlineage with orjson (a tenth of json.dumps's time): the same text
    from lineagewire.schemas.openlineage import origin_text

    odd = {**corpus("airflow_task_fail"), "x-text": "tab\\t \"quoted\" \x00\x1f\x7f é 💡 \u2028 </script>",
           "x-numbers": [0, -1, 2**63 - 1, True, None, 1.5, 0.1]}
    events = [ev for _name, ev in all_corpus()] + python_client_events() + [odd]
    for ev in events:
        text = TRANSLATOR.translate(ev)[-1]["header"]["openlineage"]
        found = json.loads(text)
        assert text == origin_text(found["kind"], found["patch"], found.get("facetProducer")), text


def test_two_events_of_a_run_in_one_millisecond_that_name_other_datasets_are_two_events() -> None:
    ev = corpus("dbt_model_start")
    other = json.loads(json.dumps(ev))
    other["outputs"] = [{"namespace": "duckdb://x", "name": "other.main.table"}]
    ids = {e["header"]["event_id"] for e in TRANSLATOR.translate(ev)}
    assert ids.isdisjoint(e["header"]["event_id"] for e in TRANSLATOR.translate(other))
    assert ids == {e["header"]["event_id"] for e in TRANSLATOR.translate(json.loads(json.dumps(ev)))}  # a retry
