"""header.openlineage (schemas/openlineage.py): what an event that came in as OpenLineage carries of it."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from lineagewire.schemas import Codec, header, job_status_changed
from lineagewire.schemas.openlineage import DERIVED, diff, origin, origin_text, regenerate, restore

WHEN = dt.datetime(2026, 11, 20, 9, 0, 0, 250000, tzinfo=dt.UTC)


def status(openlineage: str | None) -> dict:
    hdr = header("JobStatusChangedEvent", job_namespace="airflow", job_name="dag.task", run_id="r1",
                 producer={"name": "https://example.com/p", "version": "", "host": ""}, event_time=WHEN,
                 openlineage=openlineage)
    return dict(job_status_changed(hdr, "FINISHED", None))


def test_events_of_lineagewire_producers_carry_none_and_stand_for_none() -> None:
    event = status(None)
    assert origin(event) is None and restore(event) is None
    assert restore(status(DERIVED)) is None


def test_the_field_survives_avro_and_restores_the_event() -> None:
    original = {"eventType": "COMPLETE", "eventTime": "2026-11-20T09:00:00.25Z", "producer": "https://example.com/p",
                "run": {"runId": "r1", "facets": {"custom": {"_producer": "https://example.com/p", "x": [1, None]}}},
                "job": {"namespace": "airflow", "name": "dag.task"}}
    event = status(None)
    event["header"]["openlineage"] = origin_text("RunEvent", diff(original, regenerate(event)))
    codec = Codec()
    assert restore(codec.decode(codec.encode(event))) == original
    assert regenerate(event)["eventTime"] == "2026-11-20T09:00:00.250000+00:00"


def test_a_version_this_reader_does_not_know_is_named() -> None:
    with pytest.raises(ValueError, match=r"header.openlineage v=2; expected 1"):
        restore(status(json.dumps({"v": 2, "kind": "RunEvent", "patch": None})))
