"""Proposals as the sinks take them: acryl-datahub's ``MetadataChangeProposalClass`` with the aspect serialised.

Every aspect is serialised by acryl-datahub's public API, as ``MetadataChangeProposalWrapper.make_mcp()``
does it (``json.dumps(pre_json_transform(aspect.to_obj()))``, which validates the aspect against its
Avro schema). What costs is that serialisation (15 to 300 µs an aspect), so the translator does it once
per distinct content: ``Aspect`` is an aspect's serialised form, kept in the translator's ``Memo`` by the
content it was built from, and ``proposal`` wraps it per event with that event's systemMetadata.

Three aspects differ from one event to the next only by a time or a run's ids: a run event
(``timestampMillis``), an output's ``upstreamLineage`` (each upstream's ``auditStamp.time``) and an action
run's properties (``name``, ``created.time``, ``customProperties.runId``/``actionId``). For those the
translator keeps the JSON of the aspect built once per content (``to_json``) and sets those named fields of
it per event (``from_json``): a field of the aspect's public JSON form, set to a value of the type its schema
gives (an epoch-millisecond int, a string). ``tests/consumers/datahub/test_translate.py`` compares each with
acryl-datahub's serialisation of the aspect built in full.

The sinks then need no second walk of the aspect: the REST and Kafka emitters send the proposals as they
are, the file sink puts the JSON text under ``aspect.json`` (``line``), and ``unchanged.Unchanged``
compares the texts.
"""

from __future__ import annotations

import functools
import json
import marshal
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from datahub.emitter.serialization_helper import pre_json_transform
from datahub.metadata.schema_classes import (
    ChangeTypeClass,
    GenericAspectClass,
    MetadataChangeProposalClass,
    SystemMetadataClass,
)
from datahub.utilities.urns.urn import guess_entity_type

__all__ = ["JSON", "Aspect", "Memo", "Proposal", "aspect_text", "content_key", "from_json", "line", "proposal",
           "record", "serialise", "system_json", "to_json"]

JSON = "application/json"
#: content types whose value is JSON text (an aspect, or a JSON Patch): the file sink writes them under ``json``
_JSON_TYPES = frozenset({JSON, "application/json-patch+json"})
_entity_type = functools.lru_cache(maxsize=4096)(guess_entity_type)


class Proposal(MetadataChangeProposalClass):
    """acryl-datahub's proposal class, whose ``to_obj()`` puts the proposal's JSON together from its fields
    rather than walking it against the proposal's Avro schema again.

    acryl-datahub's emitters send each proposal as ``pre_json_transform(mcp.to_obj())``: a validating walk of
    the envelope and its systemMetadata, about 80 µs a proposal, the REST sink's largest cost. The aspect in
    it was validated when it was serialised (``serialise``), the other fields are the translator's (URN,
    names) or systemMetadata's plain values, so their JSON is put together directly. A proposal with any
    other field set, or whose systemMetadata holds a value that is not plain, takes the class's own
    ``to_obj``. ``tests/consumers/datahub/test_translate.py`` compares both for every proposal.
    """

    def to_obj(self, tuples: bool = False) -> dict[str, Any]:
        a = self.aspect
        if tuples or a is None or self.entityKeyAspect is not None or self.auditHeader is not None or self.headers:
            return super().to_obj(tuples)
        obj: dict[str, Any] = {"entityType": self.entityType, "entityUrn": self.entityUrn,
                               "changeType": self.changeType, "aspectName": self.aspectName,
                               "aspect": {"value": _text(a.value), "contentType": a.contentType}}
        if self.systemMetadata is not None:
            system = _plain(self.systemMetadata)
            if system is None:
                return super().to_obj(tuples)
            obj["systemMetadata"] = system
        return obj


def _text(value: bytes | str) -> str:
    # The JSON is ASCII (json.dumps escapes the rest), so this is the text avrogen makes of the bytes.
    return value.decode() if isinstance(value, bytes) else value


def _plain(system: SystemMetadataClass) -> dict[str, Any] | None:
    """A systemMetadata's JSON when all its values are plain (ints, strings, a map of strings), else None."""
    obj = {}
    for k, v in system.items():
        if v is None:
            continue
        if type(v) is dict:
            if not all(type(x) is str for x in v.values()):
                return None
            v = dict(v)
        elif type(v) is not int and type(v) is not str:
            return None
        obj[k] = v
    return obj


@dataclass(frozen=True, slots=True)
class Aspect:
    """An aspect's name and its serialised form (acryl-datahub's ``GenericAspectClass``), built once."""

    name: str
    generic: GenericAspectClass


def to_json(aspect: Any) -> dict[str, Any]:
    """An aspect object's JSON as acryl-datahub's ``make_mcp`` serialises it (validates it against its schema)."""
    obj: dict[str, Any] = pre_json_transform(aspect.to_obj())
    return obj


def from_json(name: str, obj: dict[str, Any]) -> Aspect:
    """The aspect ``name`` serialised from its JSON (``to_json``'s, or one with a field's value set)."""
    return Aspect(name, GenericAspectClass(value=json.dumps(obj).encode(), contentType=JSON))


def serialise(aspect: Any) -> Aspect:
    """``aspect`` serialised as acryl-datahub's ``make_mcp`` does (raises for an invalid aspect)."""
    return from_json(aspect.ASPECT_NAME, to_json(aspect))


def proposal(urn: str, aspect: Aspect, system: SystemMetadataClass | None) -> Proposal:
    """The UPSERT of ``aspect`` on entity ``urn`` (``MetadataChangeProposalWrapper(...).make_mcp()``, with the
    aspect serialised once)."""
    if not urn:
        raise ValueError("a proposal needs an entity URN")
    return Proposal(entityType=_entity_type(urn), entityUrn=urn, changeType=ChangeTypeClass.UPSERT,
                    aspectName=aspect.name, aspect=aspect.generic, systemMetadata=system)


def aspect_text(p: MetadataChangeProposalClass) -> str | None:
    """The JSON text of a proposal's aspect (or patch), None when it has none or another content type."""
    a = p.aspect
    if a is None or a.contentType not in _JSON_TYPES:
        return None
    return _text(a.value)


def record(p: MetadataChangeProposalClass, properties: dict[str, str] | None = None) -> dict[str, Any]:
    """A proposal as DataHub's file format writes it (``aspect: {"json": ...}``; acryl-datahub's
    ``write_metadata_file``), with ``properties`` added to its systemMetadata."""
    obj = dict(pre_json_transform(p.to_obj()))
    text = aspect_text(p)
    if text is not None:
        obj["aspect"] = {"json": json.loads(text)}
    if properties:
        system = obj.setdefault("systemMetadata", {})
        system["properties"] = {**(system.get("properties") or {}), **properties}
    return obj


def line(p: MetadataChangeProposalClass, system: dict[str, Any] | None, properties_json: str | None) -> str:
    """``json.dumps(record(p, properties))``, given the rendering of ``p.systemMetadata`` without properties
    (``system``) and ``json.dumps(properties)``: the aspect's JSON text is put in as it is, not walked again."""
    text = aspect_text(p)
    if text is None or p.entityKeyAspect is not None or p.auditHeader is not None or p.headers:
        return json.dumps(record(p, json.loads(properties_json) if properties_json else None))
    head = json.dumps({"entityType": p.entityType, "entityUrn": p.entityUrn, "changeType": p.changeType,
                       "aspectName": p.aspectName})[:-1]
    sm = ""
    if system is not None or properties_json:
        inner = json.dumps(system or {})[1:-1]
        if properties_json:
            inner = f"{inner}, \"properties\": {properties_json}" if inner else f"\"properties\": {properties_json}"
        sm = f', "systemMetadata": {{{inner}}}'
    return f'{head}, "aspect": {{"json": {text}}}{sm}}}'


def system_json(system: SystemMetadataClass | None) -> dict[str, Any] | None:
    """A systemMetadata as DataHub's file format writes it, without its ``properties`` (``line`` adds them)."""
    if system is None:
        return None
    # Its fields as they are when all are plain (the translator's: lastObserved and defaults), which is what
    # DataHub's rendering gives for them; acryl-datahub's rendering otherwise.
    obj = _plain(system)
    if obj is None:
        obj = dict(pre_json_transform(system.to_obj()))
    if obj.get("properties"):
        raise ValueError("systemMetadata with properties: expected the translator's (lastObserved only)")
    obj.pop("properties", None)
    return obj


def content_key(part: Any) -> bytes | str:
    """A cheap key of a decoded event part: its ``marshal`` bytes (5x faster than ``repr``, lossless, so equal
    bytes mean equal content; equal content may marshal differently when strings are shared differently,
    which only costs a rebuild), or its repr for what marshal cannot take."""
    try:
        return marshal.dumps(part)
    except ValueError:
        return repr(part)


class Memo:
    """``get(key, build)``: ``build()``, remembered by ``key`` (the content it is built from), the least
    recently used forgotten first beyond ``size`` entries. A run repeats its datasets, jobs and flows in every
    action and every run of a job repeats them, so each distinct aspect is built and serialised once."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._entries: OrderedDict[Any, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        entries = self._entries
        hit = entries.get(key)
        if hit is None:
            hit = entries[key] = build()
            if len(entries) > self.size:
                entries.popitem(last=False)
        else:
            entries.move_to_end(key)
        return hit

    def find(self, key: Any) -> Any:
        """What ``key`` holds, else None (nothing is built or added)."""
        hit = self._entries.get(key)
        if hit is not None:
            self._entries.move_to_end(key)
        return hit
