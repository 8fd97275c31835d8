"""The compiled Avro reader (the Rust extension ``lineagewire.schemas._avro``, source in native/): the plan it runs.

Why: fastavro's reader makes a Python call per value and per byte of every varint, which made decoding the
largest cost of every consumer service; the compiled reader builds the same values in a few µs an event
(``bench.codec``). It is optional: ``pip install`` builds it where cargo is on PATH and goes on without it, and
then the Codec decodes with fastavro.

``native_reader(schema, keep)`` reads values written with ``schema`` (no schema resolution: the Codec keeps
fastavro when the writer's schema differs from the reader's), of only the fields ``keep`` names if given
(``Codec.fields_decoder``): the others are stepped over without being built, and the top-level fields after the
last one kept are not read at all. It reads what the contract uses: records, unions, arrays, maps, enums,
strings, bytes, booleans, int/long and timestamp-micros; anything else is a ``NotImplementedError`` and the Codec
keeps fastavro for that schema. A field ``keep`` names that the schema lacks is a ``ValueError`` (``check_fields``
raises the same without the extension). On any malformed body it raises (a ``ValueError`` naming the byte), and
the Codec reads the same bytes with fastavro, which gives the error to report or the value. The differential
tests in tests/schemas/ hold it equal to fastavro: the same values of the same types from the same bytes.

The schema is walked here into a plan of nested tuples (one per value, see ``native/src/lib.rs``) that the
extension compiles once into a tree it interprets per call; records that contain themselves are listed apart and
referred to by index.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

try:
    from . import _avro  # type: ignore[attr-defined]
except ImportError:  # installed without cargo: the Codec decodes with fastavro
    _avro = None

__all__ = ["AVAILABLE", "Keep", "Reader", "check_fields", "keep_tree", "native_reader"]

#: whether the extension is built and importable (the Codec reads it when it is made)
AVAILABLE = _avro is not None

#: (data, position) -> (value, position after it)
Reader = Callable[[bytes, int], tuple[Any, int]]
#: the fields of a record to read: name -> the fields to read inside it (None: all of it)
Keep = Mapping[str, "Keep | None"]

_Plan = tuple[Any, ...]


def native_reader(schema: dict[str, Any], keep: Keep | None = None) -> Reader:
    """The compiled reader of values written with ``schema`` (a self-contained Avro schema, named types inline at
    first use, as ``_repository`` builds them), of only the fields in ``keep`` if given (see ``keep_tree``);
    ``ImportError`` if the extension is not built."""
    if _avro is None:
        raise ImportError("lineagewire.schemas._avro is not built (pip install needs cargo for it)")
    planner = _Planner(schema)
    plan = planner.value(schema, keep, top=True)
    return _avro.compile(plan, planner.recursive, dt.datetime, dt.UTC)


def check_fields(schema: dict[str, Any], keep: Keep) -> None:
    """Raise what ``native_reader(schema, keep)`` raises for ``keep`` (a ``ValueError`` naming a field the schema
    lacks, ``NotImplementedError`` for a type it does not read), built or not."""
    _Planner(schema).value(schema, keep, top=True)


def keep_tree(paths: Iterable[str]) -> dict[str, Any]:
    """``["header", "inputs.name"]`` -> ``{"header": None, "inputs": {"name": None}}``: a dotted path goes into
    records, through arrays, maps and unions to their records."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        *parents, last = path.split(".")
        for name in parents:
            if node.get(name, {}) is None:
                break  # a parent kept whole already holds it
            node = node.setdefault(name, {})
        else:
            node[last] = None
    return tree


def last_kept(record: dict[str, Any], keep: Keep, recursive: set[str]) -> int:
    """The index of the last field of ``record`` that ``keep`` names; a ``ValueError`` for a field it lacks,
    ``NotImplementedError`` for fields of a recursive record."""
    name = record["name"]
    known = {f["name"] for f in record["fields"]}
    if not known.issuperset(keep):
        raise ValueError(f"{name} has no field {', '.join(sorted(set(keep) - known))}")
    if name in recursive:
        raise NotImplementedError(f"fields of the recursive record {name}")
    return max(i for i, f in enumerate(record["fields"]) if f["name"] in keep)


def _recursive_names(schema: Any) -> set[str]:
    """Named records that contain themselves (through arrays, maps, unions or other records)."""
    recursive: set[str] = set()
    defined: dict[str, Any] = {}

    def walk(t: Any, stack: tuple[str, ...]) -> None:
        if isinstance(t, str):
            if t in stack:
                recursive.add(t)
            elif t in defined:
                walk(defined[t], stack)
        elif isinstance(t, list):
            for branch in t:
                walk(branch, stack)
        elif isinstance(t, dict):
            if t["type"] == "record":
                defined.setdefault(t["name"], t)
                for f in t["fields"]:
                    walk(f["type"], (*stack, t["name"]))
            elif t["type"] == "array":
                walk(t["items"], stack)
            elif t["type"] == "map":
                walk(t["values"], stack)
            elif isinstance(t["type"], (dict, list)):
                walk(t["type"], stack)

    walk(schema, ())
    return recursive


class _Planner:
    """The walk of the schema, with the fields to keep, into the extension's plan."""

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
        raise NotImplementedError(f"the compiled reader does not read {t!r}")

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
    raise NotImplementedError(f"the compiled reader does not read Avro type {kind!r}")
