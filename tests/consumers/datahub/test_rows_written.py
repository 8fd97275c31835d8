"""Rows and bytes an action wrote (contract v2 ``row_count``, ``byte_count``) in DataHub: the action run's custom
properties ``rowsWritten`` / ``bytesWritten``; the dataset and job aspects stay those of the dataset."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from datahub.ingestion.sink.file import write_metadata_file

from lineagewire.consumers.datahub.proposals import record as render
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.schemas import action_lineage, dataset, header, schema_field

from .check import check_metadata_file

FIELDS = [schema_field("id", "bigint", False)]


def _action(rows: int | None, size: int | None) -> dict[str, Any]:
    hdr = header("ActionLineageEvent", job_namespace="spark", job_name="daily_orders", run_id=str(uuid.uuid4()))
    return action_lineage(hdr, str(uuid.uuid4()), "save",  # type: ignore[arg-type]
                          inputs=[dataset("file", "/in/orders", fields=FIELDS)],
                          outputs=[dataset("file", "/out/daily", fields=FIELDS, row_count=rows, byte_count=size)])


def _run_properties(records: list[dict[str, Any]]) -> dict[str, str]:
    [run] = [r["aspect"]["json"] for r in records if r["aspectName"] == "dataProcessInstanceProperties"]
    return run["customProperties"]


def test_the_rows_and_bytes_written_are_the_action_runs_properties() -> None:
    records = [render(p) for p in Translator().translate(_action(1234, 56789))]
    props = _run_properties(records)
    assert (props["rowsWritten"], props["bytesWritten"]) == ("1234", "56789")
    assert "row_count" not in str([r for r in records if r["aspectName"] != "dataProcessInstanceProperties"])


def test_an_action_spark_did_not_count_names_no_counts() -> None:
    props = _run_properties([render(p) for p in Translator().translate(_action(None, None))])
    assert "rowsWritten" not in props and "bytesWritten" not in props
    rows_only = _run_properties([render(p) for p in Translator().translate(_action(0, None))])
    assert rows_only["rowsWritten"] == "0" and "bytesWritten" not in rows_only


def test_runs_with_other_counts_share_the_memoised_job_and_dataset_aspects() -> None:
    tr = Translator()
    first, second = (tr.translate(_action(n, n * 10)) for n in (10, 20))

    def built_once(proposals: list[Any]) -> dict[tuple[str, str], Any]:
        return {(p.entityUrn, p.aspectName): p.aspect for p in proposals
                if p.aspectName in ("dataJobInfo", "dataJobInputOutput", "schemaMetadata")}

    once, again = built_once(first), built_once(second)
    assert len(once) == 4 and once.keys() == again.keys()  # the job's two aspects, both datasets' schemas
    # The same objects: the counts, which differ on every run, are not part of what the memo is keyed on.
    assert all(once[k] is again[k] for k in once)
    assert [_run_properties([render(p) for p in ps])["rowsWritten"] for ps in (first, second)] == ["10", "20"]


@pytest.mark.upstream
def test_the_proposals_pass_datahubs_own_check(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "mcps.json"
    write_metadata_file(path, Translator().translate(_action(1234, 56789)))
    check_metadata_file(path)
