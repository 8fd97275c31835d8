"""``Renderer``: the JSON text of an OpenLineage event, as openlineage-python's ``Serde.to_json`` gives it.

Every openlineage-python transport sends ``Serde.to_json(event)``: ``attr.asdict``
of the whole event, a second pass (``Serde.remove_nulls_and_enums``) that drops
``None`` values, ``None`` list items and empty objects in lists, turns enums into
their values, dates into ISO text and UUIDs into text, then
``json.dumps(sort_keys=True)``. The service's own HTTP and Kafka deliveries
render with ``Renderer.to_json`` instead: the same rules in one pass over the
attrs fields (``attr.fields``, public attrs API), and the plain form of the
facets the ``Translator`` shares between events (``share``) computed once.

Why not ``Serde.to_json`` itself: it was 160 µs of the ~360 µs an event cost on
the HTTP path (asdict and the second pass walk the dataset facets again for
every event, and a run repeats its datasets in every event); this is about a
third of that. Nothing of openlineage-python is patched or bypassed: the events
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
        # id -> (the object, kept so its id is not reused; its plain form once rendered, else None)
        self._shared: dict[int, tuple[Any, Any]] = {}
        self._fields: dict[type, tuple[str, ...]] = {}

    def share(self, obj: Any) -> None:
        """``obj`` never changes from now on: its plain form is computed once and reused."""
        if id(obj) in self._shared:
            return
        if len(self._shared) >= self.max_shared:
            for key in list(self._shared)[: self.max_shared // 2]:
                del self._shared[key]
        self._shared[id(obj)] = (obj, None)

    def to_json(self, event: Any) -> str:
        """The text ``Serde.to_json(event)`` gives (the same keys and values, keys sorted)."""
        return json.dumps(self.plain(event), sort_keys=True, default=_default)

    def plain(self, obj: Any) -> Any:
        """``Serde.to_dict(obj)``: JSON-ready dicts, lists and scalars."""
        cls = type(obj)
        if cls in _SCALARS or obj is None:
            return obj
        shared = self._shared.get(id(obj))
        if shared is not None and shared[0] is obj:
            if shared[1] is None:
                self._shared[id(obj)] = shared = (obj, self._plain(obj, cls))
            return shared[1]
        return self._plain(obj, cls)

    def _plain(self, obj: Any, cls: type) -> Any:
        names = self._fields.get(cls)
        if names is None and attr.has(cls):
            names = self._fields[cls] = tuple(a.name for a in attr.fields(cls))
        plain = self.plain
        if names is not None:
            out = {}
            for name in names:
                value = getattr(obj, name)
                if value is None:
                    continue
                if type(value) not in _SCALARS and (value := plain(value)) is None:  # scalars as they are
                    continue
                out[name] = value
            return out
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
