"""The compiled reader (native/) against fastavro: equal values of the same types, on random events and on
damaged bytes (a value only where fastavro gives the same one), and an exception, never a crash or a value, on
each kind of malformed body."""

from __future__ import annotations

import datetime as dt
import importlib
import io
import random
import shutil
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineagewire.schemas import Codec, _native, _repository
from lineagewire.schemas._native import keep_tree
from tests.schemas.conftest import require_native
from tests.schemas.strategies import events
from tests.schemas.test_codec import _mutations
from tests.schemas.test_codec_fields import FIELDS

KINDS = list(_repository.EVENT_SCHEMAS.values())
CODEC = Codec()
HEADER = 10


@pytest.fixture(autouse=True)
def _native_built() -> None:
    require_native()


def _typed(value: Any) -> Any:
    """``value`` with every type spelled out, so that ``==`` also compares types (True == 1, 1 == 1.0), a
    datetime's tzinfo, and the order of a dict's keys."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, dt.datetime):
        return ("datetime", value, value.tzinfo)
    return (type(value).__name__, value)


def _outcome(read: Any, data: bytes, at: int = HEADER) -> Any:
    try:
        value, end = read(data, at)
    except Exception:  # noqa: BLE001 - which exception does not matter: the Codec then asks fastavro
        return None
    return _typed(value), end


def _kept(value: Any, keep: Any) -> Any:
    """fastavro's whole value cut to the fields of a keep tree, in the value's own order (what a reader of those
    fields builds; no path of FIELDS goes through a map)."""
    if keep is None:
        return value
    if isinstance(value, list):
        return [_kept(v, keep) for v in value]
    if isinstance(value, dict):
        return {k: _kept(v, keep[k]) for k, v in value.items() if k in keep}
    return value


def _fastavro(schema: dict[str, Any]) -> Any:
    """fastavro's reader of ``schema`` with the compiled reader's signature: (data, position) -> (value, end)."""
    parsed = parse_schema(schema)

    def read(data: bytes, at: int) -> tuple[Any, int]:
        buf = io.BytesIO(data)
        buf.seek(at)
        return schemaless_reader(buf, parsed, None), buf.tell()

    return read


def test_the_extension_is_built_wherever_cargo_is() -> None:
    """CI has cargo: there the compiled reader must be what runs, not the fallback."""
    if not shutil.which("cargo"):
        pytest.skip("no cargo on PATH")
    importlib.import_module("lineagewire.schemas._avro")
    assert _native.AVAILABLE


def test_the_codec_decodes_with_the_compiled_reader_where_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    fingerprint = _repository.current()[KINDS[0]].fingerprint
    assert type(Codec()._schemas[fingerprint][3]).__module__ == "lineagewire.schemas._avro"
    monkeypatch.setattr(_native, "AVAILABLE", False)  # as installed without cargo: fastavro reads every body
    assert Codec()._schemas[fingerprint][3] is None


def _paths(full_name: str) -> list[str]:
    return ["header.event_id", "header.schema_name", *FIELDS.get(full_name.rsplit(".", 1)[1], ["header"])]


@pytest.mark.parametrize("full_name", KINDS)
def test_random_events_read_to_the_same_values_of_the_same_types(full_name: str) -> None:
    """The whole event: fastavro's value at fastavro's end; some fields: those of fastavro's value."""
    es = _repository.current()[full_name]
    paths = _paths(full_name)
    whole, some, theirs = (_native.native_reader(es.schema), _native.native_reader(es.schema, keep_tree(paths)),
                           _fastavro(es.schema))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(events(full_name))
    def check(event: dict) -> None:
        data = CODEC.encode(event)
        expected = _outcome(theirs, data)
        assert _outcome(whole, data) == expected is not None
        assert _typed(some(data, HEADER)[0]) == _typed(_kept(theirs(data, HEADER)[0], keep_tree(paths)))

    check()


@settings(max_examples=1, deadline=None)
@given(st.data())
def test_damaged_bytes_give_fastavros_value_or_none(data: st.DataObject) -> None:
    """Where the compiled reader gives a value, fastavro gives the same one (the whole event, of the same types,
    at the same end; or the fields kept, where fastavro reads the damaged body at all)."""
    valid = [CODEC.encode(data.draw(events(name))) for name in KINDS for _ in range(4)]
    readers = {es.fingerprint: (es.full_name, _native.native_reader(es.schema),
                                _native.native_reader(es.schema, keep_tree(_paths(es.full_name))),
                                _fastavro(es.schema)) for es in _repository.current().values()}
    outcomes = {"same value": 0, "both fail": 0, "only fastavro reads it": 0, "same fields": 0}
    for blob in _mutations(valid, random.Random(20261124), 4000):
        if blob[2:HEADER] not in readers:
            continue
        full_name, whole, some, fastavro = readers[blob[2:HEADER]]
        theirs, ours = _outcome(fastavro, blob), _outcome(whole, blob)
        if ours is None:  # allowed (e.g. a varint over 64 bits): the Codec then reads it with fastavro
            outcomes["both fail" if theirs is None else "only fastavro reads it"] += 1
        else:
            assert ours == theirs, blob.hex()
            outcomes["same value"] += 1
        kept = _outcome(some, blob)
        if kept is not None and theirs is not None:  # a damage in what is stepped over is not seen: no fastavro
            assert kept[0] == _typed(_kept(fastavro(blob, HEADER)[0], keep_tree(_paths(full_name)))), blob.hex()
            outcomes["same fields"] += 1
    assert outcomes["same value"] > 300 and outcomes["both fail"] > 1000 and outcomes["same fields"] > 300, outcomes


def _long(n: int) -> bytes:
    """A zig-zag varint."""
    z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    return bytes([*out, z])


def _reader(field_type: Any, keep: Any = None) -> Any:
    """The compiled reader of a record of ``field_type`` then a boolean, and fastavro's (whole records only)."""
    schema = {"type": "record", "name": "x.R", "fields": [{"name": "f", "type": field_type},
                                                           {"name": "g", "type": "boolean"}]}
    return _native.native_reader(schema, keep), _fastavro(schema)


TIMESTAMP = {"type": "long", "logicalType": "timestamp-micros"}
MALFORMED = {  # (field type, body of field f, then g) -> what is wrong
    "a varint of more than 64 bits": ("long", b"\xff" * 9 + b"\x7f\x01"),
    "a varint of eleven bytes": ("long", b"\x80" * 10 + b"\x00\x01"),
    "a negative string length": ("string", _long(-1) + b"a\x01"),
    "a string past the end": ("string", _long(5) + b"ab"),
    "invalid UTF-8": ("string", _long(2) + b"\xc3\x28\x01"),
    "a UTF-16 surrogate in UTF-8": ("string", _long(3) + b"\xed\xa0\x80\x01"),
    "bytes past the end": ("bytes", _long(3) + b"a"),
    "an enum index past the symbols": ({"type": "enum", "name": "x.E", "symbols": ["A", "B"]}, _long(2) + b"\x01"),
    "a negative enum index": ({"type": "enum", "name": "x.E", "symbols": ["A", "B"]}, _long(-1) + b"\x01"),
    "a union index past the branches": (["null", "string"], _long(2) + b"\x01"),
    "a negative union index": (["null", "string"], _long(-1) + b"\x01"),
    "a timestamp after the year 9999": (TIMESTAMP, _long(253402300800 * 10**6) + b"\x01"),
    "a timestamp before the year 1": (TIMESTAMP, _long(-62135596800 * 10**6 - 1) + b"\x01"),
    "the smallest long as a timestamp": (TIMESTAMP, _long(-2**63) + b"\x01"),
    "more items than bytes": ({"type": "array", "items": "long"}, _long(10**12) + b"\x02\x01"),
    "the smallest long as a count": ({"type": "array", "items": "long"}, _long(-2**63) + _long(1) + b"\x02\x01"),
    "2^62 nulls": ({"type": "array", "items": "null"}, _long(2**62) + b"\x00\x01"),
    "a map key past the end": ({"type": "map", "values": "long"}, _long(1) + _long(9) + b"k"),
    "the data ends": ("long", b""),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_each_kind_of_malformed_body_is_an_exception(case: str) -> None:
    field_type, body = MALFORMED[case]
    native, _ = _reader(field_type)
    with pytest.raises(ValueError):  # "malformed Avro body at byte n: ...", or a UnicodeDecodeError
        native(body, 0)
    # (fastavro reads some of these, e.g. a negative enum index as the last symbol: the Codec then reports
    # fastavro's value, as it reports fastavro's error for the others)
    # stepped over (only g kept), it is still no value where the step goes past the end or reads an index
    if case in ("a string past the end", "bytes past the end", "the data ends", "a union index past the branches",
                "more items than bytes"):
        with pytest.raises(ValueError):
            _reader(field_type, {"g": None})[0](body, 0)


def test_a_negative_block_size_is_ignored_where_the_items_are_read_and_refused_where_it_is_stepped_over() -> None:
    """As fastavro does: a reader reads the block's items, a skip needs its size."""
    body = _long(-1) + _long(-4) + b"\x02k\x02" + b"\x00\x01"  # map of one item, block size -4; then g
    native, fastavro = _reader({"type": "map", "values": "long"})
    assert _typed(native(body, 0)) == _typed(fastavro(body, 0)) == _typed(({"f": {"k": 1}, "g": True}, len(body)))
    with pytest.raises(ValueError, match="a negative block size"):
        _reader({"type": "map", "values": "long"}, {"g": None})[0](body, 0)


def test_a_value_stepped_over_past_the_end_is_no_value() -> None:
    """The end is checked once, after the last value: a string stepped over may pass it."""
    inner = {"type": "record", "name": "x.In", "fields": [{"name": "x", "type": "long"},
                                                          {"name": "s", "type": "string"}]}
    read = _native.native_reader({"type": "record", "name": "x.S", "fields": [{"name": "r", "type": inner}]},
                                 {"r": {"x": None}})
    assert read(b"\x02\x02y", 0) == ({"r": {"x": 1}}, 3)
    with pytest.raises(ValueError, match="the data ends inside a value stepped over"):
        read(b"\x02\x02", 0)


@given(st.integers(min_value=-2**63, max_value=2**63 - 1))
def test_timestamps_are_fastavros_over_the_whole_long_range(micros: int) -> None:
    native, fastavro = _reader(TIMESTAMP)
    body = _long(micros) + b"\x00"
    assert _outcome(native, body, 0) == _outcome(fastavro, body, 0)


def test_timestamps_at_the_ends_of_datetimes_range() -> None:
    native, fastavro = _reader(TIMESTAMP)
    for at in (dt.datetime.min, dt.datetime.max, dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
               dt.datetime(2000, 2, 29, 12), dt.datetime(1600, 3, 1)):
        at = at.replace(tzinfo=dt.UTC)
        body = _long((at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)) + b"\x01"
        assert _typed(native(body, 0)) == _typed(fastavro(body, 0)) == _typed(({"f": at, "g": True}, len(body)))


def test_records_nested_deeper_than_the_limit_are_an_exception_not_a_crash() -> None:
    schema = {"type": "record", "name": "x.Node", "fields": [
        {"name": "name", "type": "string"},
        {"name": "children", "type": {"type": "array", "items": "x.Node"}}]}
    read = _native.native_reader(schema)

    def nested(depth: int) -> bytes:  # each level: name "", one child; the innermost: no child
        return b"\x00\x02" * depth + b"\x00\x00" + b"\x00" * depth

    value, end = read(nested(400), 0)
    assert end == len(nested(400)) and _fastavro(schema)(nested(400), 0) == (value, end)
    with pytest.raises(ValueError, match="nested too deep"):
        read(nested(100_000), 0)
    with pytest.raises(ValueError, match="nested too deep"):  # stepped over as well
        _native.native_reader({"type": "record", "name": "x.W", "fields": [
            {"name": "n", "type": schema}, {"name": "b", "type": "boolean"}]}, {"b": None})(nested(100_000), 0)


def test_a_plan_with_a_dangling_reference_is_refused() -> None:
    with pytest.raises(ValueError, match="recursive record"):
        _native._avro.compile(("ref", 3), [], dt.datetime, dt.UTC)
