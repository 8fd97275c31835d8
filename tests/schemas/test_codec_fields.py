"""``Codec.fields_decoder``: only the fields a reader needs, with ``decode``'s framing errors; each test runs
on both decode paths (the conftest's ``decode_path``: the compiled reader, and fastavro alone)."""

from __future__ import annotations

import random

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from lineagewire.schemas import Codec, DecodeError, SchemaError
from lineagewire.schemas.codec import Decoder
from tests.consumers.openlineage.samples import app_run, refresh_run
from tests.helpers import status_event
from tests.schemas.test_codec import _mutations

FIELDS = {"JobStatusChangedEvent": ["header", "new_status"],
          "ActionLineageEvent": ["header.run_id", "header.parent_run.run_id", "action_status", "inputs.name",
                                 "outputs.namespace", "outputs.fields"],
          "JobCreatedEvent": ["header.job_name", "lineage.sources", "lineage.sinks.name", "spec.conf"]}
EVENTS = app_run("j") + refresh_run()


@pytest.fixture
def codec(decode_path: str) -> Codec:
    """A Codec whose bodies of the current schemas are read the way ``decode_path`` says."""
    return Codec()


@pytest.fixture
def prefix(codec: Codec) -> Decoder:
    return codec.fields_decoder(FIELDS)


def _only(value: object, paths: list[str]) -> object:
    """``value`` with only ``paths`` (the expected result, computed from the full decode)."""
    if isinstance(value, list):
        return [_only(v, paths) for v in value]
    if not isinstance(value, dict) or not paths:
        return value
    out = {}
    for path in paths:
        name = path.partition(".")[0]
        inner = [p.partition(".")[2] for p in paths if p.partition(".")[0] == name]
        out[name] = value[name] if "" in inner else _only(value[name], inner)
    return out


def test_each_kind_holds_exactly_its_fields_as_the_full_decode_has_them(codec: Codec, prefix: Decoder,
                                                                       decode_path: str) -> None:
    """The compiled reader builds only those fields; fastavro reads the event up to its last top-level field
    needed (a superset), with those fields as the full decode has them."""
    seen = set()
    for event in EVENTS:
        full = codec.decode(codec.encode(event))
        kind = full["header"]["schema_name"].rsplit(".", 1)[1]
        paths = ["header.event_id", "header.schema_name", *FIELDS.get(kind, ["header"])]
        decoded = prefix(codec.encode(event))
        assert (decoded if decode_path == "native" else _only(decoded, paths)) == _only(full, paths), kind
        if kind == "ActionLineageEvent":  # fields stepped over before its last one needed: built by fastavro only
            assert (decoded == _only(full, paths)) is (decode_path == "native")
        seen.add(kind)
    assert seen == {"JobStatusChangedEvent", "ActionLineageEvent", "JobCreatedEvent", "RefreshCommand"}


def test_not_an_event_still_fails_with_the_reason_of_a_full_decode(codec: Codec, prefix: Decoder) -> None:
    good = codec.encode(status_event())
    unknown = good[:2] + bytes.fromhex("0123456789abcdef") + good[10:]
    for data in (b"", b"{\"json\": 1}", b"\xc3\x02" + b"\x00" * 20, b"\xc3\x01\x00", unknown):
        with pytest.raises(DecodeError) as full:
            codec.decode(data)
        with pytest.raises(DecodeError) as part:
            prefix(data)
        assert part.value.reason == full.value.reason, data
    # Cut anywhere before new_status (a status event has at most 13 bytes after it): a decode error.
    for cut in range(10, len(good) - 13):
        with pytest.raises(DecodeError):
            prefix(good[:cut])


def test_a_damaged_tail_after_the_prefix_is_not_read(codec: Codec, prefix: Decoder) -> None:
    action = next(e for e in EVENTS if e["header"]["schema_name"].endswith("ActionLineageEvent"))
    data = codec.encode(action)
    damaged = data[:-30]  # the column lineage and what follows it, cut
    with pytest.raises(DecodeError):
        codec.decode(damaged)
    assert _only(prefix(damaged)["outputs"], ["namespace", "fields"]) == [
        {"namespace": d["namespace"], "fields": d["fields"]} for d in action["outputs"]]
    with pytest.raises(DecodeError) as err:
        codec.decode(data + b"\x00")
    assert err.value.reason == "trailing-bytes"
    assert prefix(data + b"\x00")["header"]["event_id"] == action["header"]["event_id"]


def test_a_registry_framed_event_is_decoded_whole(decode_path: str) -> None:
    codec = Codec(registry_client=SchemaRegistryClient.new_client({"url": "mock://prefix-test"}))
    event = status_event()
    assert codec.fields_decoder({"JobStatusChangedEvent": ["header"]})(codec.encode(event, topic="t")) == event


def test_unknown_kinds_and_fields_are_named(codec: Codec) -> None:
    with pytest.raises(SchemaError, match="NoSuchEvent"):
        codec.fields_decoder({"NoSuchEvent": ["header"]})
    with pytest.raises(SchemaError, match="JobStatusChangedEvent has no field nope"):
        codec.fields_decoder({"JobStatusChangedEvent": ["nope"]})
    with pytest.raises(SchemaError, match=r"io\.lineagewire\.lineage\.Dataset has no field nme"):
        codec.fields_decoder({"ActionLineageEvent": ["inputs.nme"]})
    with pytest.raises(SchemaError, match="asked of a string"):
        codec.fields_decoder({"ActionLineageEvent": ["sql.text"]})


def test_ten_thousand_bad_byte_strings_give_the_typed_error_or_an_event_with_a_header(codec: Codec,
                                                                                     prefix: Decoder) -> None:
    valid = [codec.encode(e) for e in EVENTS]
    outcomes = {"error": 0, "event": 0}
    for blob in _mutations(valid, random.Random(20261123), 10_000):
        try:
            event = prefix(blob)
        except DecodeError:
            outcomes["error"] += 1
            continue
        assert isinstance(event["header"]["event_id"], str)
        outcomes["event"] += 1
    assert outcomes["error"] > 5000, outcomes
