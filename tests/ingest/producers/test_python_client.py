"""openlineage-python's own client into the receiver, over HTTP (gzip, as configured by a user) and over its Kafka
transport (JSON on a topic of the user's, read by ``lineagewire ingest openlineage --from-topic``).

A service's job reads a PostgreSQL table and writes an S3 object; one run completes, one fails. Each must show up
in the registry, come back out of the OpenLineage output with the facets we do not model unchanged, and reach
DataHub.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest

from lineagewire.kafka.topics import TopicSpec, create_topics, delete_topics
from tests.helpers import wait_for

from .conftest import Estate, Outputs, ingest_process

pytestmark = [pytest.mark.producers, pytest.mark.integration, pytest.mark.slow]

PRODUCER = "https://example.com/orders-service"
ACME = {"_producer": PRODUCER, "_schemaURL": "https://example.com/schemas/AcmeBatchRunFacet.json", "batch": 7,
        "shards": ["eu", "us"]}


def _run(job: str, state: str, run_id: str, *, error: str | None = None) -> Any:
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import error_message_run, schema_dataset

    facets: dict[str, Any] = {}
    if error is not None:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=error, programmingLanguage="python")
    schema = schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name="order_id", type="integer"),
        schema_dataset.SchemaDatasetFacetFields(name="amount", type="numeric")])
    return RunEvent(eventType=getattr(RunState, state), eventTime=dt.datetime.now(dt.UTC).isoformat(),
                    run=Run(runId=run_id, facets=facets), job=Job(namespace="orders-service", name=job),
                    inputs=[InputDataset(namespace="postgres://db.internal:5432", name="shop.public.orders",
                                         facets={"schema": schema})],
                    outputs=[OutputDataset(namespace="s3://exports", name=f"orders/{job}.csv")], producer=PRODUCER)


def _emit(transport: dict[str, Any], job: str) -> tuple[str, str]:
    """One completed and one failed run of ``job`` with ``transport``; their run ids."""
    from openlineage.client import OpenLineageClient

    client = OpenLineageClient(config={"transport": transport})
    ok, bad = str(uuid.uuid4()), str(uuid.uuid4())
    start = _run(job, "START", ok)
    start.run.facets["acme_batch"] = ACME  # a facet nobody models: must come out as it came in
    for event in (start, _run(job, "COMPLETE", ok), _run(job, "START", bad),
                  _run(job, "FAIL", bad, error="ValueError: no amount in row 7")):
        client.emit(event)
    client.close(30)
    return ok, bad


def _check_outputs(outputs: Outputs, job: str, ok: str, bad: str) -> None:
    outputs.settle()
    shown = outputs.registry("jobs", "show", job)
    statuses = {r["run_id"]: r["status"] for r in shown["runs"]}
    assert statuses == {ok: "FINISHED", bad: "FAILED"}, shown
    listed = {j["job"]: j for j in outputs.registry("jobs", "list")}
    assert listed[f"orders-service/{job}"]["last_producer"] == "example.com", listed[f"orders-service/{job}"]
    text = outputs.registry_text("runs", "show", bad)
    assert "ValueError: no amount in row 7" in text and "shop.public.orders" in text, text

    got = outputs.openlineage.wait_for(
        lambda evs: {(e["run"]["runId"], e["eventType"]) for e in evs} >= {(ok, "COMPLETE"), (bad, "FAIL")}, 60)
    mine = [e for e in got if e["run"]["runId"] in (ok, bad)]
    assert {(e["run"]["runId"], e["eventType"]) for e in mine} >= {(ok, "START"), (ok, "COMPLETE"), (bad, "FAIL")}
    assert all(e["job"] == mine[0]["job"] for e in mine) and mine[0]["job"]["name"] == job, mine
    assert {(d["namespace"], d["name"]) for e in mine for d in e["inputs"]} == {
        ("postgres://db.internal:5432", "shop.public.orders")}
    starts = [e for e in mine if e["run"]["runId"] == ok and e["eventType"] == "START"]
    assert starts[0]["run"]["facets"].get("acme_batch") == ACME, starts[0]["run"]["facets"]

    def failed_in_datahub(records: list[dict[str, Any]]) -> bool:
        return any(r["aspectName"] == "dataProcessInstanceRunEvent" and job in json.dumps(r)
                   and (r["aspect"]["json"].get("result") or {}).get("type") == "FAILURE" for r in records)

    records = outputs.datahub(failed_in_datahub)
    assert failed_in_datahub(records), f"no failed run of {job} in DataHub"
    assert any(r["entityType"] == "dataJob" and job in r["entityUrn"] for r in records), f"no dataJob for {job}"
    assert any(r["entityType"] == "dataset" and "shop.public.orders" in r["entityUrn"] for r in records)


def test_the_python_client_over_http_with_gzip(estate: Estate, outputs: Outputs) -> None:
    job = f"export_http_{uuid.uuid4().hex[:6]}"
    ok, bad = _emit({"type": "http", "url": estate.url, "compression": "gzip"}, job)
    estate.check_receiver()
    _check_outputs(outputs, job, ok, bad)


def test_the_python_client_over_its_kafka_transport(estate: Estate, outputs: Outputs) -> None:
    settings = estate.settings
    ol_topic = f"openlineage.{uuid.uuid4().hex[:8]}"
    create_topics(settings, [TopicSpec(ol_topic, 1, -1)])
    job = f"export_kafka_{uuid.uuid4().hex[:6]}"
    try:
        with ingest_process(settings, estate.base, "from-topic", from_topic=ol_topic,
                            group_id=f"ingest-{uuid.uuid4().hex[:6]}") as (proc, log):
            ok, bad = _emit({"type": "kafka", "topic": ol_topic, "flush": True,
                             "config": {"bootstrap.servers": settings.bootstrap_servers}}, job)
            # the failed run's FAIL is the last event the client sent: once the registry has it, the reader has
            # passed every event on (a partition of one: in order)
            wait_for(lambda: proc.poll() is not None or _in_registry(outputs, job, bad), timeout=90)
            assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        delete_topics(settings, [ol_topic], timeout=20)
    _check_outputs(outputs, job, ok, bad)


def _in_registry(outputs: Outputs, job: str, run_id: str) -> bool:
    outputs.settle()
    shown = outputs.registry("jobs", "show", job, missing_ok=True)
    return shown is not None and any(r["run_id"] == run_id and r["status"] == "FAILED" for r in shown["runs"])
