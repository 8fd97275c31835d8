"""Partition values (static partitions, dated folders: issue 39.4) in DataHub: the dataset's custom property
``partition`` (the one last written) and the run's ``partitionsRead`` / ``partitionsWritten``."""

from __future__ import annotations

import uuid

import pytest
from datahub.ingestion.sink.file import write_metadata_file

from lineagewire.consumers.datahub.proposals import record as render
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.schemas import action_lineage, dataset, header

from .check import check_metadata_file

ORDERS = "urn:li:dataset:(urn:li:dataPlatform:file,/in/orders,PROD)"
DAILY = "urn:li:dataset:(urn:li:dataPlatform:file,/out/daily,PROD)"


def _action(inputs: list[dict], outputs: list[dict]) -> dict:
    hdr = header("ActionLineageEvent", job_namespace="spark", job_name="daily_orders", run_id=str(uuid.uuid4()))
    return action_lineage(hdr, str(uuid.uuid4()), "save", inputs=inputs, outputs=outputs)  # type: ignore[arg-type]


EVENT = _action([dataset("file", "/in/orders", partition_values={"date": "20261128,20261129"}),
                 dataset("file", "/in/customers")],
                [dataset("file", "/out/daily", partition_values={"ds": "2026-11-29", "region": "eu"})])


def test_the_partition_written_is_the_datasets_custom_property_and_the_runs_partitions_are_named() -> None:
    records = [render(p) for p in Translator().translate(EVENT)]
    patches = [r for r in records if r["aspectName"] == "datasetProperties" and r.get("changeType") == "PATCH"]
    assert [(r["entityUrn"], r["aspect"]["json"]) for r in patches] == [
        (DAILY, [{"op": "add", "path": "/customProperties/partition", "value": "ds=2026-11-29,region=eu"}])]
    [run] = [r["aspect"]["json"] for r in records if r["aspectName"] == "dataProcessInstanceProperties"]
    assert run["customProperties"]["partitionsRead"] == "/in/orders[date=20261128,20261129]"
    assert run["customProperties"]["partitionsWritten"] == "/out/daily[ds=2026-11-29,region=eu]"
    assert not [r for r in records if r["entityUrn"] == ORDERS and r["aspectName"] == "datasetProperties"]


def test_an_action_without_partitions_names_none() -> None:
    records = [render(p) for p in Translator().translate(
        _action([dataset("file", "/in/customers")], [dataset("file", "/out/x")]))]
    assert not [r for r in records if r["aspectName"] == "datasetProperties"]
    [run] = [r["aspect"]["json"] for r in records if r["aspectName"] == "dataProcessInstanceProperties"]
    assert "partitionsRead" not in run["customProperties"] and "partitionsWritten" not in run["customProperties"]


@pytest.mark.upstream
def test_the_proposals_pass_datahubs_own_check(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "mcps.json"
    write_metadata_file(path, Translator().translate(EVENT))
    check_metadata_file(path)
