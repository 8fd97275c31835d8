"""The compiled reader (the Rust extension ``lineagewire.schemas._avro``, source in native/): the plan it runs.

``native_reader(schema, keep)`` has the contract of the generated reader (``reader.python_reader``): the same
values of the same types from the same bytes, the same ``ValueError`` for a field ``keep`` names that the
schema lacks and ``NotImplementedError`` for a type it does not read, and an exception (a ``ValueError``
naming the byte) on any malformed body. The schema is walked here, as the generator walks it, into a plan of
nested tuples (one per value, see ``native/src/lib.rs``) that the extension compiles once into a tree it
interprets per call; records that contain themselves are listed apart and referred to by index.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .reader import Keep, Reader, _recursive_names, last_kept

try:
    from . import _avro  # type: ignore[attr-defined]
except ImportError:  # installed without cargo: reader.compile_reader uses the generated Python reader
    _avro = None

__all__ = ["AVAILABLE", "native_reader"]

#: whether the extension is built and importable
AVAILABLE = _avro is not None

_Plan = tuple[Any, ...]


def native_reader(schema: dict[str, Any], keep: Keep | None = None) -> Reader:
    """The compiled reader of values written with ``schema``, of only the fields in ``keep`` if given
    (``ImportError`` if the extension is not built)."""
    if _avro is None:
        raise ImportError("lineagewire.schemas._avro is not built (pip install needs cargo for it)")
    planner = _Planner(schema)
    plan = planner.value(schema, keep, top=True)
    return _avro.compile(plan, planner.recursive, dt.datetime, dt.UTC)


class _Planner:
    """The walk of ``reader._Generator``, with the same errors, making a plan instead of Python source."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.recursive_names = _recursive_names(schema)
        self.named: dict[str, dict[str, Any]] = {}  # every named type by full name, as met
        self.ids: dict[str, int] = {}  # recursive record -> its index in ``recursive``
        self.recursive: list[_Plan] = []

    def value(self, t: Any, keep: Keep | None = None, top: bool = False) -> _Plan:
        if isinstance(t, str):
            if keep is None and t in self.ids:
                return ("ref", self.ids[t])
            if t in self.named:
                t = self.named[t]
            elif keep is not None:
                raise ValueError(f"fields {sorted(keep)} asked of a {t}")
            else:
                return _primitive(t)
        if isinstance(t, list):
            return ("union", tuple(self.value(b, None if keep is None or b == "null" else keep) for b in t))
        kind = t["type"]
        if kind == "record":
            return self.record(t, keep, top)
        if keep is not None and kind not in ("array", "map"):
            raise ValueError(f"fields {sorted(keep)} asked of a {kind}, which has none")
        if kind == "enum":
            self.named[t["name"]] = t
            return ("enum", tuple(t["symbols"]))
        if kind == "array":
            return ("array", self.value(t["items"], keep))
        if kind == "map":
            return ("map", self.value(t["values"], keep))
        if kind == "long" and t.get("logicalType") == "timestamp-micros":
            return ("timestamp",)
        if isinstance(kind, str) and "logicalType" not in t:
            return _primitive(kind)
        raise NotImplementedError(f"no generated reader for {t!r}")

    def record(self, t: dict[str, Any], keep: Keep | None, top: bool) -> _Plan:
        name = t["name"]
        self.named[name] = t
        if keep is not None:
            last = last_kept(t, keep, self.recursive_names)
            fields = t["fields"][:last + 1] if top else t["fields"]  # the rest of the event is not read
            # a field not kept is planned whole (its types checked, its named types met) and stepped over
            return ("record", tuple((f["name"], self.value(f["type"], keep[f["name"]])) if f["name"] in keep
                                    else (None, self.value(f["type"])) for f in fields))
        if name in self.ids:  # a named type is walked again where a record using it is
            return ("ref", self.ids[name])
        if name in self.recursive_names:
            self.ids[name] = len(self.recursive)
            self.recursive.append(("null",))  # its place, while its fields refer to it
            self.recursive[self.ids[name]] = ("record", tuple((f["name"], self.value(f["type"])) for f in t["fields"]))
            return ("ref", self.ids[name])
        return ("record", tuple((f["name"], self.value(f["type"])) for f in t["fields"]))


def _primitive(kind: str) -> _Plan:
    if kind in ("null", "boolean", "long", "string", "bytes"):
        return (kind,)
    if kind == "int":
        return ("long",)
    raise NotImplementedError(f"no generated reader for Avro type {kind!r}")
