"""The fast Serde.to_json: byte for byte openlineage-python's own, on every kind of event and odd shapes."""

from __future__ import annotations

import datetime as dt
import enum
import gc
import json
import uuid
from typing import Any

import attr
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import RunFacet
from openlineage.client.generated import schema_dataset
from openlineage.client.serde import Serde
from openlineage.client.transport.file import FileConfig, FileTransport

from lineagewire.consumers.openlineage import TranslationError, Translator, serde
from lineagewire.schemas import Codec, _repository
from tests.schemas.strategies import events as schema_events

from .samples import app_run, refresh_run

codec = Codec()
PRODUCER = "https://example.com/producer"


def translated(events: list[dict[str, Any]], translator: Translator | None = None) -> list[RunEvent]:
    tr = translator or Translator()
    return [o for e in events for o in tr.translate(codec.decode(codec.encode(e)))]


@pytest.fixture(autouse=True, scope="module")
def _installed() -> Any:
    # The service entry points install it; these tests check the installed rendering.
    assert serde.install()
    yield
    serde.uninstall()


def test_constructing_a_translator_changes_nothing_process_wide() -> None:
    serde.uninstall()
    try:
        Translator().translate(codec.decode(codec.encode(app_run()[0])))
        assert not serde.installed()
        assert Serde.__dict__["to_json"].__func__ is not serde._serde_to_json
    finally:
        serde.install()


def test_sample_events_render_exactly_as_openlineage_python_does() -> None:
    tr = Translator()
    samples = [*app_run(), *app_run(fail=True), *refresh_run(), *app_run(actions=5, parent={
        "job_namespace": "wf", "job_name": "w", "run_id": "not-a-uuid"})]
    # Twice through one translator: the second pass serialises cached (frozen) facets.
    for ev in translated(samples, tr) + translated(samples, tr):
        assert Serde.to_json(ev) == serde.reference_to_json(ev)
        assert serde.to_json(ev) == serde.reference_to_json(ev)


_KINDS = list(_repository.current())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_KINDS).flatmap(schema_events))
def test_any_contract_event_renders_exactly_as_openlineage_python_does(event: dict[str, Any]) -> None:
    tr = Translator()
    try:
        out = tr.translate(event)
    except TranslationError:
        assume(False)
        return
    for ev in out + tr.translate(event):  # the second time from the cache
        assert Serde.to_json(ev) == serde.reference_to_json(ev)


class Colour(enum.Enum):
    RED = "red"
    NOTHING = None
    EMPTY: Any = {}


class Level(enum.IntEnum):
    HIGH = 3


class int64(int):  # noqa: N801 - named as numpy's, which Serde recognises by its name
    pass


class Tagged(str):
    pass


@attr.define
class Empty:
    nothing: Any = None


@attr.define
class Odd(RunFacet):
    text: str = "naïve ☃ \"quoted\" \\ \n"
    number: float = 1.5
    big: int = 2**70
    flag: bool = False
    missing: Any = None
    colour: Colour = Colour.RED
    no_colour: Colour = Colour.NOTHING
    level: Level = Level.HIGH
    when: dt.datetime = dt.datetime(2026, 11, 1, 3, 0, tzinfo=dt.UTC)
    day: dt.date = dt.date(2026, 11, 1)
    ident: uuid.UUID = attr.field(factory=lambda: uuid.UUID("6f1c8a52-3b0e-5d1e-9a57-1e2f0c4b7d31"))
    numpy_like: int = int64(7)
    tagged: str = Tagged("tag")
    items: list[Any] = attr.field(factory=lambda: [None, 1, Empty(), {}, [], {"a": None}, Colour.EMPTY, (1, 2),
                                                   Colour.NOTHING, [None, Empty()]])
    pair: tuple[Any, ...] = (Empty(nothing=1), None)
    members: frozenset[int] = frozenset({3, 1, 2})
    mapping: dict[str, Any] = attr.field(factory=lambda: {"z": None, "b": Empty(), "a": [Empty(nothing="x")],
                                                          "c": {"nested": None, "ok": 1.25}})
    raw: bytes = b"\x00"
    nan: float = float("nan")
    infinite: float = float("inf")
    kind: type = int


def _event(*run_facets: tuple[str, Any]) -> RunEvent:
    return RunEvent(eventType=RunState.OTHER, eventTime="2026-11-01T03:00:00.000Z",
                    run=Run(runId=str(uuid.uuid4()), facets=dict(run_facets)),
                    job=Job(namespace="ns", name="job", facets={}),
                    inputs=[InputDataset(namespace="file", name="/in", facets={
                        "schema": schema_dataset.SchemaDatasetFacet(fields=[
                            schema_dataset.SchemaDatasetFacetFields(name="a", type=None)])})],
                    outputs=[OutputDataset(namespace="file", name="/out")], producer=PRODUCER)


def test_odd_values_render_exactly_as_openlineage_python_does() -> None:
    ev = _event(("odd", Odd()), ("empty", Empty()))
    text = Serde.to_json(ev)
    assert text == serde.reference_to_json(ev)
    assert serde.to_json(ev) == text
    odd = json.loads(text.replace("NaN", "null").replace("Infinity", "null"))["run"]["facets"]["odd"]
    assert odd["colour"] == "red"
    assert "no_colour" not in odd and "missing" not in odd


@pytest.mark.parametrize("mapping", [{1: "int key"}, {"a": 1, 2: "mixed keys"}, {Tagged("k"): "str subclass key"},
                                     {("t", 1): "tuple key"}])
def test_keys_it_does_not_reproduce_go_to_openlineage_python(mapping: dict[Any, Any]) -> None:
    ev = _event(("odd", Odd(mapping=mapping)))
    try:
        expected: Any = serde.reference_to_json(ev)
    except TypeError as exc:
        expected = type(exc)
    try:
        got: Any = Serde.to_json(ev)
    except TypeError as exc:
        got = type(exc)
    assert got == expected


def test_extra_arguments_and_other_event_types_use_openlineage_python() -> None:
    ev = translated(app_run())[0]
    assert Serde.to_json(ev, indent=2) == serde.reference_to_json(ev, indent=2)
    assert "\n  " in Serde.to_json(ev, indent=2)
    ds = DatasetEvent(eventTime="2026-11-01T03:00:00.000Z", producer=PRODUCER,
                      dataset=StaticDataset(namespace="file", name="/x"))
    assert Serde.to_json(ds) == serde.reference_to_json(ds)
    with pytest.raises(TypeError, match="attrs OpenLineage event"):
        serde.to_json({"not": "an event"})


def test_frozen_facets_reuse_their_text_and_others_are_rendered_each_time() -> None:
    frozen = serde.freeze(Odd(text="first"))
    loose = Odd(text="first")
    ev = _event(("frozen", frozen), ("loose", loose))
    before = Serde.to_json(ev)
    assert before == serde.reference_to_json(ev)
    loose.text = "second"
    after = json.loads(Serde.to_json(ev).replace("NaN", "null").replace("Infinity", "null"))
    assert after["run"]["facets"]["loose"]["text"] == "second"
    assert after["run"]["facets"]["frozen"]["text"] == "first"


def test_a_frozen_object_is_forgotten_when_it_dies() -> None:
    facet = serde.freeze(Odd())
    key = id(facet)
    Serde.to_json(_event(("f", facet)))
    assert key in serde._frozen
    del facet
    gc.collect()
    assert key not in serde._frozen


def test_objects_that_cannot_be_weakly_referenced_are_not_frozen() -> None:
    value = ("a", "tuple")
    assert serde.freeze(value) is value
    assert id(value) not in serde._frozen


def test_uninstall_restores_openlineage_python_and_install_is_idempotent() -> None:
    original = serde.reference_to_json
    ev = translated(app_run())[0]
    expected = original(ev)
    serde.uninstall()
    try:
        assert not serde.installed()
        assert Serde.to_json(ev) == expected
        serde.uninstall()
    finally:
        serde.install()
        serde.install()
    assert serde.installed()
    assert Serde.to_json(ev) == expected


def test_the_file_transport_writes_the_same_bytes_either_way(tmp_path) -> None:  # noqa: ANN001
    out = translated([*app_run(), *refresh_run()])
    fast, slow = tmp_path / "fast.jsonl", tmp_path / "slow.jsonl"
    for ev in out:
        FileTransport(FileConfig(log_file_path=str(fast), append=True)).emit(ev)
    serde.uninstall()
    try:
        for ev in out:
            FileTransport(FileConfig(log_file_path=str(slow), append=True)).emit(ev)
    finally:
        serde.install()
    assert fast.read_bytes() == slow.read_bytes()
    assert len(fast.read_text().splitlines()) == len(out)


def test_the_installed_serialiser_is_a_verified_version() -> None:
    # Fails after an upgrade of openlineage-python or attrs: run this file against the new version, and when
    # it passes, add the new fingerprint to serde.VERIFIED.
    assert serde.fingerprint() in serde.VERIFIED


def test_an_unverified_serialiser_is_left_in_place(monkeypatch) -> None:  # noqa: ANN001
    ev = translated(app_run())[0]
    serde.uninstall()
    try:
        monkeypatch.setattr(serde, "VERIFIED", frozenset({"another version"}))
        assert serde.install() is False
        assert not serde.installed()
        assert Serde.__dict__["to_json"].__func__ is not serde._serde_to_json
        assert Serde.to_json(ev) == serde.reference_to_json(ev)
        Translator()  # builds, and translates, without it
        assert not serde.installed()
    finally:
        monkeypatch.undo()
        assert serde.install() is True
    assert serde.installed()


def test_a_frozen_facet_cannot_change_so_its_cached_text_is_never_stale() -> None:
    facet = serde.freeze(Odd(text="first", mapping={"a": [Empty(nothing="x")]}))
    ev = _event(("frozen", facet))
    before = Serde.to_json(ev)
    assert before == serde.reference_to_json(ev)
    with pytest.raises(attr.exceptions.FrozenInstanceError, match="frozen"):
        facet.text = "second"
    with pytest.raises(AttributeError):
        facet.items.append("more")  # its lists became tuples
    with pytest.raises(TypeError, match="frozen"):
        facet.mapping["b"] = 1
    with pytest.raises(attr.exceptions.FrozenInstanceError):
        facet.mapping["a"][0].nothing = "changed"  # nested attrs objects are read-only too
    assert Serde.to_json(ev) == before == serde.reference_to_json(ev)


def test_the_translators_shared_facets_are_read_only() -> None:
    tr = Translator()
    first, second = (translated(app_run(actions=1), tr) for _ in range(2))
    shared = [(a, b) for a, b in zip(first, second, strict=True) if a.outputs and b.outputs]
    assert shared, "no event with outputs in the sample"
    a, b = shared[0]
    facet = b.outputs[0].facets["schema"]
    assert facet is a.outputs[0].facets["schema"]  # the cache shares it between events
    with pytest.raises(attr.exceptions.FrozenInstanceError):
        facet.fields[0].name = "renamed"
    assert Serde.to_json(a) == serde.reference_to_json(a)


def test_an_unverified_serialiser_is_announced_as_a_warning(monkeypatch, caplog) -> None:  # noqa: ANN001
    serde.uninstall()
    monkeypatch.setattr(serde, "_found", [])
    monkeypatch.setattr(serde, "VERIFIED", frozenset({"another version"}))
    try:
        with caplog.at_level("INFO", logger=serde.__name__):
            assert serde.install() is False
        [record] = [r for r in caplog.records if r.name == serde.__name__]
        assert record.levelname == "WARNING" and "keeping openlineage-python's own serialiser" in record.getMessage()
    finally:
        monkeypatch.undo()
        assert serde.install() is True
