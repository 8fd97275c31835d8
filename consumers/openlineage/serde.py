"""A faster, byte-identical ``openlineage.client.serde.Serde.to_json`` for RunEvents.

Every openlineage-python transport (http, kafka, file, console, composite...)
serialises an event with ``Serde.to_json(event)``: ``attr.asdict`` of the
whole event, then a second pass dropping nulls and enums, then
``json.dumps(sort_keys=True)``. For the events this service builds that is
about two thirds of the per-event cost, and most of it is spent again and
again on the same dataset facets (schema, column lineage, symlinks...), which
a run repeats in every event.

``install()`` wraps ``Serde.to_json`` so that, for
``event_v2`` RunEvents serialised without extra ``json.dumps`` arguments, the
JSON text is built in one pass that follows exactly the rules of ``attr.asdict``,
``Serde.remove_nulls_and_enums`` and ``json.dumps(sort_keys=True)``, and reuses
the text of objects declared immutable with ``freeze(obj)`` (the Translator
freezes the facets it caches and shares between events). Anything else
(other event types, ``indent``, dict keys that are not strings, subclasses of
``Serde``) goes to openlineage-python's own implementation unchanged. The
transports themselves are untouched: they still build, send and fail exactly
as before, only the text they send is produced faster, byte for byte the same
(the tests compare both implementations on every kind of event).

``install()`` patches openlineage-python process-wide, so nothing calls it as a
side effect: the service entry points do, through
``OpenLineageHandler.prepare_process`` (``lineagewire consume openlineage``, and
``replay`` into OpenLineage or with ``--format openlineage``); a program that
embeds the ``Translator`` decides for itself. Without it everything works the same, only slower.

A frozen object cannot change afterwards, so its text, computed once and kept
while the object lives, is never stale: ``freeze`` makes it (and every attrs
object, list and dict it holds) read-only: setting an attribute raises
``FrozenObjectError`` (attrs' ``FrozenInstanceError``), its lists become tuples and its dicts
read-only dicts (rendered the same). An object that cannot be made read-only
is left as it is and rendered every time.

The rules reproduced are those of the openlineage-python and attrs sources this
module was checked against: ``install()`` compares a fingerprint of that source
(``Serde.to_json``, ``to_dict``, ``remove_nulls_and_enums``, ``attr.asdict``)
with the ones in ``VERIFIED`` and, for any other version, leaves
openlineage-python's serialiser in place (slower, never different) and logs a
WARNING. The ``openlineage`` extra pins those versions.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import json
import logging
import threading
import uuid
import weakref
from collections.abc import Callable
from enum import Enum
from json.encoder import encode_basestring_ascii
from typing import Any

import attr
from openlineage.client import event_v2
from openlineage.client.serde import Serde

__all__ = ["VERIFIED", "FrozenDict", "FrozenObjectError", "fingerprint", "freeze", "install", "installed",
           "reference_to_json", "to_json", "uninstall"]

log = logging.getLogger(__name__)

#: Fingerprints of the serialiser sources whose rules this module reproduces (see ``fingerprint()``):
#: openlineage-python 1.54.0 with attrs 26.1.0.
VERIFIED = frozenset({"a82e112d8d7f37396b3d735fc51f9f21d3d57c949f009b1673ffa0dac4fbe658"})

# The classes attr.asdict copies as they are (attrs' own list: ``attr._funcs._ATOMIC_TYPES``).
_ATOMIC = frozenset({type(None), bool, int, float, str, bytes, complex, type, range, property, type(...)})
_SEQUENCES = (tuple, list, set, frozenset)
_EVENT_TYPES = frozenset({event_v2.RunEvent})

_STR, _NONE, _ATOM, _ATTRS, _SEQ, _DICT, _OTHER = range(7)


def _default(o: Any) -> str:
    # The ``default`` of Serde.to_json, so that a value json cannot encode reads the same.
    return f"<<non-serializable: {type(o).__qualname__}>>"


class _Unsupported(Exception):  # noqa: N818 - internal signal, never leaves this module
    """A shape this module does not reproduce: the event goes to openlineage-python's Serde."""


# class -> (its kind, and for attrs classes its fields as (name, '"name": ') in the order of the output)
_kinds: dict[type, tuple[int, tuple[tuple[str, str], ...]]] = {}


def _kind(cls: type) -> tuple[int, tuple[tuple[str, str], ...]]:
    kind = _kinds.get(cls)
    if kind is None:
        if cls is str:
            kind = (_STR, ())
        elif cls is type(None):
            kind = (_NONE, ())
        elif cls in _ATOMIC:
            kind = (_ATOM, ())
        elif attr.has(cls):
            # json.dumps(sort_keys=True) orders the keys: walk the fields in that order.
            kind = (_ATTRS, tuple((name, f"{encode_basestring_ascii(name)}: ")
                                  for name in sorted(a.name for a in attr.fields(cls))))
        elif issubclass(cls, _SEQUENCES):
            kind = (_SEQ, ())
        elif issubclass(cls, dict):
            kind = (_DICT, ())
        else:
            kind = (_OTHER, ())
        if len(_kinds) >= 4096:  # classes made at run time (with_additional_properties) must not pile up
            _kinds.clear()
        _kinds[cls] = kind
    return kind


def _leaf(value: Any) -> str | None:
    """Serde.remove_nulls_and_enums of a value attr.asdict left alone, then json.dumps of it."""
    if isinstance(value, Enum):
        value = value.value
    elif isinstance(value, dt.date):
        value = value.isoformat()
    elif isinstance(value, uuid.UUID):
        value = str(value)
    elif getattr(getattr(value, "__class__", None), "__name__", None) == "int64":
        value = int(value)
    if value is None:
        return None
    if type(value) is str:  # enum values, dates and ids mostly
        return encode_basestring_ascii(value)
    return json.dumps(value, sort_keys=True, default=_default)


# id(obj) -> (weak reference to obj, its JSON text once computed)
_frozen: dict[int, tuple[weakref.ref[Any], str | None]] = {}


class FrozenDict(dict[Any, Any]):
    """A dict that refuses changes: what a frozen object's dicts become (``attr.asdict`` reads it as a dict)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("this dict belongs to a frozen OpenLineage object (lineagewire serde.freeze); copy it "
                        "to change it")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore


class FrozenObjectError(attr.exceptions.FrozenInstanceError):
    """An attribute of a frozen object was set or deleted (an ``AttributeError``, like attrs' own)."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def __str__(self) -> str:
        return self.message


# class -> its read-only subclass
_read_only: dict[type, type] = {}


def _read_only_class(cls: type) -> type:
    sub = _read_only.get(cls)
    if sub is None:
        def refuse(self: Any, name: str, *value: Any) -> None:
            raise FrozenObjectError(
                f"{cls.__qualname__}.{name}: this object is frozen (lineagewire serde.freeze) and its JSON text "
                "is cached; build a new one (attr.evolve) to change it")

        # Same layout (empty __slots__), so an instance can switch to it; attrs sees the same fields.
        sub = type(cls.__name__, (cls,), {"__slots__": (), "__setattr__": refuse, "__delattr__": refuse,
                                          "__module__": cls.__module__, "__qualname__": cls.__qualname__})
        _read_only[cls] = sub
    return sub


_SCALARS = frozenset({str, type(None), bool, int, float})
# class -> names of its attrs fields
_field_names: dict[type, tuple[str, ...]] = {}


def _make_read_only(value: Any, seen: set[int]) -> Any:
    """``value`` with its containers made immutable and its attrs objects read-only (in place where it can)."""
    if type(value) in _SCALARS or id(value) in seen:  # most values are strings and nulls: spared the rest
        return value
    if isinstance(value, list | tuple):
        return tuple(_make_read_only(v, seen) for v in value)
    if type(value) is dict:
        return FrozenDict((k, _make_read_only(v, seen)) for k, v in value.items())
    if type(value) is set:
        return frozenset(value)
    cls = type(value)
    if attr.has(cls) and cls not in _read_only.values():
        seen.add(id(value))
        names = _field_names.get(cls)
        if names is None:
            names = _field_names[cls] = tuple(a.name for a in attr.fields(cls))
        for name in names:
            current = getattr(value, name)
            new = _make_read_only(current, seen)
            if new is not current:
                object.__setattr__(value, name, new)
        value.__class__ = _read_only_class(cls)
    return value


def freeze(obj: Any) -> Any:
    """Make ``obj`` (an attrs object, e.g. a facet) read-only (see the module docstring), so its JSON text is
    computed once and reused.

    Returns ``obj``. Objects that cannot be made read-only or weakly referenced are left as they are
    (serialised each time).
    """
    if not attr.has(type(obj)):
        return obj
    try:
        _make_read_only(obj, set())
    except TypeError:  # a class whose instances cannot switch class (e.g. a C layout): never cached
        return obj
    key = id(obj)

    def forget(ref: weakref.ref[Any], key: int = key) -> None:
        entry = _frozen.get(key)
        if entry is not None and entry[0] is ref:
            _frozen.pop(key, None)

    try:
        _frozen[key] = (weakref.ref(obj, forget), None)
    except TypeError:
        pass
    return obj


def _encode(value: Any) -> str | None:
    """The JSON text of ``value`` as Serde.to_json renders it inside an event; None when Serde drops it."""
    kind, names = _kind(type(value))
    if kind is _STR:
        return encode_basestring_ascii(value)
    if kind is _NONE:
        return None
    if kind is _ATTRS:
        entry = _frozen.get(id(value))
        if entry is not None and entry[0]() is value:
            text = entry[1]
            if text is None:
                text = _attrs(value, names)
                _frozen[id(value)] = (entry[0], text)
            return text
        return _attrs(value, names)
    if kind is _SEQ:
        # Serde drops null items, and items that end up as empty objects.
        parts = [t for t in map(_encode, value) if t is not None and t != "{}"]
        return "[" + ", ".join(parts) + "]"
    if kind is _DICT:
        parts = []
        for k in sorted(value):  # raises TypeError on mixed key types, as json.dumps would
            if type(k) is not str:
                raise _Unsupported(f"dict key {k!r}")
            v = value[k]
            t = encode_basestring_ascii(v) if type(v) is str else _encode(v)
            if t is not None:
                parts.append(f"{encode_basestring_ascii(k)}: {t}")
        return "{" + ", ".join(parts) + "}"
    return _leaf(value)


def _attrs(value: Any, fields: tuple[tuple[str, str], ...]) -> str:
    parts = []
    for name, prefix in fields:
        v = getattr(value, name)
        # Strings and nulls are most of the values: spared the general path.
        if v is None:
            continue
        t = encode_basestring_ascii(v) if type(v) is str else _encode(v)
        if t is not None:
            parts.append(prefix + t)
    return "{" + ", ".join(parts) + "}"


def to_json(event: Any) -> str:
    """``Serde.to_json(event)``, byte for byte, for an attrs event (raises ``TypeError`` for anything else)."""
    kind, names = _kind(type(event))
    if kind is not _ATTRS:
        raise TypeError(f"event of type {type(event).__name__}: expected an attrs OpenLineage event")
    return _attrs(event, names)


_original: Callable[..., str] | None = None
_lock = threading.Lock()
_found: list[str | None] = []  # the fingerprint, computed once


def _serde_to_json(cls: type, obj: Any, **kwargs: Any) -> str:
    assert _original is not None
    if not kwargs and cls is Serde and type(obj) in _EVENT_TYPES:
        try:
            return to_json(obj)
        except (_Unsupported, TypeError, ValueError, RecursionError):
            pass  # openlineage-python's own serialiser decides (and raises what it raises)
    return _original(cls, obj, **kwargs)


def reference_to_json(obj: Any, **kwargs: Any) -> str:
    """openlineage-python's own ``Serde.to_json(obj, **kwargs)``, installed or not (the reference of the tests)."""
    original = _original or Serde.__dict__["to_json"].__func__
    return original(Serde, obj, **kwargs)


def fingerprint() -> str | None:
    """SHA-256 of the installed openlineage-python and attrs serialiser sources (None when unreadable)."""
    import attr._funcs as attr_funcs

    to_json = _original or Serde.__dict__["to_json"].__func__
    try:
        sources = [inspect.getsource(f) for f in (Serde.remove_nulls_and_enums, Serde.to_dict, to_json,
                                                  attr_funcs.asdict, attr_funcs._asdict_anything)]
    except (OSError, TypeError):
        return None
    if getattr(attr_funcs, "_ATOMIC_TYPES", None) != _ATOMIC:
        return None
    return hashlib.sha256("\n".join(sources).encode()).hexdigest()


def install() -> bool:
    """Route ``Serde.to_json`` of RunEvents through this module (idempotent; process-wide).

    Returns whether it is installed: not when the serialiser sources are not a ``VERIFIED`` version.
    """
    global _original
    with _lock:
        if _original is None:
            if not _found:
                _found.append(fingerprint())
                if _found[0] not in VERIFIED:
                    log.warning("openlineage-python's Serde (fingerprint %s) is not a version the one-pass rendering "
                             "was verified against; keeping openlineage-python's own serialiser", _found[0])
            if _found[0] not in VERIFIED:
                return False
            _original = Serde.__dict__["to_json"].__func__
            Serde.to_json = classmethod(_serde_to_json)  # type: ignore[method-assign,assignment]
        return True


def uninstall() -> None:
    """Restore openlineage-python's own ``Serde.to_json``."""
    global _original
    with _lock:
        if _original is not None:
            Serde.to_json = classmethod(_original)  # type: ignore[method-assign,assignment]
            _original = None


def installed() -> bool:
    """Whether ``Serde.to_json`` currently goes through this module."""
    return _original is not None
