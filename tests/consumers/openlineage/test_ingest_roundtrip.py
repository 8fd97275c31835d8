"""OpenLineage in, the Avro contract, OpenLineage out: the event that came in comes out (issue 42).

The events of tests/ingest/corpus/ (shaped as openlineage-spark, dbt-ol, Airflow's provider and static-lineage
producers write them) and events built with openlineage-python's model go through the intake's translation,
Avro encoding and decoding, and this service's translation and rendering. What comes out must be what went in,
but for what openlineage-python's serialisation does to every event it sends: ``null`` values and empty objects
inside lists are left out (``serde_form``).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

from openlineage.client import OpenLineageClient
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage import Translator
from lineagewire.consumers.openlineage.delivery import kafka_message_key
from lineagewire.consumers.openlineage.handler import Enrichment, _HandBack
from lineagewire.consumers.openlineage.render import Renderer
from lineagewire.producers.ingest.translate import OpenLineageTranslator
from lineagewire.schemas import Codec
from tests.ingest.test_translate import python_client_events

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "ingest" / "corpus"
CODEC = Codec()
INTAKE = OpenLineageTranslator()


def originals() -> list[dict[str, Any]]:
    events = [json.loads(p.read_text()) for p in sorted(CORPUS.glob("*.json"))] + python_client_events()
    # a null the producer wrote, which Serde leaves out on the way out
    events[0]["run"]["facets"]["spark_unknown"] = {"_producer": "https://example.com/x", "_schemaURL":
                                                  "https://example.com/x.json", "inputs": None, "output": [{}, 1]}
    return events


def serde_form(value: Any) -> Any:
    """``value`` as openlineage-python's Serde writes it: no nulls, no empty objects inside lists."""
    if isinstance(value, dict):
        return {k: serde_form(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [serde_form(v) for v in value if v is not None and v != {}]
    return value


def round_trip(ev: dict[str, Any], translator: Translator) -> list[Any]:
    return [out for ours in INTAKE.translate(ev) for out in translator.translate(CODEC.decode(CODEC.encode(ours)))]


def test_every_event_comes_out_as_it_came_in_and_valid(
        assert_valid_openlineage: Callable[[list[dict[str, Any]]], None]) -> None:
    translator = Translator()
    outs = []
    for ev in originals():
        (out,) = round_trip(ev, translator)  # one event out for one in: the derived ones give none
        rendered = json.loads(translator.to_json(out))
        assert rendered == serde_form(ev), ev["eventTime"]
        assert json.loads(Serde.to_json(out)) == rendered  # what every openlineage-python transport sends
        outs.append(rendered)
    assert {o["schemaURL"].rsplit("/", 1)[1] for o in outs} == {"RunEvent", "DatasetEvent", "JobEvent"}
    assert_valid_openlineage(outs)


def test_an_ingested_event_is_keyed_and_enriched_as_openlineage_python_does_it() -> None:
    translator = Translator()
    by_name = {p.stem: json.loads(p.read_text()) for p in CORPUS.glob("*.json")}
    keys = {name: kafka_message_key(round_trip(ev, translator)[0]) for name, ev in by_name.items()}
    assert keys["spark_sql_complete"] == "run:airflow/orders_dag"  # the root of its parent chain
    assert keys["dbt_model_start"] == "run:dbt/dbt-run-jaffle_shop"
    assert keys["airflow_dag_abort"] == "run:airflow/orders_dag"
    assert keys["dataset_event_rename"] == "dataset:postgres://db.example.com:5432/shop.public.customers_v2"
    assert keys["job_event_static"] == "job:reports/weekly_revenue"
    # the client's configured tags merge into the event's own tags facet (JSON, not a facet object)
    handback = _HandBack()
    client = OpenLineageClient(transport=handback, config={"tags": {"job": {"team": "platform"}}})  # type: ignore[arg-type]
    client.emit(round_trip(by_name["airflow_task_start"], translator)[0])
    tags = json.loads(Serde.to_json(handback.events[0]))["job"]["facets"]["tags"]["tags"]
    assert [(t["key"], t["value"]) for t in tags] == [("tier", "gold"), ("team", "platform")]


def test_the_service_enriches_and_renders_ingested_events_as_the_client_sends_them(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("LINEAGEWIRE_TEST_TEAM", "data-eng")
    config = {"tags": {"run": {"tier": "gold"}, "job": {"team": "platform"}},
              "facets": {"environment_variables": ["LINEAGEWIRE_TEST_TEAM"]}}
    theirs_back, ours_back = _HandBack(), _HandBack()
    theirs = OpenLineageClient(transport=theirs_back, config=config)  # type: ignore[arg-type]
    renderer = Renderer()
    enrich = Enrichment(OpenLineageClient(transport=ours_back, config=config), ours_back,  # type: ignore[arg-type]
                        share=renderer.share)
    assert enrich.public
    ours = []
    for ev in originals():
        theirs.emit(round_trip(ev, Translator())[0])
        ours.append(json.loads(renderer.to_json(enrich(round_trip(ev, Translator())[0]))))
    assert ours == [json.loads(Serde.to_json(e)) for e in theirs_back.events]
    assert all(o["run"]["facets"]["environmentVariables"] for o in ours if "run" in o)


def test_events_of_lineagewire_producers_are_translated_as_before() -> None:
    from .samples import app_run

    events = app_run()
    assert all(e["header"].get("openlineage") is None for e in events)
    outs = [o for e in events for o in Translator().translate(CODEC.decode(CODEC.encode(e)))]
    assert len(outs) == len(events)
    assert {o.producer for o in outs} == {Translator().producer}
