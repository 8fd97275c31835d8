"""Schema evolution: every released version resolves to the current one and back."""

from __future__ import annotations

import copy
import io
import json

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from hypothesis import HealthCheck, given, settings

from lineagewire.schemas import EVENT_SCHEMAS, Codec, _repository
from tests.schemas.strategies import for_schema

RELEASED = [(v, name) for v, schemas in _repository.released().items() for name in schemas]


def test_at_least_one_released_version_is_kept() -> None:
    assert _repository.released(), "schemas/released/v<N>/ must hold every released contract version"
    assert max(_repository.released()) <= _repository.SCHEMA_VERSION


def assert_resolves_both_ways(old: dict, new: dict, examples: int = 25) -> None:
    """Data written with ``old`` reads with ``new`` and the other way round (fastavro's schema resolution)."""
    old_parsed, new_parsed = parse_schema(copy.deepcopy(old)), parse_schema(copy.deepcopy(new))

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(for_schema(old, {}))
    def old_to_new(event: dict) -> None:
        buf = io.BytesIO()
        schemaless_writer(buf, old_parsed, event)
        buf.seek(0)
        schemaless_reader(buf, old_parsed, new_parsed)

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(for_schema(new, {}))
    def new_to_old(event: dict) -> None:
        buf = io.BytesIO()
        schemaless_writer(buf, new_parsed, event)
        buf.seek(0)
        schemaless_reader(buf, new_parsed, old_parsed)

    old_to_new()
    new_to_old()


@pytest.mark.parametrize(("version", "name"), RELEASED)
def test_old_writer_new_reader_and_back(version: int, name: str) -> None:
    assert_resolves_both_ways(_repository.released()[version][name].schema, _repository.current()[name].schema)


def test_the_resolution_check_catches_a_field_added_without_a_default() -> None:
    """The check above is not vacuous: an incompatible change fails it."""
    name = EVENT_SCHEMAS["JobStatusChangedEvent"]
    current = _repository.current()[name].schema
    broken = copy.deepcopy(current)
    broken["fields"].append({"name": "queue", "type": "string", "doc": "no default: old data cannot fill it"})
    with pytest.raises(Exception, match=r"queue|No default"):
        assert_resolves_both_ways(current, broken, examples=3)


def test_a_field_added_with_a_default_is_read_both_ways() -> None:
    """What the next version will do: the codec reads an older writer into the current reader."""
    name = EVENT_SCHEMAS["JobStatusChangedEvent"]
    current = _repository.current()[name].schema
    newer = copy.deepcopy(current)
    newer["fields"].append({"name": "queue", "type": ["null", "string"], "default": None, "doc": "x"})
    newer_parsed = parse_schema(json.loads(json.dumps(newer)))
    from tests.helpers import status_event

    event = status_event()
    buf = io.BytesIO()
    schemaless_writer(buf, newer_parsed, {**event, "queue": "etl"})
    buf.seek(0)
    assert schemaless_reader(buf, newer_parsed, _repository.current()[name].parsed) == event
    buf = io.BytesIO()
    schemaless_writer(buf, _repository.current()[name].parsed, event)
    buf.seek(0)
    assert schemaless_reader(buf, _repository.current()[name].parsed, newer_parsed)["queue"] is None


def test_codec_knows_every_released_fingerprint() -> None:
    codec = Codec()
    for schemas in _repository.released().values():
        for es in schemas.values():
            assert es.fingerprint in codec._by_fingerprint
