"""``Renderer.to_json``: the text openlineage-python's ``Serde.to_json`` gives, on every kind of event."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Any

import attr
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import RunFacet
from openlineage.client.generated import schema_dataset
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage import TranslationError, Translator
from lineagewire.consumers.openlineage.render import Renderer
from lineagewire.schemas import Codec, _repository
from tests.drift import assert_same
from tests.schemas.strategies import events as schema_events

from .samples import app_run, refresh_run

codec = Codec()


def translated(events: list[dict[str, Any]], translator: Translator) -> list[RunEvent]:
    return [o for e in events for o in translator.translate(codec.decode(codec.encode(e)))]


def same_as_serde(ours: str, ev: RunEvent, what: str) -> None:
    assert_same(ours, Serde.to_json(ev), library="openlineage-python",
                what=f"Renderer.to_json of {what} ({ev.eventType.value} of {ev.job.namespace}/{ev.job.name})")


@pytest.mark.upstream
def test_sample_events_render_as_openlineage_python_does() -> None:
    tr = Translator()
    samples = [*app_run(), *app_run(fail=True), *refresh_run(), *app_run(actions=5, parent={
        "job_namespace": "wf", "job_name": "w", "run_id": "not-a-uuid"})]
    # Twice through one translator: the second pass renders the shared facets from their kept form.
    for ev in translated(samples, tr) + translated(samples, tr):
        same_as_serde(tr.to_json(ev), ev, "a sample event")


_KINDS = list(_repository.current())


@pytest.mark.upstream
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_KINDS).flatmap(schema_events))
def test_any_contract_event_renders_as_openlineage_python_does(event: dict[str, Any]) -> None:
    tr = Translator()
    try:
        out = tr.translate(event)
    except TranslationError:
        assume(False)
        return
    for ev in out + tr.translate(event):  # the second time from the cache
        same_as_serde(tr.to_json(ev), ev, f"a {event['header']['schema_name']}")


class Colour(enum.Enum):
    RED = "red"
    NOTHING = None


@attr.define
class Empty:
    nothing: Any = None


@attr.define
class Odd(RunFacet):
    text: str = "naïve ☃ \"quoted\" \\ \n"
    missing: Any = None
    colour: Colour = Colour.RED
    no_colour: Colour = Colour.NOTHING
    when: dt.datetime = dt.datetime(2026, 11, 1, 3, 0, tzinfo=dt.UTC)
    ident: uuid.UUID = attr.field(factory=lambda: uuid.UUID("6f1c8a52-3b0e-5d1e-9a57-1e2f0c4b7d31"))
    items: list[Any] = attr.field(factory=lambda: [None, 1, Empty(), {}, [], {"a": None}, (1, 2), [None, Empty()]])
    pair: tuple[Any, ...] = (Empty(nothing=1), None)
    mapping: dict[str, Any] = attr.field(factory=lambda: {"z": None, "b": Empty(), "c": {"nested": None, "ok": 1}})
    raw: bytes = b"\x00"


@pytest.mark.upstream
def test_odd_values_render_as_openlineage_python_does() -> None:
    ev = RunEvent(eventType=RunState.OTHER, eventTime="2026-11-01T03:00:00.000Z",
                  run=Run(runId=str(uuid.uuid4()), facets={"odd": Odd(), "empty": Empty()}),
                  job=Job(namespace="ns", name="job", facets={}),
                  inputs=[InputDataset(namespace="file", name="/in", facets={
                      "schema": schema_dataset.SchemaDatasetFacet(fields=[
                          schema_dataset.SchemaDatasetFacetFields(name="a", type=None)])})],
                  outputs=[OutputDataset(namespace="file", name="/out")], producer="https://example.com/p")
    r = Renderer()
    same_as_serde(r.to_json(ev), ev, "odd values")
    r.share(ev.run.facets["odd"])
    same_as_serde(r.to_json(ev), ev, "odd values, a shared facet rendered the first time")
    same_as_serde(r.to_json(ev), ev, "odd values, a shared facet from its kept form")


def test_shared_objects_are_rendered_once_and_the_bound_holds() -> None:
    r = Renderer(max_shared=4)
    facets = [Empty(nothing=i) for i in range(10)]
    for f in facets:
        r.share(f)
    assert len(r._shared) <= 4  # noqa: SLF001 - the bound
    kept = facets[-1]
    first = r.plain(kept)
    assert r.plain(kept) is first  # the kept form, not a new walk
    assert r.plain(Empty(nothing=9)) == first and r.plain(Empty(nothing=9)) is not first


@pytest.mark.upstream
def test_lifecycle_facets_render_as_openlineage_python_does() -> None:
    tr = Translator()
    events = []
    for change, before in (("CREATE", None), ("RENAME", {"namespace": "file", "name": "/data/old"}), ("DROP", None)):
        action = app_run(actions=1)[2]
        action["outputs"][0]["lifecycle_change"], action["outputs"][0]["previous_identifier"] = change, before
        events.append(action)
    for ev in translated(events, tr) + translated(events, tr):
        assert ev.outputs[0].facets["lifecycleStateChange"].lifecycleStateChange.value in ("CREATE", "RENAME", "DROP")
        same_as_serde(tr.to_json(ev), ev, "a lifecycle change")
