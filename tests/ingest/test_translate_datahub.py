"""The DataHub output takes ingested OpenLineage events as it takes the emitter's (issue 42: one graph)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from lineagewire.consumers.datahub.proposals import record as render
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.producers.ingest.translate import OpenLineageTranslator
from lineagewire.schemas import Codec
from tests.consumers.datahub.check import check_aspects_belong

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
DUCK = "urn:li:dataset:(urn:li:dataPlatform:duckdb,jaffle_shop.main.{},PROD)"


def test_every_ingested_event_gives_proposals_that_belong_and_the_dbt_lineage() -> None:
    codec, intake, datahub = Codec(), OpenLineageTranslator(), Translator()
    records: list[dict[str, Any]] = []
    for path in sorted(CORPUS.glob("*.json")):
        for event in intake.translate(json.loads(path.read_text())):
            records += [render(p) for p in datahub.translate(codec.decode(codec.encode(event)))]
    check_aspects_belong(records)
    io = [r["aspect"]["json"] for r in records if r["aspectName"] == "dataJobInputOutput"
          and "jaffle_shop.main.customers" in r["entityUrn"]]
    assert io, "no DataJob for the dbt model"
    assert sorted(e["destinationUrn"] for e in io[-1]["inputDatasetEdges"]) == [
        DUCK.format("stg_customers"), DUCK.format("stg_orders")]
    assert [e["destinationUrn"] for e in io[-1]["outputDatasetEdges"]] == [DUCK.format("customers")]
    failed = [r["aspect"]["json"] for r in records if r["aspectName"] == "dataProcessInstanceRunEvent"
              and (r["aspect"]["json"].get("result") or {}).get("type") == "FAILURE"]
    assert len(failed) >= 2  # the failing dbt model and the failing Airflow task
