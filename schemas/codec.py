"""Bytes on Kafka <-> event dicts.

Body: fastavro schemaless encoding of the event record. Framing:

* Avro single-object encoding (the default; no registry needed):
  ``C3 01`` + the schema's 8-byte CRC-64-AVRO fingerprint (little-endian) + body.
* Confluent wire format, when a schema registry is configured:
  ``00`` + 4-byte big-endian schema id + body. Subjects follow the
  TopicRecordNameStrategy (``<topic>-<record full name>``) because one topic
  carries several event kinds.

``decode`` detects the framing from the first byte, reads with the writer's
schema (any released version) into the current reader schema, and raises
``DecodeError`` and nothing else for bytes that are not a lineagewire event.
A body written with the current schema is read by the compiled reader
(``_native.py``, the Rust extension built from native/ where cargo was on
PATH at install; the same values as fastavro, faster); one that needs schema
resolution, any body that reader rejects, and every body where the extension
is not built, is read by fastavro, whose error is the one reported.

``fields_decoder`` makes a decode of only the fields a reader needs: the
others are stepped over without being built, and since Avro binary is read in
field order with no index, the top-level fields after the last one needed are
not read at all. The framing is checked as by ``decode``; a damaged tail, or
bytes that are stepped over, are not.
"""

from __future__ import annotations

import functools
import io
import json
import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.schema import to_parsing_canonical_form

from lineagewire.exceptions import DecodeError, SchemaError

from . import _native, _repository
from ._native import Reader, check_fields, keep_tree, native_reader
from ._repository import EventSchema

__all__ = ["CONFLUENT_MAGIC", "SINGLE_OBJECT_MAGIC", "Codec", "Decoder"]

#: bytes -> event dict, raising ``DecodeError`` (``Codec.decode`` or a ``Codec.fields_decoder``)
Decoder = Callable[[bytes | None], dict[str, Any]]

#: what decoding a body needs: the event's full name, fastavro's writer and reader schemas (reader None when
#: they are the same) and the compiled reader (None where fastavro reads: resolution, a type it lacks, or no
#: extension built)
_Schemas = tuple[str, Any, Any, Reader | None]

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"
_SO_HEADER = 10
_CF_HEADER = 5


class Codec:
    """Encodes and decodes lineagewire events.

    ``Codec()`` uses single-object encoding. ``Codec(schema_registry_url=...)``
    (or a ready ``registry_client``, e.g. confluent-kafka's mock client) writes
    the Confluent wire format; decoding accepts both framings either way.
    """

    def __init__(
        self,
        *,
        schema_registry_url: str | None = None,
        registry_config: dict[str, Any] | None = None,
        registry_client: Any = None,
    ) -> None:
        self._current = _repository.current()
        # Writer schemas by fingerprint: the current ones and every released version.
        # The reader schema is None when writer == reader, which lets fastavro skip resolution.
        self._by_fingerprint: dict[bytes, tuple[EventSchema, Any]] = {}
        self._schemas: dict[bytes, _Schemas] = {}
        for versions in (*_repository.released().values(), self._current):
            for name, es in versions.items():
                reader = None if es.canonical == self._current[name].canonical else self._current[name].parsed
                self._by_fingerprint[es.fingerprint] = (es, reader)
                self._schemas[es.fingerprint] = (es.full_name, es.parsed, reader,
                                                 _compiled(es.schema) if reader is None else None)
        self._writers = {name: (SINGLE_OBJECT_MAGIC + es.fingerprint, es.parsed) for name, es in self._current.items()}
        self._registry = registry_client
        if self._registry is None and schema_registry_url:
            self._registry = _registry_client(schema_registry_url, registry_config or {})
        self._registered: dict[tuple[str | None, str], bytes] = {}
        self._by_schema_id: dict[int, _Schemas] = {}
        self._lock = threading.Lock()

    def encode(self, event: dict[str, Any], *, topic: str | None = None) -> bytes:
        """Encode an event; its schema comes from ``event['header']['schema_name']``."""
        try:
            name = event["header"]["schema_name"]
        except (KeyError, TypeError) as exc:
            raise SchemaError(f"cannot encode {type(event).__name__}: expected an event dict with "
                              "header.schema_name") from exc
        if self._registry is None:
            try:
                prefix, parsed = self._writers[name]
            except KeyError:
                raise SchemaError(f"header.schema_name={name!r} is not an event schema; expected one "
                                  f"of {', '.join(self._writers)}") from None
        else:
            prefix, parsed = self._registry_prefix(topic, name), self._current[name].parsed
        buf = io.BytesIO()
        buf.write(prefix)
        try:
            schemaless_writer(buf, parsed, event)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise SchemaError(f"{name}: event does not match its schema: {exc}") from exc
        return buf.getvalue()

    def decode(self, data: bytes | None) -> dict[str, Any]:
        """Decode bytes framed either way into an event dict of the current schema version."""
        return self._decode(data, None)

    def fields_decoder(self, fields: Mapping[str, Iterable[str]]) -> Decoder:
        """A ``decode`` that reads only some fields of each event.

        ``fields`` maps an event kind (short or full name) to the fields its reader needs, as dotted paths
        through records, arrays, maps and unions (``"header"``, ``"inputs.name"``); kinds not in it: the
        header. The event dict holds those fields and the header's ``event_id`` and ``schema_name``, which
        name the event in every service's logs and dedup. Where the compiled reader does not serve (not built,
        schema resolution, a registry-framed event, bytes it rejects) fastavro reads the event up to its last
        top-level field needed, or whole: a superset. Errors are ``decode``'s, except that what is not read
        is not checked (see the module docstring).
        """
        for kind in fields:
            _repository.full_name(kind)  # an unknown kind is a mistake, not "nothing to cut"
        trees: dict[str, dict[str, Any]] = {}
        fast: dict[str, Reader | None] = {}  # by kind, for the bodies written with the current schema
        for name, es in self._current.items():
            paths = fields.get(name) or fields.get(es.kind) or ["header"]
            trees[name] = keep_tree(["header.event_id", "header.schema_name", *paths])
            try:
                check_fields(es.schema, trees[name])
                fast[name] = native_reader(es.schema, trees[name]) if _native.AVAILABLE else None
            except ValueError as exc:  # a field the event does not have is a mistake too
                raise SchemaError(f"{name}: {exc}; expected dotted paths of its fields") from None
            except NotImplementedError:
                fast[name] = None
        cut: dict[bytes, _Schemas] = {}
        for fp, (es, reader) in self._by_fingerprint.items():
            current = self._current[es.full_name]
            names = [f["name"] for f in current.schema["fields"]]
            last = max(trees[es.full_name], key=names.index)  # top-level fields after it are not read
            reader_schema = _prefix(current.schema, last)
            keep = {f["name"] for f in reader_schema["fields"]}
            writer_fields = [f["name"] for f in es.schema["fields"]]
            upto = max(i for i, name in enumerate(writer_fields) if name in keep)
            writer_schema = {**es.schema, "fields": es.schema["fields"][:upto + 1]}
            cut[fp] = (es.full_name, parse_schema(writer_schema),
                       None if reader is None else parse_schema(reader_schema),
                       fast[es.full_name] if reader is None else None)

        def decode_fields(data: bytes | None) -> dict[str, Any]:
            return self._decode(data, cut)

        return decode_fields

    def _decode(self, data: bytes | None, cut: dict[bytes, _Schemas] | None) -> dict[str, Any]:
        if not data:
            raise DecodeError("empty", "empty message; expected a lineagewire Avro event")
        first = data[0]
        if first == 0xC3:
            if len(data) < _SO_HEADER:
                raise DecodeError("truncated", f"{len(data)} bytes; a single-object header needs {_SO_HEADER}")
            if data[1] != 0x01:
                raise DecodeError("bad-magic", f"bytes {data[:2].hex()} : expected c301 (Avro single-object) "
                                  "or 00 (Confluent wire format)")
            fp = data[2:_SO_HEADER]
            entry = (self._schemas if cut is None else cut).get(fp)
            if entry is None:
                raise DecodeError("unknown-fingerprint", f"unknown schema fingerprint {fp.hex()}; expected one "
                                  "of the lineagewire event schemas (current or released); was it written by a "
                                  "newer lineagewire, or is it not a lineagewire event?")
            name, writer, reader, fast = entry
            offset = _SO_HEADER
        elif first == 0x00:
            if len(data) < _CF_HEADER:
                raise DecodeError("truncated", f"{len(data)} bytes; a Confluent header needs {_CF_HEADER}")
            (schema_id,) = struct.unpack(">I", data[1:_CF_HEADER])
            name, writer, reader, fast = self._schema_by_id(schema_id)
            offset = _CF_HEADER
            cut = None  # decoded whole
        else:
            raise DecodeError("bad-magic", f"first byte 0x{first:02x}: expected 0xc3 (Avro single-object) "
                              "or 0x00 (Confluent wire format)")
        if fast is not None:
            try:
                record, end = fast(data, offset)
            except Exception:  # noqa: BLE001, S110 - not a valid body: fastavro reads it again and words why
                pass
            else:
                if cut is None and end != len(data):
                    raise DecodeError("trailing-bytes", f"{name}: {len(data) - end} bytes after the record; "
                                      "expected the message to end with it")
                record["header"]["schema_name"] = name
                return record
        buf = io.BytesIO(data)
        buf.seek(offset)
        try:
            record = schemaless_reader(buf, writer, reader)
        except EOFError as exc:
            raise DecodeError("truncated", f"{name}: body ends early after {len(data)} bytes ({exc})") from exc
        except Exception as exc:  # noqa: BLE001 - any fastavro failure on foreign bytes is a decode error
            raise DecodeError("bad-body", f"{name}: body is not a valid record: {type(exc).__name__}: {exc}") from exc
        if cut is None and buf.tell() != len(data):
            raise DecodeError("trailing-bytes", f"{name}: {len(data) - buf.tell()} bytes after the record; "
                              "expected the message to end with it")
        if not isinstance(record, dict) or not isinstance(record.get("header"), dict):
            raise DecodeError("bad-body", f"{name}: decoded value has no header")
        record["header"]["schema_name"] = name
        return record

    # -- schema registry (Confluent wire format) ---------------------------------------------

    def _registry_prefix(self, topic: str | None, name: str) -> bytes:
        key = (topic, name)
        prefix = self._registered.get(key)
        if prefix is None:
            from confluent_kafka.schema_registry import Schema

            subject = f"{topic}-{name}" if topic else name
            schema_str = json.dumps(self._current[name].schema)
            try:
                schema_id = self._registry.register_schema(subject, Schema(schema_str, "AVRO"))
            except Exception as exc:
                raise SchemaError(f"could not register {name} under subject {subject!r}: {exc}") from exc
            prefix = CONFLUENT_MAGIC + struct.pack(">I", schema_id)
            with self._lock:
                self._registered[key] = prefix
        return prefix

    def _schema_by_id(self, schema_id: int) -> _Schemas:
        hit = self._by_schema_id.get(schema_id)
        if hit is not None:
            return hit
        if self._registry is None:
            raise DecodeError("unknown-schema-id", f"Confluent schema id {schema_id}, but no schema registry is "
                              "configured; set kafka.schema_registry_url (LINEAGEWIRE_KAFKA__SCHEMA_REGISTRY_URL)")
        try:
            schema_str = self._registry.get_schema(schema_id).schema_str
        except Exception as exc:  # noqa: BLE001 - the client raises several kinds for a missing id
            raise DecodeError("unknown-schema-id", f"schema id {schema_id} not found in the registry: {exc}") from exc
        try:
            schema = json.loads(schema_str)
            writer = parse_schema(schema)
            name = schema["name"] if "." in schema["name"] else f"{schema.get('namespace', '')}.{schema['name']}"
        except Exception as exc:  # noqa: BLE001
            raise DecodeError("unknown-schema-id", f"schema id {schema_id} is not a usable Avro schema: {exc}") from exc
        if name not in self._current:
            raise DecodeError("unknown-schema-id", f"schema id {schema_id} is {name!r}; expected a lineagewire event "
                              "schema")
        current = self._current[name]
        same = to_parsing_canonical_form(schema) == current.canonical
        hit = (name, writer, None, _compiled(current.schema)) if same else (name, writer, current.parsed, None)
        with self._lock:
            self._by_schema_id[schema_id] = hit
        return hit


@functools.lru_cache(maxsize=64)
def _compiled_for(schema_json: str) -> Reader | None:
    try:
        return native_reader(json.loads(schema_json))
    except NotImplementedError:  # a type the compiled reader does not read: fastavro reads these bodies
        return None


def _compiled(schema: dict[str, Any]) -> Reader | None:
    """The compiled reader of ``schema``, made once per process for each schema; None where the extension is
    not built (``_native.AVAILABLE``, read now) or does not read the schema: fastavro reads its bodies."""
    return _compiled_for(json.dumps(schema, sort_keys=True)) if _native.AVAILABLE else None


def _prefix(schema: dict[str, Any], last: str) -> dict[str, Any]:
    """The event record ``schema`` cut after its top-level field ``last``."""
    names = [f["name"] for f in schema["fields"]]
    if last not in names:
        raise SchemaError(f"{schema['name']} has no top-level field {last!r}; expected one of {', '.join(names)}")
    return {**schema, "fields": schema["fields"][:names.index(last) + 1]}


def _registry_client(url: str, config: dict[str, Any]) -> Any:
    from lineagewire.exceptions import require

    sr = require("confluent_kafka.schema_registry", "registry", "The Confluent wire format (schema registry)")
    return sr.SchemaRegistryClient({"url": url, **config})
