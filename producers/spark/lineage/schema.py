"""Spark data types (as their JSON) to the contract's schema fields."""

from __future__ import annotations

import json
import re
from typing import Any

from lineagewire.schemas.events import SchemaField, schema_field

from .plan import Attribute

__all__ = ["fields_of_attributes", "fields_of_catalog_string", "fields_of_struct_json", "type_name"]

# JSON names of Spark types -> the names Spark SQL prints (DataType.simpleString).
_SIMPLE = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


def type_name(data_type: Any) -> str:
    """'bigint', 'decimal(10,2)', 'struct', 'array', 'map' for a Spark type's JSON."""
    if isinstance(data_type, str):
        return _SIMPLE.get(data_type, data_type)
    if isinstance(data_type, dict):
        kind = data_type.get("type")
        if kind == "udt":
            return str(data_type.get("sqlType", {}).get("type", "udt")) if isinstance(
                data_type.get("sqlType"), dict) else type_name(data_type.get("sqlType"))
        return str(kind or "unknown")
    return "unknown"


def _nested(data_type: Any) -> list[SchemaField]:
    if not isinstance(data_type, dict):
        return []
    kind = data_type.get("type")
    if kind == "struct":
        return fields_of_struct_json(data_type)
    if kind == "array":
        elem = data_type.get("elementType")
        return [schema_field("_element", type_name(elem), bool(data_type.get("containsNull", True)),
                             fields=_nested(elem))]
    if kind == "map":
        key, value = data_type.get("keyType"), data_type.get("valueType")
        return [schema_field("key", type_name(key), False, fields=_nested(key)),
                schema_field("value", type_name(value), bool(data_type.get("valueContainsNull", True)),
                             fields=_nested(value))]
    if kind == "udt":
        return _nested(data_type.get("sqlType"))
    return []


def fields_of_struct_json(struct: Any) -> list[SchemaField]:
    """Fields of a StructType given as JSON (a dict, or the string ``StructType.json()`` returns)."""
    if isinstance(struct, str):
        struct = json.loads(struct)
    if not isinstance(struct, dict):
        return []
    out: list[SchemaField] = []
    for f in struct.get("fields") or []:
        meta = f.get("metadata") or {}
        comment = meta.get("comment") if isinstance(meta, dict) else None
        out.append(schema_field(str(f.get("name")), type_name(f.get("type")), bool(f.get("nullable", True)),
                                comment if isinstance(comment, str) else None, _nested(f.get("type"))))
    return out


def fields_of_attributes(attrs: list[Attribute]) -> list[SchemaField]:
    return [schema_field(a.name, type_name(a.data_type), a.nullable, a.comment, _nested(a.data_type))
            for a in attrs]


class _CatalogParser:
    """Reads ``StructType.catalogString`` ('struct<a:int,b:array<struct<c:string>>>').

    Spark writes it in well under a millisecond where ``StructType.json()`` takes
    tens on a wide schema; it has no nullability, which the plan JSON gives.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _peek(self, token: str) -> bool:
        return self.text.startswith(token, self.pos)

    def _expect(self, token: str) -> None:
        if not self._peek(token):
            raise ValueError(f"catalog string {self.text[:80]!r}: expected {token!r} at {self.pos}")
        self.pos += len(token)

    def name(self) -> str:
        if self._peek("`"):
            self.pos += 1
            out = []
            while self.pos < len(self.text):
                ch = self.text[self.pos]
                if ch == "`":
                    if self._peek("``"):
                        out.append("`")
                        self.pos += 2
                        continue
                    self.pos += 1
                    return "".join(out)
                out.append(ch)
                self.pos += 1
            raise ValueError(f"catalog string {self.text[:80]!r}: unterminated quoted name")
        end = self.text.index(":", self.pos)
        out_name = self.text[self.pos:end]
        self.pos = end
        return out_name

    def data_type(self) -> SchemaField:
        """A field of type at the current position; its name is set by the caller."""
        if self._peek("struct<"):
            self.pos += len("struct<")
            fields = []
            while not self._peek(">"):
                fields.append(self.field())
                if self._peek(","):
                    self.pos += 1
            self.pos += 1
            return schema_field("", "struct", fields=fields)
        if self._peek("array<"):
            self.pos += len("array<")
            elem = self.data_type()
            elem["name"] = "_element"
            self._expect(">")
            return schema_field("", "array", fields=[elem])
        if self._peek("map<"):
            self.pos += len("map<")
            key = self.data_type()
            key["name"], key["nullable"] = "key", False
            self._expect(",")
            value = self.data_type()
            value["name"] = "value"
            self._expect(">")
            return schema_field("", "map", fields=[key, value])
        start, depth = self.pos, 0
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif depth == 0 and ch in ",>":
                break
            self.pos += 1
        return schema_field("", self.text[start:self.pos])

    def field(self) -> SchemaField:
        name = self.name()
        self._expect(":")
        f = self.data_type()
        f["name"] = name
        return f


#: A field of a flat struct: a name without quotes or ':', a type without nesting (``decimal(10,2)``).
_FLAT_FIELD = re.compile(r"([^:,`<>]+):([^:,`<>(]+(?:\([^)]*\))?)(?:,|$)")


def _flat_fields(inner: str) -> list[SchemaField] | None:
    """The fields of a struct without nesting or quoted names in one regular expression, else None."""
    if "<" in inner or "`" in inner:
        return None
    fields = []
    end = 0
    for m in _FLAT_FIELD.finditer(inner):
        if m.start() != end:
            return None
        end = m.end()
        fields.append(schema_field(m.group(1), m.group(2)))
    return fields if end == len(inner) else None


def fields_of_catalog_string(text: str, nullable: list[bool] | None = None) -> list[SchemaField]:
    """Top-level fields of a ``struct<...>`` catalog string; ``nullable`` per field when known."""
    flat = _flat_fields(text[7:-1]) if text.startswith("struct<") and text.endswith(">") else None
    if flat is not None:  # a wide table's schema, mostly: 1,000 fields read a character at a time took 5 ms
        fields = flat
    else:
        root = _CatalogParser(text).data_type()
        fields = root["fields"] if root["type"] == "struct" else []
    if nullable and len(nullable) == len(fields):
        for f, n in zip(fields, nullable, strict=True):
            f["nullable"] = n
    return fields
