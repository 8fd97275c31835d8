"""``Renderer``: the JSON text of an OpenLineage event, as openlineage-python's ``Serde.to_json`` gives it.

Every openlineage-python transport sends ``Serde.to_json(event)``: ``attr.asdict``
of the whole event, a second pass (``Serde.remove_nulls_and_enums``) that drops
``None`` values, ``None`` list items and empty objects in lists, turns enums into
their values, dates into ISO text and UUIDs into text, then
``json.dumps(sort_keys=True)``. The service's own HTTP and Kafka deliveries
render with ``Renderer.to_json`` instead: the same rules in one pass over the
attrs fields (``attr.fields``, public attrs API), writing the text directly
(``json.dumps`` with ``sort_keys`` is compositional: a dict is ``{`` + its sorted
``"key": value`` texts joined by ``, `` + ``}``), and the JSON text of the facets
the ``Translator`` shares between events (``share``) computed once by
``json.dumps`` and spliced into every event that uses them.

Why not ``Serde.to_json`` itself: it was 160 µs of the ~360 µs an event cost on
the HTTP path (asdict and the second pass walk the dataset facets again for
every event, and a run repeats its datasets in every event); this is about a
sixth of that. Nothing of openlineage-python is patched or bypassed: the events
are its model objects, built and validated by its constructors, and
``Serde.to_json`` is what ``render`` (``replay --format openlineage``) and every
transport of openlineage-python still use. The tests compare the two renderings
(parsed) on every kind of contract event; if a future openlineage-python changes
its rules, that test says so, and the events stay valid OpenLineage either way.

A shared object must not change after it was rendered once (the Translator's
cached facets never do: treat the facets of translated events as read-only).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from enum import Enum
from json.encoder import encode_basestring_ascii as quote_json  # what json.dumps (ensure_ascii) uses
from typing import Any

import attr

__all__ = ["Renderer"]

_SCALARS = frozenset({str, int, float, bool})


def _default(o: Any) -> str:
    # Serde.to_json's ``default``: a value json cannot encode reads the same.
    return f"<<non-serializable: {type(o).__qualname__}>>"


class Renderer:
    """Renders OpenLineage events to JSON text; ``share(obj)`` marks an object rendered once and reused.

    ``max_shared``: the most shared objects kept (the Translator shares at most its cache size of facets);
    past it the oldest half is forgotten and rendered again when met.
    """

    def __init__(self, max_shared: int = 16_384) -> None:
        self.max_shared = max_shared
        # id -> (the object, kept so its id is not reused; its plain form and its JSON text once rendered)
        self._shared: dict[int, tuple[Any, Any, str | None]] = {}
        self._fields: dict[type, tuple[str, ...]] = {}
        # per attrs class: its fields sorted by name, as sort_keys writes them, each with its '"name": ' text
        self._order: dict[type, tuple[tuple[str, str], ...]] = {}

    def share(self, obj: Any) -> None:
        """``obj`` never changes from now on: its plain form is computed once and reused."""
        if id(obj) in self._shared:
            return
        if len(self._shared) >= self.max_shared:
            for key in list(self._shared)[: self.max_shared // 2]:
                del self._shared[key]
        self._shared[id(obj)] = (obj, None, None)

    def to_json(self, event: Any) -> str:
        """The text ``Serde.to_json(event)`` gives (the same keys and values, keys sorted)."""
        text = self.text(event)
        return "null" if text is None else text

    def text(self, obj: Any) -> str | None:
        """``json.dumps(self.plain(obj), sort_keys=True)`` (None where ``plain`` gives None), put together from
        the texts of the parts: ``json.dumps`` with ``sort_keys`` writes a dict as ``{`` + the sorted
        ``"key": value`` texts joined by ``, `` + ``}`` and a list alike, so a shared object's text is
        computed once and spliced in, instead of walking and encoding its facets again for every event."""
        cls = type(obj)
        if cls is str:
            return quote_json(obj)
        if obj is None:
            return None
        if cls is bool:
            return "true" if obj else "false"
        if cls is int:
            return int.__repr__(obj)
        shared = self._shared.get(id(obj))
        if shared is not None and shared[0] is obj:
            return self._shared_text(obj, cls, shared)
        if cls is dict:
            if not all(type(k) is str for k in obj):
                return json.dumps(self.plain(obj), sort_keys=True, default=_default)
            return self._dict_text(obj)
        if cls is list or cls is tuple:
            return self._items_text(obj)
        order = self._order.get(cls)
        if order is None and attr.has(cls):
            names = sorted(a.name for a in attr.fields(cls))
            order = self._order[cls] = tuple((n, f"{quote_json(n)}: ") for n in names)
        if order is not None:
            return self._attrs_text(obj, order)
        plain = self.plain(obj)
        return None if plain is None else json.dumps(plain, sort_keys=True, default=_default)

    def _shared_text(self, obj: Any, cls: type, shared: tuple[Any, Any, str | None]) -> str | None:
        """A shared object's text: computed by ``json.dumps`` the first time, kept for the next events."""
        text = shared[2]
        if text is None:
            plain = shared[1] if shared[1] is not None else self._plain(obj, cls)
            text = None if plain is None else json.dumps(plain, sort_keys=True, default=_default)
            self._shared[id(obj)] = (obj, shared[1], text)
        return text

    def _items_text(self, items: list[Any] | tuple[Any, ...]) -> str:
        """A list's text: None items, and items that render as None or as an empty object, are left out."""
        text_of = self.text
        texts = [t for t in (text_of(v) for v in items if v is not None) if t is not None and t != "{}"]
        return "[" + ", ".join(texts) + "]"

    # _dict_text and _attrs_text: one loop each, written out (a shared generator of pairs cost a fifth more time)
    def _dict_text(self, obj: dict[str, Any]) -> str:
        """A dict's text: its members sorted by key, those whose value is or renders as None left out."""
        text_of = self.text
        parts = []
        for k in sorted(obj):
            value = obj[k]
            if value is None:
                continue
            value = quote_json(value) if type(value) is str else text_of(value)
            if value is not None:
                parts.append(f"{quote_json(k)}: {value}")
        return "{" + ", ".join(parts) + "}"

    def _attrs_text(self, obj: Any, order: tuple[tuple[str, str], ...]) -> str:
        """An attrs object's text: its fields in ``order`` (sorted, with their ``"name": `` texts), those whose
        value is or renders as None left out."""
        text_of = self.text
        parts = []
        for name, key in order:
            value = getattr(obj, name)
            if value is None:
                continue
            value = quote_json(value) if type(value) is str else text_of(value)
            if value is not None:
                parts.append(key + value)
        return "{" + ", ".join(parts) + "}"

    def plain(self, obj: Any) -> Any:
        """``Serde.to_dict(obj)``: JSON-ready dicts, lists and scalars."""
        cls = type(obj)
        if cls in _SCALARS or obj is None:
            return obj
        shared = self._shared.get(id(obj))
        if shared is not None and shared[0] is obj:
            if shared[1] is None:
                self._shared[id(obj)] = shared = (obj, self._plain(obj, cls), shared[2])
            return shared[1]
        return self._plain(obj, cls)

    def _plain(self, obj: Any, cls: type) -> Any:
        names = self._fields.get(cls)
        if names is None and attr.has(cls):
            names = self._fields[cls] = tuple(a.name for a in attr.fields(cls))
        if names is not None:
            return self._attrs_plain(obj, names)
        # Values inside an event (its enums, dates) come here on every event: kept inline, without a further call.
        plain = self.plain
        if isinstance(obj, Enum):
            return obj.value
        if isinstance(obj, dt.date):
            return obj.isoformat()
        if isinstance(obj, uuid.UUID):
            return str(obj)
        if isinstance(obj, dict):
            return {k: v for k, v in ((k, plain(v)) for k, v in obj.items()) if v is not None}
        if isinstance(obj, (list, tuple, set, frozenset)):
            items = (plain(v) for v in obj if v is not None)
            return [v for v in items if v is not None and v != {}]
        return obj

    def _attrs_plain(self, obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
        """An attrs object's fields by name, those whose value is or becomes None left out."""
        plain = self.plain
        out = {}
        for name in names:
            value = getattr(obj, name)
            if value is None:
                continue
            if type(value) not in _SCALARS and (value := plain(value)) is None:  # scalars as they are
                continue
            out[name] = value
        return out
