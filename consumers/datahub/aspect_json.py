"""``pre_json_transform(aspect.to_obj())`` of acryl-datahub's generated classes, compiled once per Avro schema.

acryl-datahub renders an aspect with avrogen's generic converter: a full validation walk of the object
against its Avro schema, then a second walk that converts it, resolving every field's default from the
schema's JSON again on each visit; ``pre_json_transform`` then walks the result a third time (dropping
``None`` values, renaming ``com.linkedin.pegasus2avro.`` union branches). That is 15 to 300 µs per aspect,
most of this service's time.

``aspect_obj`` does the same in one walk with a function built per schema (from the class's own
``RECORD_SCHEMA``, nothing written per aspect kind): each value is checked as avrogen checks it and
converted as avrogen converts it. Whatever the compiled walk is not sure to reproduce exactly (a value
of an unexpected type, a union with several non-null branches a plain value could match, ``fixed``,
a record or map with a ``fieldDiscriminator``) raises ``_Slow`` inside, and the aspect is rendered by
acryl-datahub's own path instead, which also raises avrogen's error for an invalid aspect.
``tests/consumers/datahub/test_aspect_json.py`` checks it equals acryl-datahub's rendering for every
aspect kind the translator builds and falls back for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from avro import schema as avro_schema
from avrogen.dict_wrapper import DictWrapper
from datahub.emitter.serialization_helper import pre_json_transform

__all__ = ["aspect_obj", "slow_obj"]

_FROM = "com.linkedin.pegasus2avro."
_TO = "com.linkedin."
_INT = (-(1 << 31), (1 << 31) - 1)
_LONG = (-(1 << 63), (1 << 63) - 1)

_MISSING = object()
Conv = Callable[[Any], Any]


class _Slow(Exception):
    """The compiled walk cannot vouch for this value: render it the slow (acryl-datahub's) way."""


def slow_obj(aspect: Any) -> Any:
    """acryl-datahub's rendering: what the file sink writes under ``aspect.json``."""
    return pre_json_transform(aspect.to_obj())


def aspect_obj(aspect: Any) -> Any:
    """``slow_obj(aspect)``, usually without its cost (see the module docstring)."""
    conv = _COMPILED.get(type(aspect))
    if conv is None:
        conv = _COMPILED[type(aspect)] = _Compiler().record(type(aspect).RECORD_SCHEMA)
    try:
        return conv(aspect)
    except _Slow:
        return slow_obj(aspect)


_COMPILED: dict[type, Conv] = {}


def _isinstance(*types: type) -> Callable[[Any], Callable[[Any], bool]]:
    return lambda s: lambda v: isinstance(v, types)


def _in_range(lo: int, hi: int) -> Callable[[Any], Callable[[Any], bool]]:
    return lambda s: lambda v: isinstance(v, int) and lo <= v <= hi


#: schema type -> avro's own validation of a plain value against that branch (as avrogen runs it)
_ACCEPTS: dict[str, Callable[[Any], Callable[[Any], bool]]] = {
    "boolean": _isinstance(bool), "string": _isinstance(str), "bytes": _isinstance(str, bytes),
    "int": _in_range(*_INT), "long": _in_range(*_LONG), "float": _isinstance(int, float),
    "double": _isinstance(int, float), "enum": lambda s: list(s.symbols).__contains__,
}


def _wrap_name(s: Any) -> str:
    """The key avrogen wraps a union branch in, after ``pre_json_transform``'s renaming."""
    name = s.fullname.lstrip(".") if isinstance(s, avro_schema.NamedSchema) else s.type
    return _TO + name[len(_FROM):] if name.startswith(_FROM) else name


class _Compiler:
    def __init__(self) -> None:
        self._records: dict[str, Conv] = {}
        self._pending: dict[str, Conv | None] = {}

    def of(self, s: Any) -> Conv:
        t = s.type
        if t == "null":
            def null(v: Any) -> Any:
                if v is not None:
                    raise _Slow
                return None
            return null
        if t == "string":
            def string(v: Any) -> Any:
                if not isinstance(v, str):
                    raise _Slow
                return v
            return string
        if t == "bytes":
            return self.of(avro_schema.PrimitiveSchema("string"))  # a str is taken as it is; bytes go slow
        if t == "boolean":
            def boolean(v: Any) -> Any:
                if type(v) is not bool:
                    raise _Slow
                return v
            return boolean
        if t in ("int", "long"):
            lo, hi = _INT if t == "int" else _LONG

            def integer(v: Any) -> Any:
                if type(v) is not int or not lo <= v <= hi:
                    raise _Slow
                return v
            return integer
        if t in ("float", "double"):
            def real(v: Any) -> Any:
                if type(v) is not float and type(v) is not int:
                    raise _Slow
                return v
            return real
        if t == "enum":
            symbols = frozenset(s.symbols)

            def enum(v: Any) -> Any:
                if type(v) is not str or v not in symbols:
                    raise _Slow
                return v
            return enum
        if t == "array":
            return self.array(s)
        if t == "map":
            return self.map(s)
        if t == "union":
            return self.union(s, in_array=False)
        if t == "record":
            return self.record(s)

        def slow(v: Any) -> Any:  # fixed, error, request: not in DataHub's aspects
            raise _Slow
        return slow

    def array(self, s: Any) -> Conv:
        items = s.items
        item = self.union(items, in_array=True) if items.type == "union" else self.of(items)

        def array(v: Any) -> Any:
            if type(v) is not list:
                raise _Slow
            return [item(x) for x in v]
        return array

    def map(self, s: Any) -> Conv:
        value = self.of(s.values)

        def mapping(v: Any) -> Any:
            if type(v) is not dict or "fieldDiscriminator" in v:
                raise _Slow
            out = {}
            for k, x in v.items():
                if type(k) is not str:
                    raise _Slow
                out[k] = value(x)
            if len(out) == 1:
                k = next(iter(out))
                if k.startswith(_FROM):
                    return {_TO + k[len(_FROM):]: out[k]}
            return {k: x for k, x in out.items() if x is not None}
        return mapping

    def union(self, s: Any, *, in_array: bool) -> Conv:
        branches = [b for b in s.schemas if b.type != "null"]
        nullable = len(branches) < len(s.schemas)
        # avrogen leaves out the branch name of an unambiguous union (at most one branch not null; with an
        # enum: exactly enum + null), except for the items of an array.
        if any(b.type == "enum" for b in s.schemas):
            bare = not in_array and nullable and len(s.schemas) == 2
        else:
            bare = not in_array and len(branches) <= 1
        records = {b.fullname: (self.of(b), _wrap_name(b)) for b in branches if b.type == "record"}
        plain = [b for b in branches if b.type != "record"]
        # A plain value takes avrogen's choice: the last branch whose validation accepts it (the first boolean).
        tests = [(_ACCEPTS[b.type](b), b.type == "boolean", (self.of(b), _wrap_name(b))) for b in plain] \
            if all(b.type in _ACCEPTS for b in plain) else None
        single = tests[0][2] if tests and len(tests) == 1 else (self.of(plain[0]), _wrap_name(plain[0])) \
            if len(plain) == 1 else None

        def union(v: Any) -> Any:
            if v is None:
                if not nullable:
                    raise _Slow
                return None
            hit = None
            if isinstance(v, DictWrapper):
                hit = records.get(type(v).RECORD_SCHEMA.fullname)
            elif single is not None and not (records and isinstance(v, dict)):
                hit = single  # its own conversion checks the value
            elif tests is not None and not isinstance(v, (dict, list)):
                for accepts, first, branch in tests:
                    if accepts(v):
                        hit = branch
                        if first:
                            break
            if hit is None:
                raise _Slow
            out = hit[0](v)
            return out if bare else {hit[1]: out}
        return union

    def record(self, s: Any) -> Conv:
        name = s.fullname
        done = self._records.get(name)
        if done is not None:
            return done
        if name in self._pending:  # a recursive schema: look the function up when it runs
            return lambda v: self._records[name](v)
        self._pending[name] = None
        if any(f.name == "fieldDiscriminator" for f in s.fields):
            def slow(v: Any) -> Any:
                raise _Slow
            self._records[name] = slow
            return slow
        record = self._generate(s)
        self._records[name] = record
        return record

    def _generate(self, s: Any) -> Conv:
        """The record's converter as Python source, so that a string, integer or boolean field (alone or
        with null) is checked inline rather than through a function call; other fields call ``of(type)``."""
        env: dict[str, Any] = {"s": s, "name": s.fullname, "DictWrapper": DictWrapper, "_Slow": _Slow,
                               "M": _MISSING}
        code = ["def record(v):",
                "    if getattr(type(v), 'RECORD_SCHEMA', None) is not s and (",
                "            not isinstance(v, DictWrapper) or type(v).RECORD_SCHEMA.fullname != name):",
                "        raise _Slow",
                "    get = v._inner_dict.get",
                "    out = {}"]
        for i, f in enumerate(s.fields):
            key, t = repr(f.name), f.type
            optional = t.type == "union" and len(t.schemas) == 2 and any(b.type == "null" for b in t.schemas)
            inner = next(b for b in t.schemas if b.type != "null") if optional else t
            check = {"string": "not isinstance(x, str)", "boolean": "type(x) is not bool",
                     "int": f"type(x) is not int or not {_INT[0]} <= x <= {_INT[1]}",
                     "long": f"type(x) is not int or not {_LONG[0]} <= x <= {_LONG[1]}"}.get(inner.type)
            code.append(f"    x = get({key}, M)")  # missing (M): avrogen would use the default; fails any check
            if check is None:
                env[f"c{i}"] = self.of(t)
                code += ["    if x is M:", "        raise _Slow", f"    x = c{i}(x)", "    if x is not None:",
                         f"        out[{key}] = x"]
            elif optional:
                code += ["    if x is not None:", f"        if {check}:", "            raise _Slow",
                         f"        out[{key}] = x"]
            else:
                code += [f"    if {check}:", "        raise _Slow", f"    out[{key}] = x"]
        code.append("    return out")
        exec("\n".join(code), env)  # noqa: S102 - source built above from the schema's field names (repr'd)
        record: Conv = env["record"]
        return record
