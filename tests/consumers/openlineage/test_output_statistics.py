"""Rows and bytes an action wrote (contract v2 ``row_count``, ``byte_count``) as OpenLineage's ``outputStatistics``
output facet."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage import Translator
from lineagewire.schemas import Codec
from tests.drift import assert_same

from .samples import app_run

codec = Codec()


def counted(rows: int | None, size: int | None) -> dict[str, Any]:
    action = copy.deepcopy(app_run(actions=1)[2])
    action["outputs"][0]["row_count"], action["outputs"][0]["byte_count"] = rows, size
    return codec.decode(codec.encode(action))  # what a consumer decodes


def test_counts_are_the_outputs_output_statistics_facet(assert_valid_openlineage) -> None:  # noqa: ANN001
    [out] = [json.loads(Serde.to_json(e)) for e in Translator().translate(counted(1234, 56789))]
    facet = out["outputs"][0]["outputFacets"]["outputStatistics"]
    assert (facet["rowCount"], facet["size"]) == (1234, 56789)
    assert "fileCount" not in facet  # the contract does not carry it: left out, not zero
    assert not out["inputs"][0].get("inputFacets")  # a read has no statistics
    assert_valid_openlineage([out])


def test_only_the_counts_spark_gave_are_in_the_facet(assert_valid_openlineage) -> None:  # noqa: ANN001
    [rows_only] = [json.loads(Serde.to_json(e)) for e in Translator().translate(counted(7, None))]
    assert rows_only["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 7
    assert "size" not in rows_only["outputs"][0]["outputFacets"]["outputStatistics"]
    [none] = [json.loads(Serde.to_json(e)) for e in Translator().translate(counted(None, None))]
    assert not none["outputs"][0].get("outputFacets")
    assert_valid_openlineage([rows_only, none])


def test_counts_of_each_run_share_the_datasets_cached_facets() -> None:
    tr = Translator()
    first, second = tr.translate(counted(10, 100))[0], tr.translate(counted(20, 200))[0]
    # The facets built from the dataset are the same objects (from the cache); the statistics are each run's.
    assert first.outputs[0].facets["schema"] is second.outputs[0].facets["schema"]
    assert first.outputs[0].outputFacets["outputStatistics"].rowCount == 10
    assert second.outputs[0].outputFacets["outputStatistics"].rowCount == 20


@pytest.mark.upstream
def test_output_statistics_render_as_openlineage_python_does() -> None:
    tr = Translator()
    for rows, size in ((1234, 56789), (0, 0), (5, None), (None, 9), (None, None)):
        event = counted(rows, size)
        event["outputs"][0]["partition_values"] = {"day": "2026-11-01"} if rows == 5 else {}
        for ev in tr.translate(event) + tr.translate(event):  # the second time from the cache
            assert_same(tr.to_json(ev), Serde.to_json(ev), library="openlineage-python",
                        what=f"Renderer.to_json of an output with rows {rows} and bytes {size}")
