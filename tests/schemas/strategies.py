"""Hypothesis strategies that build valid events of every kind from the .avsc files themselves.

Generating from the schema (not from hand-written dicts) means a field added
to the contract is exercised without touching the tests.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import strategies as st

from lineagewire.schemas import _repository

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_times = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 1, 1),
                      timezones=st.just(dt.UTC))
_text = st.text(max_size=20)


def for_schema(schema: Any, named: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    if isinstance(schema, str):
        if schema in named:
            # Deferred: a recursive type (SchemaField.fields) is expanded only when drawn.
            return st.deferred(lambda: for_schema(named[schema], named, depth))
        return {
            "null": st.none(),
            "boolean": st.booleans(),
            "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1),
            "float": st.floats(width=32, allow_nan=False),
            "double": st.floats(allow_nan=False),
            "string": _text,
            "bytes": st.binary(max_size=20),
        }[schema]
    if isinstance(schema, list):
        return st.one_of(*[for_schema(s, named, depth) for s in schema])
    kind = schema["type"]
    if schema.get("logicalType") == "timestamp-micros":
        return _times
    if kind == "record":
        named[schema["name"]] = schema
        return st.fixed_dictionaries({f["name"]: for_schema(f["type"], named, depth + 1) for f in schema["fields"]})
    if kind == "enum":
        named[schema["name"]] = schema
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        # Recursive types (SchemaField.fields) stop growing past a small depth.
        return st.lists(for_schema(schema["items"], named, depth + 1), max_size=0 if depth > 4 else 3)
    if kind == "map":
        return st.dictionaries(_text, for_schema(schema["values"], named, depth + 1), max_size=3)
    return for_schema(kind, named, depth)


def events(full_name: str) -> st.SearchStrategy[dict[str, Any]]:
    es = _repository.current()[full_name]

    def fix(event: dict[str, Any]) -> dict[str, Any]:
        event["header"]["schema_name"] = full_name
        return event

    return for_schema(es.schema, {}).map(fix)
