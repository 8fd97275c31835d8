"""Spark data types (as their JSON) to the contract's schema fields."""

from __future__ import annotations

import json
from typing import Any

from lineagewire.schemas.events import SchemaField, schema_field

from .plan import Attribute

__all__ = ["fields_of_attributes", "fields_of_struct_json", "type_name"]

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
