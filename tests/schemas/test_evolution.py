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


@pytest.mark.parametrize(("version", "name"), RELEASED)
def test_old_writer_new_reader_and_back(version: int, name: str) -> None:
    old = _repository.released()[version][name]
    new = _repository.current()[name]

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(for_schema(old.schema, {}))
    def old_to_new(event: dict) -> None:
        buf = io.BytesIO()
        schemaless_writer(buf, old.parsed, event)
        buf.seek(0)
        schemaless_reader(buf, old.parsed, new.parsed)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(for_schema(new.schema, {}))
    def new_to_old(event: dict) -> None:
        buf = io.BytesIO()
        schemaless_writer(buf, new.parsed, event)
        buf.seek(0)
        schemaless_reader(buf, new.parsed, old.parsed)

    old_to_new()
    new_to_old()


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
