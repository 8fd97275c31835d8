"""The receiver's spec check: the spec's own schemas, with what real producers send taken, and the field named."""

from __future__ import annotations

import pytest

from lineagewire.producers.ingest.validation import SpecValidator

from .conftest import ol_event

_DATASOURCE = "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet"


@pytest.fixture(scope="module")
def validator() -> SpecValidator:
    return SpecValidator()


def test_a_scheme_less_uri_as_openlineage_spark_sends_for_local_files_is_taken(validator: SpecValidator) -> None:
    facet = {"_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.39.0/integration/spark",
             "_schemaURL": _DATASOURCE, "name": "file", "uri": "file"}
    event = ol_event("spark", outputs=[{"namespace": "file", "name": "/tmp/out", "facets": {"dataSource": facet}}])
    assert validator.errors(event) == []


def test_formats_the_spec_checks_are_checked_and_named(validator: SpecValidator) -> None:
    event = ol_event("x", eventTime="2026-13-01T00:00:00Z")
    event["run"]["runId"] = "not-a-uuid"
    problems = validator.errors(event)
    assert any(p.startswith("eventTime:") and "date-time" in p for p in problems), problems
    assert any(p.startswith("run/runId:") and "uuid" in p for p in problems), problems


def test_dataset_and_job_events_are_checked_against_their_own_schema(validator: SpecValidator) -> None:
    dataset_event = {"eventTime": "2026-01-01T00:00:00Z", "producer": "https://x", "schemaURL":
                     "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                     "dataset": {"namespace": "s3://b", "name": "t"}}
    assert validator.errors(dataset_event) == []
    del dataset_event["dataset"]
    assert any("dataset" in p and "DatasetEvent" in p for p in validator.errors(dataset_event))
    # a RunEvent's schema would take this JobEvent (it has job and time): its own refuses a run in it
    job_event = {**dataset_event, "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
                 "job": {"namespace": "n", "name": "j"}, "run": {"runId": "00000000-0000-0000-0000-000000000001"}}
    assert validator.errors(job_event) != []
    del job_event["run"]
    assert validator.errors(job_event) == []
