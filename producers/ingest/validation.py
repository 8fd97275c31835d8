"""OpenLineage events checked against the specification's JSON schemas, shipped in ``spec/``.

The schemas are the OpenLineage project's own (``spec/OpenLineage.json``, spec
2-0-2, and ``spec/facets/*.json``, Apache-2.0), read from the package, never
fetched. ``SpecValidator.errors(event)`` answers what is wrong with an event,
each problem naming the field by its path (``run/runId: "x" is not a "uuid"``):

* the event against ``RunEvent``, ``DatasetEvent`` or ``JobEvent`` (the kind its
  ``schemaURL`` names; RunEvent when it names none), with the ``date-time`` and
  ``uuid`` formats checked. ``uri`` is not: real producers send values that are
  no RFC 3986 URI (openlineage-spark's ``dataSource`` facet says ``"uri": "file"``
  for local files), Marquez takes them, and so does the spec's reference
  validator (``validate_openlineage.py``: the ``jsonschema`` package checks
  ``uri`` only with ``rfc3987`` installed). Refusing them would refuse those
  producers' every event;
* every facet whose ``_schemaURL`` names a facet of the spec against that facet's
  schema, as ``validate_openlineage.py`` does; custom facets only against the base
  facet shape, which the event's schema already checks. A facet marked
  ``_deleted`` says only that, and is not held to its schema.

jsonschema-rs (Rust) validates: a typical event takes a few microseconds,
against a millisecond for the pure-Python ``jsonschema``, which would cost the
receiver most of its rate.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema_rs

__all__ = ["EVENT_KINDS", "SPEC_VERSION", "SpecValidator", "event_kind"]

SPEC_VERSION = "2-0-2"
EVENT_KINDS = ("RunEvent", "DatasetEvent", "JobEvent")
_SPEC_ID = f"https://openlineage.io/spec/{SPEC_VERSION}/OpenLineage.json"
_DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: where the facets of an event are: (path to the mapping, label)
_FACET_PLACES = (("run", "facets"), ("job", "facets"), ("dataset", "facets"))
_DATASET_FACETS = (("inputs", ("facets", "inputFacets")), ("outputs", ("facets", "outputFacets")))
#: formats taken as any string (see the module docstring)
_LENIENT_FORMATS = {"uri": lambda _value: True}
#: facet URLs remembered at most (producers send a few; a client inventing one per event must not grow it)
_MAX_URLS = 4096
#: errors named per event at most: the first ones tell the producer what to fix
_MAX_ERRORS = 10


def event_kind(event: dict[str, Any]) -> str:
    """RunEvent, DatasetEvent or JobEvent, as the event's ``schemaURL`` names it (RunEvent when it names none)."""
    url = event.get("schemaURL")
    if isinstance(url, str):
        for kind in EVENT_KINDS:
            if url.endswith("/" + kind):
                return kind
    return "RunEvent"


def _spec_documents() -> list[dict[str, Any]]:
    root = resources.files(__package__).joinpath("spec")
    docs = [json.loads(root.joinpath("OpenLineage.json").read_text(encoding="utf-8"))]
    facets = root.joinpath("facets")
    docs += [json.loads(f.read_text(encoding="utf-8"))
             for f in sorted(facets.iterdir(), key=lambda f: f.name) if f.name.endswith(".json")]
    return docs


def _facet_name(facet: Any) -> str | None:
    """The spec facet a facet's ``_schemaURL`` names (``.../1-1-1/SchemaDatasetFacet.json#/...``), if any."""
    url = facet.get("_schemaURL") if isinstance(facet, dict) else None
    if not isinstance(url, str) or ".json" not in url:
        return None
    return url.split(".json")[0].rsplit("/", 1)[-1]


class SpecValidator:
    """Validates OpenLineage events against the shipped spec; see the module docstring. Thread-safe."""

    def __init__(self) -> None:
        docs = _spec_documents()
        registry = jsonschema_rs.Registry([(d["$id"], d) for d in docs])

        def compiled(ref: str) -> Any:
            return jsonschema_rs.validator_for({"$schema": _DRAFT, "$ref": ref}, registry=registry,
                                               validate_formats=True, formats=_LENIENT_FORMATS)

        self._events = {kind: compiled(f"{_SPEC_ID}#/$defs/{kind}") for kind in EVENT_KINDS}
        self._facets: dict[str, Any] = {}
        self._by_url: dict[str, Any] = {}
        for d in docs[1:]:
            name = d["$id"].rsplit("/", 1)[-1].removesuffix(".json")
            if name in d.get("$defs", {}):
                self._facets[name] = compiled(f"{d['$id']}#/$defs/{name}")

    def errors(self, event: Any) -> list[str]:
        """What the spec rejects in ``event`` (empty: valid), each naming the field's path."""
        if not isinstance(event, dict):
            return [f"<event>: a JSON {type(event).__name__}; expected an object (a RunEvent, DatasetEvent or "
                    "JobEvent)"]
        kind = event_kind(event)
        validator = self._events[kind]
        if validator.is_valid(event) and self._facets_valid(event):
            return []  # the common case, with no error objects built
        found = [f"{_path(e.instance_path)}: {e.message}" for e in validator.iter_errors(event)]
        for where, facet_validator, facet in self._named_facets(event):
            found += [f"{where}{_path(e.instance_path, lead='/')}: {e.message}"
                      for e in facet_validator.iter_errors(facet)]
        if not found:  # pragma: no cover - is_valid and iter_errors disagree
            found = [f"<event>: rejected by the {kind} schema"]
        return [f"{m} (spec {kind})" for m in found[:_MAX_ERRORS]]

    def _facets_valid(self, event: dict[str, Any]) -> bool:
        # the common case: no paths formatted
        return all(v.is_valid(facet) for _where, v, facet in self._named_facets(event, paths=False))

    def _named_facets(self, event: dict[str, Any], *, paths: bool = True) -> list[tuple[str, Any, Any]]:
        """(path, validator, facet) of every facet of ``event`` that names a spec facet (path "" unless
        ``paths``)."""
        found: list[tuple[str, Any, Any]] = []
        for owner, key in _FACET_PLACES:
            part = event.get(owner)
            if isinstance(part, dict):
                self._collect(found, f"{owner}/{key}" if paths else "", part.get(key), paths)
        for side, keys in _DATASET_FACETS:
            datasets = event.get(side)
            if not isinstance(datasets, list):
                continue
            for i, ds in enumerate(datasets):
                if isinstance(ds, dict):
                    for key in keys:
                        self._collect(found, f"{side}/{i}/{key}" if paths else "", ds.get(key), paths)
        return found

    def _collect(self, found: list[tuple[str, Any, Any]], where: str, facets: Any, paths: bool) -> None:
        if not isinstance(facets, dict):
            return
        for key, facet in facets.items():
            validator = self._facet_validator(facet)
            if validator is not None and not facet.get("_deleted"):
                found.append((f"{where}/{key}" if paths else "", validator, facet))

    def _facet_validator(self, facet: Any) -> Any:
        """The validator of the spec facet ``facet``'s ``_schemaURL`` names, if any; by URL, since a producer's
        facets name the same few URLs in every event."""
        url = facet.get("_schemaURL") if isinstance(facet, dict) else None
        if not isinstance(url, str):
            return None
        try:
            return self._by_url[url]
        except KeyError:
            validator = self._facets.get(_facet_name(facet) or "")
            if len(self._by_url) < _MAX_URLS:
                self._by_url[url] = validator
            return validator


def _path(parts: Any, lead: str = "") -> str:
    text = "/".join(str(p) for p in parts)
    if lead:
        return lead + text if text else ""
    return text or "<event>"
