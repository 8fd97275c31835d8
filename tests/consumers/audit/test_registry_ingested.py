"""Runs ingested from OpenLineage producers in the registry (issue 42), through the real broker: a run whose START
never came, events out of order, the same event twice, each run's producer, and one lineage across tools."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from lineagewire.consumers.audit.registry import RegistryHandler
from lineagewire.consumers.audit.registry_producer import producer_label
from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import action_lineage, header, job_created, job_spec, job_status_changed
from tests.consumers.openlineage.samples import app_run

from .conftest import registry_api
from .test_registry import cli

SPARK_OL = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/spark"
DBT_OL = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/dbt"
AIRFLOW_OL = "https://github.com/apache/airflow/tree/providers-openlineage/2.3.0"
T0 = dt.datetime(2026, 11, 1, 5, 0, tzinfo=dt.UTC)


class IngestedRun:
    """Events of one run as the OpenLineage receiver publishes them: the producer's URI in the header, the
    OpenLineage event time, and the sequence in the order the receiver happened to get them."""

    def __init__(self, job: str, producer: str, namespace: str = "dbt://warehouse") -> None:
        self.job, self.namespace, self.run_id = job, namespace, str(uuid.uuid4())
        self.producer = {"name": producer, "version": "1.40.0", "host": "ingest-1"}
        self.sequence = 0

    def _header(self, kind: str, second: float) -> Any:
        self.sequence += 1
        return header(kind, job_namespace=self.namespace, job_name=self.job, run_id=self.run_id,
                      sequence=self.sequence, producer=self.producer,  # type: ignore[arg-type]
                      event_time=T0 + dt.timedelta(seconds=second))

    def start(self, second: float) -> dict[str, Any]:
        return dict(job_created(self._header("JobCreatedEvent", second), job_spec(self.job, "dbt"), status="RUNNING"))

    def status(self, second: float, new: str, error: bool = False) -> dict[str, Any]:
        err = {"error_class": "dbt.RuntimeError", "message": "model failed", "stack_trace": None} if error else None
        return dict(job_status_changed(self._header("JobStatusChangedEvent", second), new, None,  # type: ignore[arg-type]
                                       error=err))  # type: ignore[arg-type]

    def lineage(self, second: float, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(action_lineage(self._header("ActionLineageEvent", second), "0", "dbt model",
                                   inputs=inputs, outputs=outputs))


def test_producer_labels_name_the_tool() -> None:
    assert [producer_label(x) for x in (
        "lineagewire", SPARK_OL, DBT_OL, AIRFLOW_OL, "https://github.com/OpenLineage/OpenLineage/tree/1.2/client/python",
        "https://github.com/OpenLineage/OpenLineage/tree/1.2/integration/flink", "https://github.com/acme/etl-tool",
        "https://etl.example.com/producer", None)] == [
        "lineagewire", "openlineage-spark", "dbt", "Airflow", "openlineage-python", "openlineage-flink", "etl-tool",
        "etl.example.com", None]


def openlineage(event_type: str, run_id: str, second: int, producer: str, job: tuple[str, str],
                **datasets: list[dict[str, str]]) -> dict[str, Any]:
    """An OpenLineage RunEvent as a producer posts it."""
    return {"eventType": event_type, "eventTime": (T0 + dt.timedelta(seconds=second)).isoformat(),
            "producer": producer, "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
            "run": {"runId": run_id}, "job": {"namespace": job[0], "name": job[1]}, **datasets}


@pytest.mark.integration
def test_ingested_runs_begin_without_start_keep_event_time_order_and_their_producer(  # noqa: ANN001
        settings, group_id, tmp_path) -> None:
    """OpenLineage events as the receiver translates and publishes them (``producers.ingest``), then the registry
    service on the broker."""
    from lineagewire.producers.ingest.translate import OpenLineageTranslator

    translate = OpenLineageTranslator().translate
    ours = app_run("daily_orders")  # lineagewire's own run writes /data/daily_orders_out
    # Spark under openlineage-spark: RUNNING is the first event that comes; its START never does.
    spark_run, dbt_run = str(uuid.uuid4()), str(uuid.uuid4())
    spark = translate(openlineage("RUNNING", spark_run, 1, SPARK_OL, ("spark://cluster", "orders_enrich")))
    # dbt: COMPLETE comes first, then the RUNNING and the START sent before it; its model reads our run's output,
    # named as our emitter names it, and writes a duckdb table
    job = ("dbt://warehouse", "orders_summary")
    complete = translate(openlineage("COMPLETE", dbt_run, 9, DBT_OL, job,
                                     inputs=[{"namespace": "file", "name": "/data/daily_orders_out"}],
                                     outputs=[{"namespace": "duckdb://warehouse", "name": "main.orders_summary"}]))
    dbt = [*complete, *translate(openlineage("RUNNING", dbt_run, 3, DBT_OL, job)),
           *translate(openlineage("START", dbt_run, 2, DBT_OL, job))]
    # the producer's retry of COMPLETE: the receiver translates it to the same events, ids and all
    again = translate(openlineage("COMPLETE", dbt_run, 9, DBT_OL, job,
                                  inputs=[{"namespace": "file", "name": "/data/daily_orders_out"}],
                                  outputs=[{"namespace": "duckdb://warehouse", "name": "main.orders_summary"}]))
    events = [*ours, *spark, *dbt, *again]
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    handler = RegistryHandler(db)
    ConsumerRuntime(settings, handler, group_id=group_id).run(max_events=len(events))
    assert handler.applied == len(events) - len(again)  # the retried COMPLETE changed nothing

    runs = {r["run_id"]: r for r in json.loads(cli(db, "jobs", "show", "orders_enrich", "--format", "json").stdout)[
        "runs"] + json.loads(cli(db, "jobs", "show", "orders_summary", "--format", "json").stdout)["runs"]}
    begun = runs[spark_run]
    assert (begun["status"], begun["created_at"], begun["started_at"]) == ("RUNNING", "2026-11-01T05:00:01Z",
                                                                           "2026-11-01T05:00:01Z")
    assert begun["producer"] == {"label": "openlineage-spark", "name": SPARK_OL, "version": "1.40.0"}
    done = runs[dbt_run]
    # the late START did not reopen the run (CREATED, then RUNNING); the run began when it started
    assert (done["status"], done["created_at"], done["started_at"], done["ended_at"], done["duration_ms"]) == (
        "FINISHED", "2026-11-01T05:00:02Z", "2026-11-01T05:00:02Z", "2026-11-01T05:00:09Z", 7000)

    shown = cli(db, "runs", "show", dbt_run)
    assert f"producer: dbt ({DBT_OL})" in shown.stdout
    transitions = shown.stdout.split("transitions:\n")[1].split("inputs:")[0].splitlines()
    assert [line.split()[-2] for line in transitions] == ["RUNNING", "RUNNING", "FINISHED"]  # by time, not arrival
    table = cli(db, "jobs", "show", "orders_summary").stdout.splitlines()
    assert table[1].split()[5] == "producer" and table[2].split()[5] == "dbt"
    listed = {j["job"]: j["last_producer"] for j in json.loads(cli(db, "jobs", "list", "--format", "json").stdout)}
    assert listed == {"spark/daily_orders": "lineagewire", "spark://cluster/orders_enrich": "openlineage-spark",
                      "dbt://warehouse/orders_summary": "dbt"}

    # one lineage across tools: the dbt model is downstream of our Spark job's output
    down = json.loads(cli(db, "lineage", "downstream", "/data/orders", "--format", "json").stdout)
    assert [(n["namespace"], n["name"]) for n in down["nodes"]] == [
        ("file", "/data/orders"), ("file", "/data/daily_orders_out"), ("duckdb://warehouse", "main.orders_summary")]
    assert [e["jobs"] for e in down["edges"] if e["sink"].endswith("main.orders_summary")] == [
        ["dbt://warehouse/orders_summary"]]

    # everything again, from the start in another group: nothing changes
    before = _snapshot(db)
    replayed = RegistryHandler(db)
    ConsumerRuntime(settings, replayed, group_id=group_id + "-again").run(max_events=len(events))
    assert replayed.applied == 0 and _snapshot(db) == before

    store = RegistryStore(db)
    try:
        with registry_api(store) as url:
            assert httpx.get(f"{url}/runs/{dbt_run}").json()["producer"]["label"] == "dbt"
    finally:
        store.close()


def _snapshot(db: str) -> list[Any]:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            return [tuple(r) for t in ("runs", "transitions", "run_events", "dataset_edges")
                    for r in conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY 1, 2"))]
    finally:
        engine.dispose()


def test_a_late_failure_does_not_end_a_run_again_and_our_sequence_breaks_ties(tmp_path) -> None:  # noqa: ANN001
    """Two terminal events: the run's end, status and error are the newer one's, whichever came last; a RUNNING
    after the end moves the run's beginning back; events of one time (the emitter's within a microsecond) are
    ordered by their sequence."""
    store = RegistryStore(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        run = IngestedRun("flaky", AIRFLOW_OL, namespace="airflow")
        # in the order they come, each with a higher sequence than the one before: a FAILED of 05:00:05 last
        for e in (run.status(1, "RUNNING"), run.status(7, "FINISHED"), run.status(5, "FAILED", error=True)):
            store.apply(e)
        # no START at all, its RUNNING after its COMPLETE: the run began when it started, and lasted until its end
        lagging = IngestedRun("lagging", AIRFLOW_OL, namespace="airflow")
        for e in (lagging.status(9, "FINISHED"), lagging.status(4, "RUNNING")):
            store.apply(e)
        tie = app_run("ties", actions=0)
        for e in tie:
            e["header"]["event_time"] = T0
        for e in (tie[0], tie[2], tie[1]):  # created, FINISHED, then RUNNING of the same instant
            store.apply(e)
        with store.engine.connect() as conn:
            rows = {r.run_id: r for r in conn.execute(sa.text("SELECT run_id, status, created_at, ended_at, "
                                                              "duration_ms, error_class FROM runs"))}
    finally:
        store.close()
    flaky = rows[run.run_id]
    assert (flaky.status, flaky.error_class) == ("FINISHED", None)
    assert str(flaky.ended_at).startswith("2026-11-01 05:00:07")
    assert rows[tie[0]["header"]["run_id"]].status == "FINISHED"
    late = rows[lagging.run_id]
    assert (late.status, str(late.created_at)[:19], late.duration_ms) == ("FINISHED", "2026-11-01 05:00:04", 5000)


def test_migration_0006_keeps_each_runs_order_from_its_stored_events(tmp_path) -> None:  # noqa: ANN001
    """A registry from before 0006: each run's last event time is filled from the event its status came from, so
    an older event arriving after the upgrade still does not move its status back."""
    from lineagewire.consumers.audit import registry_model as m
    from lineagewire.consumers.audit.registry_model import STORE
    from lineagewire.db import upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    events = app_run("before", actions=0)
    engine = sa.create_engine(url)
    try:
        upgrade(engine, STORE, "0005")
        run_id, done = events[0]["header"]["run_id"], events[-1]["header"]
        with engine.begin() as conn:  # the rows 0005's registry wrote (the model's types store the times alike)
            conn.execute(m.jobs.insert().values(id=1, namespace="spark", name="before", first_seen=T0, last_seen=T0))
            conn.execute(m.runs.insert().values(run_id=run_id, job_id=1, status="FINISHED",
                                                last_sequence=done["sequence"], restarts=0))
            conn.execute(m.run_events.insert().values(event_id=done["event_id"], run_id=run_id,
                                                      kind="JobStatusChangedEvent", sequence=done["sequence"],
                                                      event_time=done["event_time"], body="{}"))
    finally:
        engine.dispose()
    store = RegistryStore(url)  # upgrades to the newest revision
    try:
        late = events[1]  # RUNNING, an earlier time; given a higher sequence it would win by sequence alone
        late["header"]["sequence"] = 99
        store.apply(late)
        with store.engine.connect() as conn:
            status, last = conn.execute(sa.text("SELECT status, last_event_time FROM runs")).one()
    finally:
        store.close()
    assert status == "FINISHED" and str(last).startswith("2026-11-01 03:00:09")
