"""Proposals as the JSON DataHub's file sink writes, and the memory that skips re-emitting unchanged aspects.

``render`` is acryl-datahub's own file rendering. ``Renderer`` gives the same bytes faster: acryl-datahub's
``to_obj`` is a generic Avro walk that validates as it goes (tens to hundreds of µs per aspect), and its MCP
rendering walks each aspect twice (``to_obj``, JSON string, ``to_obj`` of the envelope, ``json.loads``).
``Renderer`` renders each aspect object once (the translator hands out the same object for the same
content), with ``aspect_json.aspect_obj`` (acryl-datahub's ``to_obj`` compiled per schema), keeps that text
and its fingerprint (LRU, bounded by count and length), and puts the envelope around it. Aspects that differ
from event to event only by a time or run id are made by ``stamp.Stamped``: their text is their content's
template with those values put in, kept only while their event is written.
``tests/consumers/datahub/test_file_sink.py`` checks the result equals ``render`` for every proposal kind.

``Unchanged`` remembers, per sink and job, the fingerprint of the aspect last emitted for each (URN, aspect
name): DataHub upserts versioned aspects, so re-emitting an identical one changes nothing and is skipped.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from datahub.emitter.aspect import ASPECT_MAP
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import ChangeTypeClass, SystemMetadataClass

from . import stamp
from .translate import Proposal

__all__ = ["Renderer", "Unchanged", "render"]

_dumps = json.dumps
#: how many of the last aspects that are one event's own (``stamp.made``) the renderer keeps at least: more than
#: an event usually has (one with more renders its first ones again for its lines), few enough to die young
RECENT = 16
#: json.dumps of a str, without its generic entry (what json.dumps calls for a str with its default options)
_quote = json.encoder.encode_basestring_ascii


def fingerprint(text: str) -> bytes:
    """What ``Unchanged`` compares: a 16-byte hash of an aspect's JSON."""
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def render(proposal: Proposal) -> dict[str, Any]:
    """A proposal as the JSON object DataHub's file sink writes (``aspect: {"json": ...}``)."""
    from datahub.ingestion.sink.file import _to_obj_for_file

    return _to_obj_for_file(proposal)


def _plain(p: Proposal) -> bool:
    """An upsert of one aspect object (what ``Renderer`` and ``Unchanged`` handle; patches go the slow way)."""
    return isinstance(p, MetadataChangeProposalWrapper) and p.aspect is not None and p.entityKeyAspect is None \
        and not p.headers and p.auditHeader is None and p.entityUrn is not None


class Renderer:
    """``render`` as JSON text, with memory (see the module docstring)."""

    def __init__(self, size: int = 8192, max_chars: int = 32 << 20) -> None:
        # Bounded by count and by the length of the texts kept (a wide schema's text is large): about 2 KB an
        # entry for the bench's mix, so the count binds first there (~16 MB with the aspects held).
        self._size = size
        self._max_chars = max_chars
        self._chars = 0
        # id(aspect) -> [aspect, its JSON, its fingerprint or None until asked], least recently used first: the
        # aspect is held, so its id is not reused while it is here
        self._texts: OrderedDict[int, list[Any]] = OrderedDict()
        # ... and the same for aspects that are one event's own (``stamp.made``), asked for again only while
        # that event is written: kept apart, the last RECENT to 2 * RECENT, and let go young (in the LRU they
        # would outlive ~2,000 events, and the garbage collector's passes over them cost µs an event)
        self._recent: dict[int, list[Any]] = {}
        self._older: dict[int, list[Any]] = {}
        self._systems: dict[int, tuple[Any, str, bool]] = {}
        self._quoted = functools.lru_cache(maxsize=256)(_dumps)  # entity types, change types, aspect names
        self._system_default: dict[str, Any] | None = None
        self._system_rendered: dict[str, Any] = {}

    def _entry(self, aspect: Any) -> list[Any]:
        key = id(aspect)
        hit = self._texts.get(key)
        if hit is not None and hit[0] is aspect:
            self._texts.move_to_end(key)
            return hit
        hit = self._recent.get(key) or self._older.get(key)
        if hit is not None and hit[0] is aspect:
            return hit
        if stamp.made(aspect):
            hit = self._recent[key] = [aspect, stamp.text(aspect), None]
            if len(self._recent) >= RECENT:
                self._recent, self._older = {}, self._recent
            return hit
        text = stamp.text(aspect)
        hit = [aspect, text, None]
        self._texts[key] = hit
        self._chars += len(text)
        while len(self._texts) > self._size or (self._chars > self._max_chars and len(self._texts) > 1):
            self._chars -= len(self._texts.popitem(last=False)[1][1])
        return hit

    def aspect_text(self, aspect: Any) -> str:
        """The aspect's JSON as DataHub's file sink writes it under ``aspect.json``."""
        text: str = self._entry(aspect)[1]
        return text

    def aspect_fingerprint(self, aspect: Any) -> bytes:
        """``fingerprint(aspect_text(aspect))``, computed once per aspect object."""
        hit = self._entry(aspect)
        if hit[2] is None:
            hit[2] = fingerprint(hit[1])
        fp: bytes = hit[2]
        return fp

    def line(self, p: Proposal, properties: dict[str, str] | None = None, properties_json: str | None = None) -> str:
        """One record of the file: ``json.dumps(render(p))`` with ``properties`` added to its systemMetadata
        (``properties_json``: ``json.dumps(properties)`` when the caller has it cheaper)."""
        if not _plain(p):
            obj = render(p)
            if properties:
                system = obj.setdefault("systemMetadata", {})
                system["properties"] = {**(system.get("properties") or {}), **properties}
            return _dumps(obj)
        sm = p.systemMetadata
        if sm is None:
            tail = f', "systemMetadata": {{"properties": {properties_json or _dumps(properties)}}}}}' \
                if properties else "}"
        else:
            text, has_properties = self._system_text(sm)
            if not properties:
                tail = f', "systemMetadata": {text}}}'
            elif not has_properties:  # properties go last, as render() adds them
                tail = f', "systemMetadata": {text[:-1]}{", " if len(text) > 2 else ""}"properties": ' \
                       f'{properties_json or _dumps(properties)}}}}}'
            else:
                system = self._system_of(sm)
                system["properties"] = {**system["properties"], **properties}
                tail = f', "systemMetadata": {_dumps(system)}}}'
        # A timeseries point (a run event) is written once: rendered without taking a place in the memory.
        aspect: Any = p.aspect
        text = stamp.text(aspect) if aspect.ASPECT_TYPE == "timeseries" else self.aspect_text(aspect)
        q = self._quoted
        urn: str = p.entityUrn  # type: ignore[assignment]  # _plain: not None
        return (f'{{"entityType": {q(p.entityType)}, "entityUrn": {_quote(urn)}, '
                f'"changeType": {q(p.changeType)}, "aspectName": {q(p.aspectName)}, '
                f'"aspect": {{"json": {text}}}' + tail)

    def _system_text(self, sm: Any) -> tuple[str, bool]:
        """(the JSON of ``_system_of(sm)``, whether it has a properties map), remembered for the last few
        objects (the translator shares one per event time)."""
        hit = self._systems.get(id(sm))
        if hit is not None and hit[0] is sm:
            return hit[1], hit[2]
        system = self._system_of(sm)
        text, has_properties = _dumps(system), system.get("properties") is not None
        self._systems[id(sm)] = (sm, text, has_properties)
        if len(self._systems) > 64:
            self._systems.pop(next(iter(self._systems)))
        return text, has_properties

    def _system_of(self, sm: Any) -> dict[str, Any]:
        """DataHub's rendering of systemMetadata; when only ``lastObserved`` differs from the defaults (what the
        translator builds), DataHub's rendering of the defaults with that value put in."""
        if self._system_default is None:
            self._system_default = dict(SystemMetadataClass(lastObserved=0).items())
            self._system_rendered = dict(SystemMetadataClass(lastObserved=0).to_obj())
        inner = dict(sm.items())
        when = inner.get("lastObserved")
        inner["lastObserved"] = 0
        if inner != self._system_default:
            return dict(sm.to_obj())
        return {**self._system_rendered, "lastObserved": when}


class Unchanged:
    """Which proposals of an event can be skipped because the same aspect was the last one emitted for its URN.

    Only upserts of versioned aspects are skipped; timeseries aspects (run events) are points, never skipped.
    A patch of an aspect forgets what was emitted for it (its state is no longer the last upsert). The memory
    holds ``size`` entries (the oldest emitted are forgotten first, which only means a re-emit) and lives in
    the process: a new process, or a replay into a fresh DataHub, emits everything once again. ``select``
    does not change the memory; ``commit`` records what the sink accepted, so a failed write skips nothing
    on its retry.

    The memory is kept per ``scope``, the job whose event the proposals come from: a job's events are in
    order on one partition, but two jobs' events (on two partitions) interleave differently from one
    consumption to the next. Were the memory shared, an aspect both jobs emit (a dataset they both read)
    would go out with whichever job came first, and a replay of the same range would not give the same
    records. Per job, what is written depends only on that job's own events. The price: such an aspect is
    written once per job rather than once.
    """

    def __init__(self, renderer: Renderer, size: int = 100_000) -> None:
        self.renderer = renderer
        self.size = size
        # oldest emitted first; an OrderedDict, as forgetting the first of a plain dict gets slower with each
        # one forgotten (it scans the holes they leave: ~30 µs each at 100,000 entries, until the dict resizes)
        self._last: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()

    def select(self, proposals: list[Proposal], scope: str = ""
               ) -> tuple[list[Proposal], list[tuple[tuple[str, str, str], bytes | None]]]:
        """(the proposals to emit, the changes to ``commit`` once the sink took them)."""
        fresh: list[Proposal] = []
        marks: list[tuple[tuple[str, str, str], bytes | None]] = []
        pending: dict[tuple[str, str, str], bytes | None] = {}
        for p in proposals:
            key = (scope, p.entityUrn or "", p.aspectName or "")
            if not _plain(p) or p.changeType != ChangeTypeClass.UPSERT:
                pending[key] = None
                marks.append((key, None))
                fresh.append(p)
                continue
            if p.aspect.ASPECT_TYPE == "timeseries":
                fresh.append(p)
                continue
            fp = self.renderer.aspect_fingerprint(p.aspect)
            last = pending[key] if key in pending else self._last.get(key)
            if last == fp:
                continue
            pending[key] = fp
            marks.append((key, fp))
            fresh.append(p)
        return fresh, marks

    def commit(self, marks: Iterable[tuple[tuple[str, str, str], bytes | None]]) -> None:
        last = self._last
        for key, fp in marks:
            last.pop(key, None)
            if fp is not None:
                last[key] = fp
        while len(last) > self.size:
            last.popitem(last=False)

    def seed(self, record: dict[str, Any], scope: str = "") -> None:
        """Take a record already in the output (the file after a restart) as emitted, in output order."""
        key = (scope, record.get("entityUrn") or "", record.get("aspectName") or "")
        aspect = record.get("aspect") or {}
        cls = ASPECT_MAP.get(key[2])
        if cls is not None and cls.ASPECT_TYPE == "timeseries":
            return
        if record.get("changeType") != ChangeTypeClass.UPSERT or "json" not in aspect:
            self.commit([(key, None)])
        else:
            self.commit([(key, fingerprint(_dumps(aspect["json"])))])
