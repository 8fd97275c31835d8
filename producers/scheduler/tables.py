"""Materialized tables declared in a YAML file, and their partition formatters.

A file lists tables (Flink's CREATE MATERIALIZED TABLE, as data)::

    tables:
      - identifier: mart.daily_orders          # [catalog.]db.table, required
        query: SELECT order_id, amount, to_date(ts) AS dt FROM raw.orders   # Spark SQL, required
        partition_fields:                      # column -> date formatter of the nominal time
          dt: yyyy-MM-dd                       # Java pattern (like Flink's partition.fields.dt.date-formatter)
        cron: "0 0 2 * * *"                    # or freshness: 1h (one of the two)
        time_zone: Europe/Berlin               # IANA name, default UTC
        owner: data-eng@example.com
        misfire_policy: catch_up               # skip | fire_once | catch_up (default fire_once)
        catchup_cap: 24
        dynamic_options: {compression: zstd}   # table options for each refresh
        execution_config: {spark.sql.shuffle.partitions: "8"}
        namespace: lineagewire                 # job namespace of the refresh runs
        format: parquet                        # used when the runner creates the table

A formatter is a Java ``DateTimeFormatter`` pattern (``yyyy``, ``MM``, ``dd``,
``HH``, ``mm``, ``ss``, ``yy``, ``D``, ``EEE``, quoted literals ``'T'``) or,
if it contains ``%``, a ``strftime`` format. It is applied to the nominal time
in the table's time zone.

``load_tables`` validates everything and raises ``TableDeclarationError``
naming the file, the table, the field, the value and what was expected.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import pathlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from .cron import CronSchedule, zone
from .exceptions import CronError, TableDeclarationError, UnknownTableError
from .limits import MAX_CATCHUP_CAP, MAX_CRON, MAX_TABLE, MAX_ZONE

__all__ = [
    "MaterializedTable",
    "TableCatalog",
    "format_partition",
    "load_tables",
    "parse_freshness",
    "parse_tables",
    "strftime_pattern",
]

MISFIRE_POLICIES = ("skip", "fire_once", "catch_up")
#: longest text per field of a declaration (characters); docs/scheduler.md lists them
_TEXT_LIMITS = {"identifier": MAX_TABLE, "query": 256 * 1024, "owner": 200, "description": 2000, "namespace": 200,
                "format": 40, "cron": MAX_CRON, "time_zone": MAX_ZONE, "freshness": 40}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KNOWN_KEYS = {"identifier", "query", "partition_fields", "cron", "freshness", "time_zone", "owner", "misfire_policy",
               "catchup_cap", "dynamic_options", "execution_config", "namespace", "format", "description"}

# Java DateTimeFormatter letters -> strftime; longest first so 'yyyy' wins over 'yy'.
_JAVA = [
    ("yyyy", "%Y"), ("uuuu", "%Y"), ("yy", "%y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"), ("M", "%-m"),
    ("dd", "%d"), ("d", "%-d"), ("DDD", "%j"), ("D", "%-j"), ("HH", "%H"), ("H", "%-H"), ("hh", "%I"), ("h", "%-I"),
    ("mm", "%M"), ("m", "%-M"), ("ss", "%S"), ("s", "%-S"), ("SSSSSS", "%f"), ("EEEE", "%A"), ("EEE", "%a"),
    ("a", "%p"), ("ww", "%V"), ("XXX", "%:z"), ("Z", "%z"),
]
_NO_PAD = {"%-m": "%m", "%-d": "%d", "%-j": "%j", "%-H": "%H", "%-I": "%I", "%-M": "%M", "%-S": "%S"}


@functools.lru_cache(maxsize=1024)
def strftime_pattern(pattern: str) -> str:
    """Translate a Java date pattern to strftime (a pattern with ``%`` is returned as is).

    Raises ValueError naming the letter that has no translation.
    """
    if "%" in pattern:
        return pattern
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError(f"unclosed quote at position {i}")
            out.append("'" if end == i + 1 else pattern[i + 1:end])
            i = end + 1
            continue
        if ch.isalpha():
            for java, py in _JAVA:
                if pattern.startswith(java, i):
                    out.append(py)
                    i += len(java)
                    break
            else:
                raise ValueError(f"pattern letter {ch!r} at position {i} is not supported; use yyyy MM dd HH mm ss "
                                 "(Java) or a strftime format with %")
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=16_384)
def format_partition(pattern: str, nominal_time: dt.datetime, tz: str = "UTC") -> str:
    """The partition value for ``nominal_time`` (UTC) rendered in ``tz`` with ``pattern``."""
    local = nominal_time.astimezone(zone(tz))
    fmt = strftime_pattern(pattern)
    # '%-d' (no padding) is glibc-only; do it by hand so results do not depend on the platform.
    for token, padded in _NO_PAD.items():
        if token in fmt:
            fmt = fmt.replace(token, str(int(local.strftime(padded))))
    return local.strftime(fmt)


_FRESHNESS = re.compile(r"^\s*(\d+)\s*(s|sec|second|seconds|m|min|minute|minutes|h|hour|hours|d|day|days)\s*$", re.I)


def parse_freshness(text: str) -> str:
    """A freshness ('30s', '15 min', '1h', '1d') as the cron expression Flink derives from it.

    Like Flink, the interval must divide its next larger unit (a minute, hour or day) evenly.
    """
    m = _FRESHNESS.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a freshness; expected e.g. '30s', '15min', '1h', '1d'")
    n, unit = int(m.group(1)), m.group(2).lower()[0]
    if n <= 0:
        raise ValueError(f"{text!r}: freshness must be positive")
    if unit == "s":
        if 60 % n:
            raise ValueError(f"{text!r}: seconds must divide 60")
        return f"*/{n} * * * * *" if n < 60 else "0 * * * * *"
    if unit == "m":
        if 60 % n:
            raise ValueError(f"{text!r}: minutes must divide 60")
        return f"0 */{n} * * * *" if n < 60 else "0 0 * * * *"
    if unit == "h":
        if 24 % n:
            raise ValueError(f"{text!r}: hours must divide 24")
        return f"0 0 */{n} * * *" if n < 24 else "0 0 0 * * *"
    if n != 1:
        raise ValueError(f"{text!r}: only '1d' is supported for days")
    return "0 0 0 * * *"


@dataclass(frozen=True)
class MaterializedTable:
    """One materialized table: what to compute, how to partition it, and when to refresh it."""

    identifier: str
    query: str
    partition_fields: dict[str, str] = field(default_factory=dict)
    cron: str | None = None
    time_zone: str = "UTC"
    owner: str | None = None
    misfire_policy: str = "fire_once"
    catchup_cap: int = 10
    dynamic_options: dict[str, str] = field(default_factory=dict)
    execution_config: dict[str, str] = field(default_factory=dict)
    namespace: str = "lineagewire"
    format: str = "parquet"
    description: str | None = None

    @property
    def job_name(self) -> str:
        """The refresh job's name; the runner reports its runs under this name."""
        return f"refresh {self.identifier}"

    def static_partitions(self, nominal_time: dt.datetime, tz: str | None = None) -> dict[str, str]:
        """Partition values of the refresh for ``nominal_time``."""
        return {col: format_partition(fmt, nominal_time, tz or self.time_zone)
                for col, fmt in self.partition_fields.items()}

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _table(raw: Any, where: str) -> MaterializedTable:
    if not isinstance(raw, dict):
        raise TableDeclarationError(f"{where}: expected a mapping with identifier and query, got {raw!r}")
    unknown = sorted(set(raw) - _KNOWN_KEYS)
    name = raw.get("identifier")
    if not isinstance(name, str) or not _IDENT.match(name):
        raise TableDeclarationError(f"{where}: identifier={name!r}; expected [catalog.]db.table made of letters, "
                                    "digits and _")
    where = f"{where} ({name})"
    if unknown:
        raise TableDeclarationError(f"{where}: unknown field(s) {', '.join(unknown)}; expected some of "
                                    f"{', '.join(sorted(_KNOWN_KEYS))}")
    query = raw.get("query")
    if not isinstance(query, str) or not query.strip():
        raise TableDeclarationError(f"{where}: query={query!r}; expected a non-empty Spark SQL SELECT")
    if query.strip().rstrip(";").count(";"):
        raise TableDeclarationError(f"{where}: query has more than one statement; expected a single SELECT")
    parts = raw.get("partition_fields") or {}
    if not isinstance(parts, dict):
        raise TableDeclarationError(f"{where}: partition_fields={parts!r}; expected a mapping column -> "
                                    "date formatter such as {{dt: yyyy-MM-dd}}")
    tz = raw.get("time_zone", "UTC")
    try:
        zone(str(tz))
    except CronError as exc:
        raise TableDeclarationError(f"{where}: {exc}") from exc
    probe = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    for col, fmt in parts.items():
        if not isinstance(col, str) or not _COLUMN.match(col):
            raise TableDeclarationError(f"{where}: partition field {col!r}; expected a column name")
        if not isinstance(fmt, str) or not fmt:
            raise TableDeclarationError(f"{where}: partition_fields.{col}.date-formatter={fmt!r}; expected a "
                                        "pattern such as 'yyyy-MM-dd'")
        try:
            format_partition(fmt, probe, str(tz))
        except ValueError as exc:
            raise TableDeclarationError(f"{where}: partition_fields.{col}.date-formatter={fmt!r}: {exc}") from exc
    cron, freshness = raw.get("cron"), raw.get("freshness")
    if cron is not None and freshness is not None:
        raise TableDeclarationError(f"{where}: both cron={cron!r} and freshness={freshness!r}; expected one of them")
    if freshness is not None:
        try:
            cron = parse_freshness(str(freshness))
        except ValueError as exc:
            raise TableDeclarationError(f"{where}: freshness: {exc}") from exc
    if cron is not None and not str(cron).strip():
        raise TableDeclarationError(f"{where}: cron={cron!r} is empty; expected 5 fields, or 6 with seconds first, "
                                    "or leave cron out")
    if cron is not None:
        try:
            CronSchedule(str(cron), str(tz))
        except CronError as exc:
            raise TableDeclarationError(f"{where}: {exc}") from exc
    policy = str(raw.get("misfire_policy", "fire_once")).lower()
    if policy not in MISFIRE_POLICIES:
        raise TableDeclarationError(f"{where}: misfire_policy={policy!r}; expected one of "
                                    f"{', '.join(MISFIRE_POLICIES)}")
    cap = raw.get("catchup_cap", 10)
    if not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= MAX_CATCHUP_CAP:
        raise TableDeclarationError(f"{where}: catchup_cap={cap!r}; expected an integer from 1 to {MAX_CATCHUP_CAP}")
    for key, limit in _TEXT_LIMITS.items():
        if raw.get(key) is not None and len(str(raw[key])) > limit:
            raise TableDeclarationError(f"{where}: {key} has {len(str(raw[key]))} characters; expected at most "
                                        f"{limit}")
    maps: dict[str, dict[str, str]] = {}
    for key in ("dynamic_options", "execution_config"):
        value = raw.get(key) or {}
        if not isinstance(value, dict):
            raise TableDeclarationError(f"{where}: {key}={value!r}; expected a mapping of strings")
        maps[key] = {str(k): str(v) for k, v in value.items()}
    return MaterializedTable(
        identifier=name, query=query.strip().rstrip(";").strip(), partition_fields={str(k): str(v) for k, v in
                                                                                    parts.items()},
        cron=str(cron) if cron is not None else None, time_zone=str(tz),
        owner=str(raw["owner"]) if raw.get("owner") is not None else None, misfire_policy=policy, catchup_cap=cap,
        dynamic_options=maps["dynamic_options"], execution_config=maps["execution_config"],
        namespace=str(raw.get("namespace", "lineagewire")), format=str(raw.get("format", "parquet")),
        description=raw.get("description"),
    )


def parse_tables(doc: Any, source: str = "<tables>") -> list[MaterializedTable]:
    """Validate an already parsed document (``{'tables': [...]}`` or a bare list)."""
    items = doc.get("tables") if isinstance(doc, dict) else doc
    if items is None:
        items = []
    if not isinstance(items, list):
        raise TableDeclarationError(f"{source}: expected a list under 'tables', got {type(items).__name__}")
    tables: list[MaterializedTable] = []
    seen: set[str] = set()
    for i, raw in enumerate(items):
        t = _table(raw, f"{source}: tables[{i}]")
        if t.identifier in seen:
            raise TableDeclarationError(f"{source}: tables[{i}]: identifier {t.identifier!r} is declared twice")
        seen.add(t.identifier)
        tables.append(t)
    return tables


def load_tables(path: str | os.PathLike[str]) -> list[MaterializedTable]:
    """Read and validate a tables file."""
    p = pathlib.Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise TableDeclarationError(f"tables file {str(p)!r} cannot be read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise TableDeclarationError(f"tables file {str(p)!r} is not valid YAML: {exc}") from exc
    tables = parse_tables(doc, str(p))
    if not tables:
        what = "is empty" if doc is None else "declares no tables"
        raise TableDeclarationError(f"tables file {str(p)!r} {what}; expected a 'tables:' list with at least one "
                                    "table (identifier and query)")
    return tables


class TableCatalog:
    """The declared tables by identifier; ``get`` raises UnknownTableError naming the known ones."""

    def __init__(self, tables: Iterable[MaterializedTable] = ()) -> None:
        self._tables = {t.identifier: t for t in tables}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str] | None) -> TableCatalog:
        return cls(load_tables(path) if path else [])

    def get(self, identifier: str) -> MaterializedTable:
        try:
            return self._tables[identifier]
        except KeyError:
            known = ", ".join(sorted(self._tables)) or "none declared"
            shown = repr(identifier) if len(identifier) <= MAX_TABLE else f"of {len(identifier)} characters"
            raise UnknownTableError(f"table {shown} is not declared; known tables: {known}") from None

    def add(self, table: MaterializedTable) -> None:
        self._tables[table.identifier] = table

    def __iter__(self):  # noqa: ANN204
        return iter(self._tables.values())

    def __len__(self) -> int:
        return len(self._tables)
