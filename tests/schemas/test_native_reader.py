"""The compiled reader (native/) against the generated Python one: equal values of the same types, on random
events and on damaged bytes (a value only where the Python reader gives the same one), and an exception,
never a crash or a value, on each kind of malformed body."""

from __future__ import annotations

import datetime as dt
import importlib
import random
import shutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineagewire.schemas import Codec, _native, _repository
from lineagewire.schemas.reader import READER_ENV, compile_reader, implementation, keep_tree, python_reader
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


def _outcome(read: Any, data: bytes) -> Any:
    try:
        value, end = read(data, HEADER)
    except Exception:  # noqa: BLE001 - which exception does not matter: the Codec then asks fastavro
        return None
    return _typed(value), end


def test_the_extension_is_built_wherever_cargo_is() -> None:
    """CI has cargo: there the compiled reader must be what runs, not the fallback."""
    if not shutil.which("cargo"):
        pytest.skip("no cargo on PATH")
    importlib.import_module("lineagewire.schemas._avro")
    assert _native.AVAILABLE


def test_compile_reader_gives_the_compiled_reader_unless_told_python(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = _repository.current()[KINDS[0]].schema
    monkeypatch.delenv(READER_ENV, raising=False)
    assert implementation() == "native"
    assert type(compile_reader(schema)).__module__ == "lineagewire.schemas._avro"
    monkeypatch.setenv(READER_ENV, "python")
    assert implementation() == "python"
    assert type(compile_reader(schema)).__name__ == "function"
    assert type(Codec()._schemas[_repository.current()[KINDS[0]].fingerprint][3]).__name__ == "function"


@pytest.mark.parametrize("full_name", KINDS)
def test_random_events_read_to_the_same_values_of_the_same_types(full_name: str) -> None:
    es = _repository.current()[full_name]
    kind = full_name.rsplit(".", 1)[1]
    keep = keep_tree(["header.event_id", "header.schema_name", *FIELDS.get(kind, ["header"])])
    pairs = [(python_reader(es.schema), _native.native_reader(es.schema)),
             (python_reader(es.schema, keep), _native.native_reader(es.schema, keep))]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(events(full_name))
    def check(event: dict) -> None:
        data = CODEC.encode(event)
        for ours, theirs in pairs:
            assert _outcome(ours, data) == _outcome(theirs, data) is not None

    check()


@settings(max_examples=1, deadline=None)
@given(st.data())
def test_damaged_bytes_give_the_python_readers_value_or_none(data: st.DataObject) -> None:
    valid = [CODEC.encode(data.draw(events(name))) for name in KINDS for _ in range(4)]
    pairs = {}
    for es in _repository.current().values():
        kind = es.full_name.rsplit(".", 1)[1]
        keep = keep_tree(["header.event_id", *FIELDS.get(kind, ["header"])])
        pairs[es.fingerprint] = [(python_reader(es.schema), _native.native_reader(es.schema)),
                                 (python_reader(es.schema, keep), _native.native_reader(es.schema, keep))]
    outcomes = {"same value": 0, "both fail": 0, "only the Python reader reads it": 0}
    for blob in _mutations(valid, random.Random(20261124), 4000):
        for python, native in pairs.get(blob[2:HEADER], []):
            theirs, ours = _outcome(python, blob), _outcome(native, blob)
            if ours is None:  # allowed (a varint over 64 bits): the Codec then reads it with fastavro
                outcomes["both fail" if theirs is None else "only the Python reader reads it"] += 1
                continue
            assert ours == theirs, blob.hex()
            outcomes["same value"] += 1
    assert outcomes["same value"] > 300 and outcomes["both fail"] > 1000, outcomes


def _long(n: int) -> bytes:
    """A zig-zag varint."""
    z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    return bytes([*out, z])


def _reader(field_type: Any, keep: Any = None) -> Any:
    schema = {"type": "record", "name": "x.R", "fields": [{"name": "f", "type": field_type},
                                                           {"name": "g", "type": "boolean"}]}
    return _native.native_reader(schema, keep), python_reader(schema, keep)


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
    native, python = _reader(field_type)
    with pytest.raises(ValueError):  # "malformed Avro body at byte n: ...", or a UnicodeDecodeError
        native(body, 0)
    # the Python reader has no limit to a varint, and would make a list of 2^62 None
    if "64 bits" not in case and "eleven" not in case and "nulls" not in case:
        with pytest.raises(Exception):  # noqa: B017, PT011 - the Python reader agrees (any exception)
            python(body, 0)
    # stepped over (only g kept), it is still no value where the step goes past the end or reads an index
    if case in ("a string past the end", "bytes past the end", "the data ends", "a union index past the branches",
                "more items than bytes"):
        with pytest.raises(ValueError):
            _reader(field_type, {"g": None})[0](body, 0)


def test_a_negative_block_size_is_ignored_where_the_items_are_read_and_refused_where_it_is_stepped_over() -> None:
    """As the Python reader and fastavro do: a reader reads the block's items, a skip needs its size."""
    body = _long(-1) + _long(-4) + b"\x02k\x02" + b"\x00\x01"  # map of one item, block size -4; then g
    native, python = _reader({"type": "map", "values": "long"})
    assert _typed(native(body, 0)) == _typed(python(body, 0)) == _typed(({"f": {"k": 1}, "g": True}, len(body)))
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
def test_timestamps_are_the_python_readers_over_the_whole_long_range(micros: int) -> None:
    native, python = _reader(TIMESTAMP)
    body = _long(micros) + b"\x00"
    assert _outcome(native, b"\x00" * HEADER + body) == _outcome(python, b"\x00" * HEADER + body)


def test_timestamps_at_the_ends_of_datetimes_range() -> None:
    native, python = _reader(TIMESTAMP)
    for at in (dt.datetime.min, dt.datetime.max, dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
               dt.datetime(2000, 2, 29, 12), dt.datetime(1600, 3, 1)):
        at = at.replace(tzinfo=dt.UTC)
        body = _long((at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)) + b"\x01"
        assert _typed(native(body, 0)) == _typed(python(body, 0)) == _typed(({"f": at, "g": True}, len(body)))


def test_records_nested_deeper_than_the_limit_are_an_exception_not_a_crash() -> None:
    schema = {"type": "record", "name": "x.Node", "fields": [
        {"name": "name", "type": "string"},
        {"name": "children", "type": {"type": "array", "items": "x.Node"}}]}
    read = _native.native_reader(schema)

    def nested(depth: int) -> bytes:  # each level: name "", one child; the innermost: no child
        return b"\x00\x02" * depth + b"\x00\x00" + b"\x00" * depth

    value, end = read(nested(400), 0)
    assert end == len(nested(400)) and python_reader(schema)(nested(400), 0) == (value, end)
    with pytest.raises(ValueError, match="nested too deep"):
        read(nested(100_000), 0)
    with pytest.raises(ValueError, match="nested too deep"):  # stepped over as well
        _native.native_reader({"type": "record", "name": "x.W", "fields": [
            {"name": "n", "type": schema}, {"name": "b", "type": "boolean"}]}, {"b": None})(nested(100_000), 0)


def test_a_plan_with_a_dangling_reference_is_refused() -> None:
    with pytest.raises(ValueError, match="recursive record"):
        _native._avro.compile(("ref", 3), [], dt.datetime, dt.UTC)
