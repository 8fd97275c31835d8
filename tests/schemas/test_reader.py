"""The compiled reader (native/, ``_native.native_reader``) against fastavro: the same values from the same
bytes, and no value where fastavro has none; and a cut body is no value on either decode path."""

from __future__ import annotations

import io
import random
from collections.abc import Callable

import pytest
from fastavro import parse_schema, schemaless_reader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineagewire.schemas import Codec, DecodeError, _repository
from lineagewire.schemas._native import Reader, keep_tree, native_reader
from tests.schemas.strategies import events
from tests.schemas.test_codec import _mutations

KINDS = list(_repository.EVENT_SCHEMAS.values())
#: ``make_reader(schema, keep=None)``: the conftest's fixture, the compiled reader
MakeReader = Callable[..., Reader]
CODEC = Codec()
HEADER = 10  # single-object framing: magic and fingerprint before the body


def _fastavro(data: bytes, parsed: object) -> tuple[object, int]:
    buf = io.BytesIO(data)
    buf.seek(HEADER)
    return schemaless_reader(buf, parsed, None), buf.tell()


@pytest.mark.parametrize("full_name", KINDS)
def test_random_events_of_every_kind_read_as_fastavro_reads_them(full_name: str, make_reader: MakeReader) -> None:
    es = _repository.current()[full_name]
    read = make_reader(es.schema)

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(events(full_name))
    def check(event: dict) -> None:
        data = CODEC.encode(event)
        value, end = read(data, HEADER)
        assert (value, end) == _fastavro(data, es.parsed)
        assert end == len(data)

    check()


@pytest.mark.parametrize("full_name", KINDS)
def test_a_reader_of_some_fields_steps_over_the_others_on_random_events(full_name: str,
                                                                      make_reader: MakeReader) -> None:
    """Every other top-level field kept (the ones between are stepped over: maps, unions, arrays, records)."""
    es = _repository.current()[full_name]
    names = [f["name"] for f in es.schema["fields"]]
    keep = names[::2]
    read = make_reader(es.schema, keep_tree([*keep, "header.event_id"]))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(events(full_name))
    def check(event: dict) -> None:
        data = CODEC.encode(event)
        full, _ = _fastavro(data, es.parsed)
        value, end = read(data, HEADER)
        last = names.index(keep[-1])
        assert value == {k: full[k] for k in names[:last + 1] if k in keep}
        # the fields after the last kept are not read (each takes at least a byte in these schemas)
        assert end == len(data) if last == len(names) - 1 else end < len(data)

    check()


@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_damaged_bytes_give_fastavros_value_or_no_value(make_reader: MakeReader, data: st.DataObject) -> None:
    """Flipped bits, cuts and overwritten bytes: where the compiled reader returns a value, fastavro returns the
    same one at the same position; where it fails, the Codec reports fastavro's error or fastavro's value."""
    valid = [CODEC.encode(data.draw(events(name))) for name in KINDS for _ in range(4)]
    readers = {es.fingerprint: (make_reader(es.schema), es.parsed) for es in _repository.current().values()}
    outcomes = {"same value": 0, "both fail": 0, "only fastavro reads it": 0}
    for blob in _mutations(valid, random.Random(20261124), 6000):
        if len(blob) < HEADER or blob[:2] != b"\xc3\x01" or blob[2:HEADER] not in readers:
            continue
        read, parsed = readers[blob[2:HEADER]]
        try:
            ours = read(blob, HEADER)
        except Exception:  # noqa: BLE001 - any failure means "not a value"; the Codec then asks fastavro
            ours = None
        try:
            theirs = _fastavro(blob, parsed)
        except Exception:  # noqa: BLE001
            theirs = None
        if ours is None:
            outcomes["both fail" if theirs is None else "only fastavro reads it"] += 1
            if theirs is not None:  # the Codec falls back to fastavro: its value, not an error
                decoded = CODEC.decode(blob) if theirs[1] == len(blob) else None
                if decoded is not None:
                    assert decoded == {**theirs[0], "header": {**theirs[0]["header"],
                                                               "schema_name": decoded["header"]["schema_name"]}}
            continue
        assert ours == theirs, blob.hex()
        outcomes["same value"] += 1
    assert outcomes["same value"] > 100 and outcomes["both fail"] > 1000, outcomes


def test_a_cut_body_is_not_a_value_even_where_the_cut_falls_inside_a_string(decode_path: str) -> None:
    codec = Codec()  # decoding the way decode_path says
    data = codec.encode(next(iter(_samples())))
    read = native_reader(_repository.current()[KINDS[0]].schema) if decode_path == "native" else None
    assert read is None or read(data, HEADER)[1] == len(data)
    for cut in range(HEADER, len(data)):
        if read is not None:
            with pytest.raises(ValueError):  # the reader's own; the Codec words it with fastavro
                read(data[:cut], HEADER)
        with pytest.raises(DecodeError):
            codec.decode(data[:cut])


def test_a_schema_with_a_type_it_does_not_read_is_left_to_fastavro(make_reader: MakeReader) -> None:
    schema = {"type": "record", "name": "x.Y", "fields": [{"name": "d", "type": "double"}]}
    with pytest.raises(NotImplementedError, match="double"):
        make_reader(schema)
    parse_schema(schema)  # a valid schema all the same


def test_recursive_records_nest_as_deep_as_the_data(make_reader: MakeReader) -> None:
    schema = {"type": "record", "name": "x.Node", "fields": [
        {"name": "name", "type": "string"},
        {"name": "children", "type": {"type": "array", "items": "x.Node"}}]}
    from fastavro import schemaless_writer

    node = {"name": "leaf", "children": []}
    for i in range(30):
        node = {"name": f"n{i}", "children": [node, {"name": "x", "children": []}]}
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), node)
    assert make_reader(schema)(buf.getvalue(), 0) == (node, len(buf.getvalue()))


def _samples() -> list[dict]:
    from tests.consumers.openlineage.samples import app_run

    return [e for e in app_run("j") if e["header"]["schema_name"] == KINDS[0]]
