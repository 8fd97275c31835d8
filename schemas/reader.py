"""Avro binary -> event dicts, by a Python function generated once per writer schema.

Why not fastavro here: its reader makes a Python call per value and per byte
of every varint (``fo.read(1)``), which made decoding the largest cost of
every consumer service (about 31 µs an event of our mix, 38 µs an action
event). A function generated from the schema reads the bytes in place with
straight-line code for each field and decodes the same events in about half
that time (``bench/codec``).

``keep`` makes a reader of some fields only (``Codec.fields_decoder``): the
others are stepped over without building a value, and the top-level fields
after the last one kept are not read at all.

It decodes only what the contract uses: records, unions, arrays, maps, enums,
strings, bytes, booleans, int/long and timestamp-micros. ``compile_reader``
raises ``NotImplementedError`` for anything else, and the Codec then keeps
fastavro for that schema. It does no schema resolution (the Codec keeps
fastavro when the writer's schema differs from the reader's), and it checks
bounds, lengths, union and enum indexes but words no error: on any failure the
Codec decodes the same bytes with fastavro, which either gives the error to
report or the value. A differential test holds it equal to fastavro on random
events of every schema and on damaged bytes (tests/schemas/test_reader.py).

The compiled reader: where the Rust extension ``lineagewire.schemas._avro``
(native/, built by ``pip install`` when cargo is on PATH) is importable,
``compile_reader`` gives its reader instead (``_native.py``), with the same
contract: equal values of the same types, the same errors for ``keep`` and for
types it does not read, an exception on any malformed body. Pure Python cannot
build an action event's ~130 objects much under 15 µs; the compiled reader
takes a few µs. ``LINEAGEWIRE_AVRO_READER=python`` forces the generated Python
reader (``python_reader``), which stays the fallback where the extension is not
built and the reference the compiled one is tested against.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["READER_ENV", "Keep", "Reader", "compile_reader", "implementation", "keep_tree", "python_reader"]

#: ``LINEAGEWIRE_AVRO_READER=python`` makes ``compile_reader`` give the generated Python reader even where the
#: compiled one is built
READER_ENV = "LINEAGEWIRE_AVRO_READER"

#: (data, position) -> (value, position after it)
Reader = Callable[[bytes, int], tuple[Any, int]]
#: the fields of a record to read: name -> the fields to read inside it (None: all of it)
Keep = Mapping[str, "Keep | None"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class _Malformed(Exception):
    """The bytes do not follow the schema (the Codec re-reads them with fastavro for the error's words)."""


def compile_reader(schema: dict[str, Any], keep: Keep | None = None) -> Reader:
    """The reader of values written with ``schema`` (a self-contained Avro schema, named types inline at first
    use, as ``_repository`` builds them); of only the fields in ``keep`` if given (see ``keep_tree``; a field
    the schema does not have is a ``ValueError``). The compiled one where it is built, unless
    ``LINEAGEWIRE_AVRO_READER=python``; else the generated Python one."""
    if implementation() == "native":
        from ._native import native_reader  # imports this module

        return native_reader(schema, keep)
    return python_reader(schema, keep)


def implementation() -> str:
    """Which reader ``compile_reader`` gives now: ``"native"`` (the extension is built and
    ``LINEAGEWIRE_AVRO_READER`` is not ``python``) or ``"python"``."""
    from ._native import AVAILABLE

    return "native" if AVAILABLE and os.environ.get(READER_ENV, "native") != "python" else "python"


def python_reader(schema: dict[str, Any], keep: Keep | None = None) -> Reader:
    """``compile_reader``'s generated Python reader: the fallback, and the reference the compiled one is
    tested against."""
    return _Generator(schema).build(keep)


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


class _Generator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.recursive = _recursive_names(schema)
        self.named: dict[str, dict[str, Any]] = {}  # every named type by full name, as met
        self.functions: dict[str, str] = {}  # recursive record -> its function's name
        self.skippers: dict[str, str] = {}  # recursive record -> the function that steps over one
        self.bodies: list[list[str]] = []
        self.consts: dict[str, Any] = {"_EPOCH": _EPOCH, "_TD": dt.timedelta, "_Malformed": _Malformed}
        self.count = 0

    def build(self, keep: Keep | None) -> Reader:
        lines: list[str] = []
        out = self.value(lines, 1, self.schema, keep, top=True)
        body = ["def read(d, p):", *lines, "    if p > len(d): raise _Malformed", f"    return {out}, p"]
        src = "\n\n".join("\n".join(b) for b in (*self.bodies, body)) + "\n"
        namespace = dict(self.consts)
        exec(compile(src, f"<avro reader of {self.schema.get('name', 'schema')}>", "exec"), namespace)  # noqa: S102
        return namespace["read"]

    def var(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # Each emitter appends the lines that read one value at indentation ``ind`` and returns the expression
    # (a local name or a constant) holding it.

    def value(self, lines: list[str], ind: int, t: Any, keep: Keep | None = None, top: bool = False) -> str:
        if isinstance(t, str):
            if keep is None and t in self.functions:
                v = self.var("v")
                lines.append(f"{'    ' * ind}{v}, p = {self.functions[t]}(d, p)")
                return v
            if t in self.named:
                t = self.named[t]
            elif keep is not None:
                raise ValueError(f"fields {sorted(keep)} asked of a {t}")
            else:
                return self.primitive(lines, ind, t)
        if isinstance(t, list):
            return self.union(lines, ind, t, keep)
        kind = t["type"]
        if kind == "record":
            return self.record(lines, ind, t, keep, top)
        if keep is not None and kind not in ("array", "map"):
            raise ValueError(f"fields {sorted(keep)} asked of a {kind}, which has none")
        if kind == "enum":
            symbols = self.enum(t)
            i = self.var("i")
            lines.append(f"{'    ' * ind}{i} = d[p]; p += 1")
            lines.append(f"{'    ' * ind}if {i} & 129: raise _Malformed")  # one byte, not negative
            return f"{symbols}[{i} >> 1]"
        if kind in ("array", "map"):
            return self.blocks(lines, ind, t, keep)
        if kind == "long" and t.get("logicalType") == "timestamp-micros":
            return f"(_EPOCH + _TD(0, 0, {self.long(lines, ind)}))"
        if isinstance(kind, str) and "logicalType" not in t:
            return self.primitive(lines, ind, kind)
        raise NotImplementedError(f"no generated reader for {t!r}")

    def enum(self, t: dict[str, Any]) -> str:
        self.named[t["name"]] = t
        symbols = "SYMBOLS_" + t["name"].replace(".", "_")
        self.consts[symbols] = tuple(t["symbols"])
        return symbols

    def record(self, lines: list[str], ind: int, t: dict[str, Any], keep: Keep | None, top: bool) -> str:
        name = t["name"]
        self.named[name] = t
        if keep is not None:
            fields = []
            last = last_kept(t, keep, self.recursive)
            for i, f in enumerate(t["fields"]):
                if top and i > last:
                    break  # the rest of the event is not read
                if f["name"] in keep:
                    fields.append((f["name"], self.value(lines, ind, f["type"], keep[f["name"]])))
                else:
                    self.skip(lines, ind, f["type"])
            v = self.var("r")
            lines.append(f"{'    ' * ind}{v} = {_dict(fields)}")
            return v
        if name in self.functions:  # a named type is walked again where a record using it is
            v = self.var("v")
            lines.append(f"{'    ' * ind}{v}, p = {self.functions[name]}(d, p)")
            return v
        if name in self.recursive:  # a function of its own, called where it is used
            fn = self.var("record_")
            self.functions[name] = fn
            body: list[str] = []
            fields = [(f["name"], self.value(body, 1, f["type"])) for f in t["fields"]]
            self.bodies.append([f"def {fn}(d, p):", *body, f"    return {_dict(fields)}, p"])
            v = self.var("v")
            lines.append(f"{'    ' * ind}{v}, p = {fn}(d, p)")
            return v
        fields = [(f["name"], self.value(lines, ind, f["type"])) for f in t["fields"]]
        v = self.var("r")
        lines.append(f"{'    ' * ind}{v} = {_dict(fields)}")
        return v

    def union(self, lines: list[str], ind: int, branches: list[Any], keep: Keep | None) -> str:
        pad = "    " * ind
        i, v = self.var("i"), self.var("u")
        lines.append(f"{pad}{i} = d[p]; p += 1")  # index n < 64 is the one byte 2n
        for n, branch in enumerate(branches):
            lines.append(f"{pad}{'if' if n == 0 else 'elif'} {i} == {2 * n}:")
            inner = None if keep is None or branch == "null" else keep
            lines.append(f"{pad}    {v} = {self.value(lines, ind + 1, branch, inner)}")
        lines.append(f"{pad}else: raise _Malformed")
        return v

    def blocks(self, lines: list[str], ind: int, t: dict[str, Any], keep: Keep | None) -> str:
        """Arrays and maps: blocks of items, a negative count followed by the block's size, a zero count ends."""
        pad = "    " * ind
        out = self.var("a")
        lines.append(f"{pad}{out} = {'[]' if t['type'] == 'array' else '{}'}")
        count = self.long(lines, ind)
        lines.append(f"{pad}while {count}:")
        lines.append(f"{pad}    if {count} < 0:")
        lines.append(f"{pad}        {count} = -{count}")
        self.long(lines, ind + 2)
        lines.append(f"{pad}    for _ in range({count}):")
        if t["type"] == "array":
            item = self.value(lines, ind + 2, t["items"], keep)
            lines.append(f"{pad}        {out}.append({item})")
        else:
            key = self.primitive(lines, ind + 2, "string")
            item = self.value(lines, ind + 2, t["values"], keep)
            lines.append(f"{pad}        {out}[{key}] = {item}")
        lines.append(f"{pad}    {count} = {self.long(lines, ind + 1)}")
        return out

    def primitive(self, lines: list[str], ind: int, kind: str) -> str:
        pad = "    " * ind
        if kind == "null":
            return "None"
        if kind in ("long", "int"):
            return self.long(lines, ind)
        if kind == "boolean":
            v = self.var("b")
            lines.append(f"{pad}{v} = d[p] != 0; p += 1")
            return v
        if kind in ("string", "bytes"):
            v = self.var("s")
            self.length(lines, ind)
            # a slice past the end is cut short, but then p > len(d), which read() checks at the end
            lines.append(f"{pad}{v} = d[p:e]{'.decode()' if kind == 'string' else ''}; p = e")
            return v
        raise NotImplementedError(f"no generated reader for Avro type {kind!r}")

    def skip(self, lines: list[str], ind: int, t: Any) -> None:
        """Step over one value, building nothing."""
        pad = "    " * ind
        if isinstance(t, str):
            if t in self.skippers:
                lines.append(f"{pad}p = {self.skippers[t]}(d, p)")
            elif t in self.named:
                self.skip(lines, ind, self.named[t])
            elif t == "boolean":
                lines.append(f"{pad}p += 1")
            elif t in ("long", "int"):
                self.long(lines, ind)
            elif t in ("string", "bytes"):
                self.length(lines, ind)
                lines.append(f"{pad}p = e")
            elif t != "null":
                raise NotImplementedError(f"no generated reader for Avro type {t!r}")
        elif isinstance(t, list):
            i = self.var("i")
            lines.append(f"{pad}{i} = d[p]; p += 1")
            for n, branch in enumerate(t):
                lines.append(f"{pad}{'if' if n == 0 else 'elif'} {i} == {2 * n}:")
                lines.append(f"{pad}    pass")
                self.skip(lines, ind + 1, branch)
            lines.append(f"{pad}else: raise _Malformed")
        elif t["type"] == "record":
            self.named[t["name"]] = t
            if t["name"] in self.skippers:  # a named type is walked again where a record using it is
                lines.append(f"{pad}p = {self.skippers[t['name']]}(d, p)")
            elif t["name"] in self.recursive:
                fn = self.skippers[t["name"]] = self.var("skip_")
                body: list[str] = []
                for f in t["fields"]:
                    self.skip(body, 1, f["type"])
                self.bodies.append([f"def {fn}(d, p):", *body, "    return p"])
                lines.append(f"{pad}p = {fn}(d, p)")
            else:
                for f in t["fields"]:
                    self.skip(lines, ind, f["type"])
        elif t["type"] == "enum":
            self.enum(t)
            self.long(lines, ind)
        elif t["type"] in ("array", "map"):
            count = self.long(lines, ind)
            lines.append(f"{pad}while {count}:")
            lines.append(f"{pad}    if {count} < 0:")  # the block's size follows: step over the block
            size = self.long(lines, ind + 2)
            lines.append(f"{pad}        if {size} < 0: raise _Malformed")
            lines.append(f"{pad}        p += {size}")
            lines.append(f"{pad}    else:")
            lines.append(f"{pad}        for _ in range({count}):")
            if t["type"] == "map":
                self.skip(lines, ind + 3, "string")
            self.skip(lines, ind + 3, t["items"] if t["type"] == "array" else t["values"])
            lines.append(f"{pad}    {count} = {self.long(lines, ind + 1)}")
        elif t["type"] == "long" and t.get("logicalType") == "timestamp-micros":
            self.long(lines, ind)
        elif isinstance(t["type"], str) and "logicalType" not in t:
            self.skip(lines, ind, t["type"])
        else:
            raise NotImplementedError(f"no generated reader for {t!r}")

    def length(self, lines: list[str], ind: int) -> None:
        """A string's or bytes' length, read: ``e`` is where its bytes end."""
        pad = "    " * ind
        lines.append(f"{pad}b = d[p]; p += 1")
        lines.append(f"{pad}if b & 129:")  # not a length below 64: the whole varint
        n = self.long(lines, ind + 1, first=False)
        lines.append(f"{pad}    if {n} < 0: raise _Malformed")
        lines.append(f"{pad}    e = p + {n}")
        lines.append(f"{pad}else:")
        lines.append(f"{pad}    e = p + (b >> 1)")

    def long(self, lines: list[str], ind: int, first: bool = True) -> str:
        """A zig-zag varint; one byte (values -64..63) takes the short branch. ``first=False``: its first byte is
        already in ``b``."""
        pad, v = "    " * ind, self.var("n")
        if first:
            lines.append(f"{pad}b = d[p]; p += 1")
        lines += [f"{pad}if b < 128:",
                  f"{pad}    {v} = (b >> 1) ^ -(b & 1)",
                  f"{pad}else:",
                  f"{pad}    x = b & 127; s = 7",
                  f"{pad}    while True:",
                  f"{pad}        b = d[p]; p += 1; x |= (b & 127) << s",
                  f"{pad}        if b < 128: break",
                  f"{pad}        s += 7",
                  f"{pad}    {v} = (x >> 1) ^ -(x & 1)"]
        return v


def last_kept(record: dict[str, Any], keep: Keep, recursive: set[str]) -> int:
    """The index of the last field of ``record`` that ``keep`` names; a ``ValueError`` for a field it lacks,
    ``NotImplementedError`` for fields of a recursive record (both readers' errors)."""
    name = record["name"]
    known = {f["name"] for f in record["fields"]}
    if not known.issuperset(keep):
        raise ValueError(f"{name} has no field {', '.join(sorted(set(keep) - known))}")
    if name in recursive:
        raise NotImplementedError(f"fields of the recursive record {name}")
    return max(i for i, f in enumerate(record["fields"]) if f["name"] in keep)


def _dict(fields: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{name!r}: {expr}" for name, expr in fields) + "}"


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
