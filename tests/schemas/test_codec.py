"""The codec: round trips of every event kind, both framings, and typed errors for bad bytes."""

from __future__ import annotations

import io
import random
import struct

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from fastavro import schemaless_writer
from fastavro.validation import validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineagewire.schemas import EVENT_SCHEMAS, Codec, DecodeError, SchemaError, _repository
from tests.helpers import status_event
from tests.schemas.strategies import events

CODEC = Codec()
KINDS = sorted(EVENT_SCHEMAS.values())


@pytest.mark.parametrize("full_name", KINDS)
def test_every_event_kind_round_trips(full_name: str) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(events(full_name))
    def check(event: dict) -> None:
        data = CODEC.encode(event)
        assert data[:2] == b"\xc3\x01"
        assert data[2:10] == _repository.current()[full_name].fingerprint
        assert CODEC.decode(data) == event

    check()


def test_confluent_wire_format_round_trip_with_registry() -> None:
    registry = SchemaRegistryClient.new_client({"url": "mock://codec-test"})
    codec = Codec(registry_client=registry)
    event = status_event()
    data = codec.encode(event, topic="lineage.jobs")
    assert data[0] == 0
    (schema_id,) = struct.unpack(">I", data[1:5])
    subject_schema = registry.get_latest_version("lineage.jobs-io.lineagewire.jobs.JobStatusChangedEvent")
    assert subject_schema.schema_id == schema_id
    assert codec.decode(data) == event
    # A single-object message still decodes with a registry-configured codec, and vice versa needs the registry.
    assert codec.decode(CODEC.encode(event)) == event
    with pytest.raises(DecodeError) as err:
        CODEC.decode(data)
    assert err.value.reason == "unknown-schema-id" and str(schema_id) in str(err.value)


def test_unknown_fingerprint_is_named() -> None:
    data = bytearray(CODEC.encode(status_event()))
    data[2:10] = bytes.fromhex("0123456789abcdef")
    with pytest.raises(DecodeError) as err:
        CODEC.decode(bytes(data))
    assert err.value.reason == "unknown-fingerprint" and "0123456789abcdef" in str(err.value)


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"", "empty"), (b"\x7b\"json\": 1}", "bad-magic"), (b"\xc3\x02" + b"\x00" * 20, "bad-magic"),
     (b"\xc3\x01\x00", "truncated"), (b"\x00\x00\x00", "truncated")],
)
def test_framing_errors(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as err:
        CODEC.decode(data)
    assert err.value.reason == reason


def test_truncated_and_trailing_bodies() -> None:
    data = CODEC.encode(status_event())
    for cut in range(10, len(data)):
        with pytest.raises(DecodeError):
            CODEC.decode(data[:cut])
    with pytest.raises(DecodeError) as err:
        CODEC.decode(data + b"\x00")
    assert err.value.reason == "trailing-bytes"


def test_encode_rejects_events_that_do_not_match() -> None:
    with pytest.raises(SchemaError, match="schema_name"):
        CODEC.encode({"no": "header"})
    event = status_event()
    event["new_status"] = "EXPLODED"
    with pytest.raises(SchemaError, match="JobStatusChangedEvent"):
        CODEC.encode(event)


def _mutations(valid: list[bytes], rng: random.Random, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        base = rng.choice(valid)
        mode = i % 4
        if mode == 0:
            out.append(bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64))))
        elif mode == 1:
            out.append(base[: rng.randrange(0, len(base))])
        elif mode == 2:
            b = bytearray(base)
            for _ in range(rng.randrange(1, 4)):
                pos = rng.randrange(len(b))
                b[pos] ^= 1 << rng.randrange(8)
            out.append(bytes(b))
        else:
            b = bytearray(base)
            pos = rng.randrange(10, len(b))
            b[pos:pos + 4] = bytes(rng.getrandbits(8) for _ in range(4))
            out.append(bytes(b))
    return out


@settings(max_examples=1, deadline=None)
@given(st.data())
def test_ten_thousand_bad_byte_strings_give_the_typed_error_or_a_valid_event(data: st.DataObject) -> None:
    valid = [CODEC.encode(data.draw(events(name))) for name in KINDS for _ in range(4)]
    rng = random.Random(20261122)
    outcomes = {"error": 0, "event": 0}
    for blob in _mutations(valid, rng, 10_000):
        try:
            event = CODEC.decode(blob)
        except DecodeError:
            outcomes["error"] += 1
            continue
        # Anything that decodes must be a valid event of the schema its header names.
        schema = _repository.current()[event["header"]["schema_name"]].parsed
        assert validate(event, schema, raise_errors=False)
        buf = io.BytesIO()
        schemaless_writer(buf, schema, event)
        outcomes["event"] += 1
    assert outcomes["error"] > 5000, outcomes
