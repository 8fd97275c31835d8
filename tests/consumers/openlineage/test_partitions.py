"""Partition values (static partitions, dated folders: issue 39.4) as OpenLineage's subset facet."""

from __future__ import annotations

import json
import uuid

import pytest
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage import Translator
from lineagewire.schemas import Codec, header
from lineagewire.schemas.events import action_lineage, dataset
from tests.drift import assert_same

codec = Codec()


def _action(inputs: list[dict], outputs: list[dict]) -> dict:
    hdr = header("ActionLineageEvent", job_namespace="spark", job_name="daily_orders", run_id=str(uuid.uuid4()))
    return action_lineage(hdr, str(uuid.uuid4()), "save", inputs=inputs, outputs=outputs)  # type: ignore[arg-type]


def _translated(event: dict) -> list[dict]:
    """The OpenLineage runs of ``event``, after checking that the service's renderer writes each as
    openlineage-python's ``Serde.to_json`` does."""
    translator = Translator()
    runs = translator.translate(codec.decode(codec.encode(event)))
    for run in runs:
        assert_same(translator.to_json(run), Serde.to_json(run), library="openlineage-python",
                    what="a run with partition values")
    return [json.loads(Serde.to_json(r)) for r in runs]


@pytest.mark.upstream
def test_partitions_read_and_written_are_the_subset_facet(assert_valid_openlineage) -> None:  # noqa: ANN001
    event = _action([dataset("file", "/in/orders", partition_values={"date": "20261128,20261129"}),
                     dataset("file", "/in/customers")],
                    [dataset("file", "/out/daily", partition_values={"ds": "2026-11-29", "region": "eu"})])
    runs = _translated(event)
    assert_valid_openlineage(runs)
    run = runs[-1]
    orders, customers = run["inputs"]
    assert orders["inputFacets"]["subset"]["inputCondition"] == {"type": "partition", "partitions": [
        {"dimensions": {"date": "20261128"}}, {"dimensions": {"date": "20261129"}}]}
    assert "subset" not in (customers.get("inputFacets") or {})
    [daily] = run["outputs"]
    assert daily["outputFacets"]["subset"]["outputCondition"] == {"type": "partition", "partitions": [
        {"dimensions": {"ds": "2026-11-29", "region": "eu"}}]}
