"""Loads the .avsc files of the contract: the current version and every released one.

Named types are defined once, each in its own file named by its full name
(``io.lineagewire.jobs.JobStatus.avsc``); an event schema refers to them by
name. Here they are inlined (first use defines, later uses refer by name)
into one self-contained schema per event, which is what fastavro parses,
what the fingerprint is computed over and what a schema registry stores.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint, to_parsing_canonical_form

from lineagewire.exceptions import SchemaError

HERE = pathlib.Path(__file__).resolve().parent
CURRENT_DIR = HERE / "avro"
RELEASED_DIR = HERE / "released"

#: Version of the contract this package writes (header.schema_version).
#: 2: EventHeader.root_parent_run; Dataset.dataset_type and view_sql (all optional, default null), ahead of the
#: latest release (released/v1); ScheduleRef.trigger and trigger_run (optional) and the RefreshHeld event;
#: EventHeader.openlineage (optional: the OpenLineage event an ingested event came from, schemas/openlineage.py).
SCHEMA_VERSION = 2

#: The top-level records that travel on Kafka, by short name.
EVENT_SCHEMAS: dict[str, str] = {
    "JobCreatedEvent": "io.lineagewire.jobs.JobCreatedEvent",
    "JobStatusChangedEvent": "io.lineagewire.jobs.JobStatusChangedEvent",
    "ActionLineageEvent": "io.lineagewire.jobs.ActionLineageEvent",
    "RefreshCommand": "io.lineagewire.refresh.RefreshCommand",
    "CancelRefresh": "io.lineagewire.refresh.CancelRefresh",
    "RefreshHeld": "io.lineagewire.refresh.RefreshHeld",
}

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


@dataclass(frozen=True)
class EventSchema:
    """One event schema of one contract version, ready for fastavro."""

    full_name: str
    version: int
    schema: dict[str, Any]  # self-contained JSON schema, docs kept
    parsed: Any  # fastavro parsed schema
    canonical: str
    fingerprint: bytes  # 8-byte CRC-64-AVRO, little-endian as on the wire

    @property
    def kind(self) -> str:
        return self.full_name.rsplit(".", 1)[1]


def _load_named(folder: pathlib.Path) -> dict[str, dict[str, Any]]:
    named: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.avsc")):
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{path}: not valid JSON ({exc}); expected one Avro schema") from exc
        full = f"{doc.get('namespace', '')}.{doc['name']}".lstrip(".")
        if path.stem != full:
            raise SchemaError(f"{path}: defines {full!r}; the file must be named {full}.avsc")
        named[full] = doc
    if not named:
        raise SchemaError(f"no .avsc files in {folder}")
    return named


def _inline(node: Any, named: dict[str, dict[str, Any]], defined: set[str], ns: str) -> Any:
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return node
        full = node if "." in node else f"{ns}.{node}"
        if full in defined:
            return full
        if full not in named:
            raise SchemaError(f"unknown named type {node!r}; expected a file {full}.avsc")
        return _inline(named[full], named, defined, ns)
    if isinstance(node, list):
        return [_inline(n, named, defined, ns) for n in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind in ("record", "enum", "fixed"):
        full = f"{node.get('namespace', ns)}.{node['name']}"
        defined.add(full)
        out = {**node, "name": full}
        out.pop("namespace", None)
        if kind == "record":
            inner_ns = full.rsplit(".", 1)[0]
            out["fields"] = [
                {**fld, "type": _inline(fld["type"], named, defined, inner_ns)} for fld in node["fields"]
            ]
        return out
    if kind == "array":
        return {**node, "items": _inline(node["items"], named, defined, ns)}
    if kind == "map":
        return {**node, "values": _inline(node["values"], named, defined, ns)}
    if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in _PRIMITIVES):
        return {**node, "type": _inline(kind, named, defined, ns)}
    return node


def _build(folder: pathlib.Path, version: int, *, complete: bool = True) -> dict[str, EventSchema]:
    """The event schemas in ``folder``; a released version (``complete=False``) lacks the kinds added after it."""
    named = _load_named(folder)
    out: dict[str, EventSchema] = {}
    for full in EVENT_SCHEMAS.values():
        if full not in named and not complete:
            continue
        if full not in named:
            raise SchemaError(f"{folder}: event schema {full}.avsc is missing")
        schema = _inline(full, named, set(), full.rsplit(".", 1)[0])
        parsed = parse_schema(schema, _write_hint=False)
        canonical = to_parsing_canonical_form(parsed)
        fp = bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
        out[full] = EventSchema(full, version, schema, parse_schema(schema), canonical, fp)
    return out


@cache
def current() -> dict[str, EventSchema]:
    """The event schemas this package writes, by full name."""
    return _build(CURRENT_DIR, SCHEMA_VERSION)


@cache
def released() -> dict[int, dict[str, EventSchema]]:
    """Every released contract version kept in schemas/released/v<N>/, by version."""
    versions: dict[int, dict[str, EventSchema]] = {}
    for folder in sorted(RELEASED_DIR.glob("v*")):
        if folder.is_dir() and folder.name[1:].isdigit():
            versions[int(folder.name[1:])] = _build(folder, int(folder.name[1:]), complete=False)
    return versions


def full_name(kind: str) -> str:
    """Full schema name for a short kind ('JobStatusChangedEvent') or a full name."""
    if kind in EVENT_SCHEMAS:
        return EVENT_SCHEMAS[kind]
    if kind in EVENT_SCHEMAS.values():
        return kind
    raise SchemaError(f"unknown event kind {kind!r}; expected one of {', '.join(EVENT_SCHEMAS)}")
