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
      - identifier: mart.orders_by_customer
        query: SELECT customer_id, sum(amount) AS amount FROM raw.orders GROUP BY customer_id
        trigger: upstream                      # refresh when an input gets a new successful write
        debounce: 30s                          # writes within 30 s of the first make one refresh (default 30s)
        min_interval: 5min                     # floor: no upstream refresh sooner than this after the last
        max_staleness: 1h                      # ceiling: refresh at least this often, writes or not
        hold_on: [UPSTREAM_FAILED, UPSTREAM_RUNNING]   # default all but INPUT_STALE

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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from . import holds
from .cron import CronSchedule, zone
from .exceptions import CronError, TableDeclarationError, UnknownTableError
from .limits import MAX_CATCHUP_CAP, MAX_CRON, MAX_TABLE, MAX_ZONE

__all__ = [
    "DEFAULT_HOLD_ON",
    "HOLD_CONDITIONS",
    "MaterializedTable",
    "TableCatalog",
    "format_partition",
    "load_tables",
    "parse_duration",
    "parse_freshness",
    "parse_tables",
    "strftime_pattern",
]

MISFIRE_POLICIES = ("skip", "fire_once", "catch_up")
TRIGGERS = ("upstream",)
#: the contract's HoldCondition symbols a table may hold on (OTHER is only what old readers see of new ones)
HOLD_CONDITIONS: tuple[str, ...] = holds.CONDITIONS
#: all but staleness (``holds.DEFAULT_HOLD_ON``), in the order reasons are listed
DEFAULT_HOLD_ON = tuple(c for c in holds.CONDITIONS if c in holds.DEFAULT_HOLD_ON)
#: the longest debounce, floor or ceiling (a year): longer overflows nothing but means "never"
MAX_DURATION = 366 * 86_400.0
#: longest text per field of a declaration (characters); docs/scheduler.md lists them
_TEXT_LIMITS = {"identifier": MAX_TABLE, "query": 256 * 1024, "owner": 200, "description": 2000, "namespace": 200,
                "format": 40, "cron": MAX_CRON, "time_zone": MAX_ZONE, "freshness": 40}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

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


_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_duration(text: Any) -> float:
    """Seconds of a duration such as '30s', '90 s', '15min', '2h', '1d' (any whole number of a unit)."""
    m = _FRESHNESS.match(str(text))
    if not m or isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration; expected e.g. '30s', '15min', '2h', '1d'")
    seconds = float(int(m.group(1)) * _UNIT_SECONDS[m.group(2).lower()[0]])
    if seconds > MAX_DURATION:
        raise ValueError(f"{text!r} is longer than a year; expected at most 366d")
    return seconds


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
    #: "upstream": refresh when an input gets a new successful write; None: only by cron or by hand
    trigger: str | None = None
    #: seconds: writes within this of the first make one upstream refresh
    debounce: float = 30.0
    #: seconds: floor between upstream refreshes (None: none)
    min_interval: float | None = None
    #: seconds: ceiling; an upstream table is refreshed at least this often (None: only on writes)
    max_staleness: float | None = None
    #: HoldCondition names that hold a refresh of this table
    hold_on: tuple[str, ...] = DEFAULT_HOLD_ON
    #: the freshness the cron was derived from, as declared (its refreshes say trigger FRESHNESS)
    freshness: str | None = None

    @property
    def upstream(self) -> bool:
        """Whether new writes to the inputs trigger refreshes."""
        return self.trigger == "upstream"

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


class _Unnamed(ValueError):
    """A declaration's problem found before it has a name to show (not a mapping, no valid identifier)."""


def _within_limit(key: str, value: Any) -> Any:
    if value is not None and len(str(value)) > _TEXT_LIMITS[key]:
        raise ValueError(f"{key} has {len(str(value))} characters; expected at most {_TEXT_LIMITS[key]}")
    return value


def _seconds(name: str, value: Any) -> float:
    """Seconds of a declared duration (a number of seconds, or text such as '30s'), from 0 to a year."""
    try:
        seconds = float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
            else parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if not 0 <= seconds <= MAX_DURATION:
        raise ValueError(f"{name}={value!r}; expected from 0 seconds to 366d")
    return seconds


class TableDeclaration(BaseModel):
    """One table as a file declares it. Each field is checked by a validator that raises the message naming
    the field, the value and what was expected (``_table`` adds the file and the table): pydantic's own type
    messages never show, so a validator runs before its field's type (``mode="before"``) and on defaults too.
    A check that needs another field (a formatter or a cron in the time zone) reads it from ``info.data``,
    so fields are declared in the order they are checked in."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    identifier: str = None  # type: ignore[assignment]  # required: its validator says so, in its words
    query: str = None  # type: ignore[assignment]
    trigger: str | None = None
    time_zone: str = "UTC"
    partition_fields: dict[str, str] = Field(default_factory=dict)
    freshness: Any = None
    cron: str | None = None
    debounce: float = 30.0
    min_interval: float | None = None
    max_staleness: float | None = None
    hold_on: tuple[str, ...] = DEFAULT_HOLD_ON
    misfire_policy: str = "fire_once"
    catchup_cap: int = 10
    owner: str | None = None
    description: Any = None
    namespace: str = "lineagewire"
    format: str = "parquet"
    dynamic_options: dict[str, str] = Field(default_factory=dict)
    execution_config: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise _Unnamed(f"expected a mapping with identifier and query, got {raw!r}")
        return raw

    @field_validator("identifier", mode="before")
    @classmethod
    def _identifier(cls, name: Any) -> str:
        if not isinstance(name, str) or not _IDENT.match(name):
            raise _Unnamed(f"identifier={name!r}; expected [catalog.]db.table made of letters, digits and _")
        return _within_limit("identifier", name)

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, query: Any) -> str:
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query={query!r}; expected a non-empty Spark SQL SELECT")
        if query.strip().rstrip(";").count(";"):
            raise ValueError("query has more than one statement; expected a single SELECT")
        return _within_limit("query", query).strip().rstrip(";").strip()

    @field_validator("trigger", mode="before")
    @classmethod
    def _trigger(cls, trigger: Any, info: ValidationInfo) -> str | None:
        """``upstream`` needs a query that reads something: with no input, no write can ever trigger it."""
        if trigger is None:
            return None
        if str(trigger).lower() not in TRIGGERS:
            raise ValueError(f"trigger={trigger!r}; expected {' or '.join(TRIGGERS)} (or leave it out)")
        if "query" in info.data:  # a bad query is reported as such
            from .sqlreads import QueryInputsError, query_tables

            try:
                query_tables(info.data["query"])
            except QueryInputsError as exc:
                raise ValueError(f"trigger={trigger!r}: {exc}") from None
        return str(trigger).lower()

    @field_validator("time_zone", mode="before")
    @classmethod
    def _time_zone(cls, tz: Any) -> str:
        try:
            zone(str(tz))
        except CronError as exc:
            raise ValueError(str(exc)) from None
        return str(_within_limit("time_zone", tz))

    @field_validator("partition_fields", mode="before")
    @classmethod
    def _partition_fields(cls, parts: Any, info: ValidationInfo) -> dict[str, str]:
        parts = parts or {}
        if not isinstance(parts, dict):
            raise ValueError(f"partition_fields={parts!r}; expected a mapping column -> date formatter such as "
                             "{{dt: yyyy-MM-dd}}")  # sic: the text the loader has always given
        probe = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
        for col, fmt in parts.items():
            if not isinstance(col, str) or not _COLUMN.match(col):
                raise ValueError(f"partition field {col!r}; expected a column name")
            if not isinstance(fmt, str) or not fmt:
                raise ValueError(f"partition_fields.{col}.date-formatter={fmt!r}; expected a pattern such as "
                                 "'yyyy-MM-dd'")
            try:
                format_partition(fmt, probe, info.data.get("time_zone", "UTC"))
            except ValueError as exc:
                raise ValueError(f"partition_fields.{col}.date-formatter={fmt!r}: {exc}") from None
        return {str(k): str(v) for k, v in parts.items()}

    @field_validator("cron", mode="before")
    @classmethod
    def _cron(cls, cron: Any, info: ValidationInfo) -> str | None:
        """The cron expression, or the one the freshness stands for: the freshness (declared before, taken as
        it is) is checked here, as the two answer one question, when the table refreshes."""
        freshness = info.data.get("freshness")
        if cron is not None and freshness is not None:
            raise ValueError(f"both cron={cron!r} and freshness={freshness!r}; expected one of them")
        given = cron
        if freshness is not None:
            try:
                cron = parse_freshness(str(freshness))
            except ValueError as exc:
                raise ValueError(f"freshness: {exc}") from None
        if cron is None:
            return None
        if not str(cron).strip():
            raise ValueError(f"cron={cron!r} is empty; expected 5 fields, or 6 with seconds first, or leave cron out")
        if "time_zone" in info.data:  # a bad time zone is reported as such
            try:
                CronSchedule(str(cron), info.data["time_zone"])
            except CronError as exc:
                raise ValueError(str(exc)) from None
        _within_limit("cron", given)
        _within_limit("freshness", freshness)
        return str(cron)

    @field_validator("debounce", "min_interval", "max_staleness", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: ValidationInfo) -> float | None:
        """A duration in seconds; ``max_staleness`` of an upstream table defaults to its freshness."""
        name = str(info.field_name)
        if value is None and name == "max_staleness" and info.data.get("trigger"):
            value = info.data.get("freshness")
        if value is None:
            if name == "debounce":
                raise ValueError("debounce=None; expected a duration such as '30s' (or leave it out)")
            return None
        if name != "debounce" and not info.data.get("trigger"):
            raise ValueError(f"{name}={value!r} without trigger: upstream; expected trigger: upstream, "
                             "whose refreshes it bounds (a cron or freshness alone fires on its own times)")
        return _seconds(name, value)

    @field_validator("hold_on", mode="before")
    @classmethod
    def _hold_on(cls, value: Any) -> tuple[str, ...]:
        if value is None:
            return DEFAULT_HOLD_ON
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise ValueError(f"hold_on={value!r}; expected a list of {', '.join(HOLD_CONDITIONS)}")
        out: list[str] = []
        for item in items:
            name = str(item).upper()
            if name not in HOLD_CONDITIONS:
                raise ValueError(f"hold_on has {item!r}; expected some of {', '.join(HOLD_CONDITIONS)}")
            if name not in out:
                out.append(name)
        return tuple(out)

    @model_validator(mode="after")
    def _bounds(self) -> TableDeclaration:
        if self.min_interval is not None and self.max_staleness is not None and self.min_interval > self.max_staleness:
            raise ValueError(f"min_interval={self.min_interval:g}s is longer than max_staleness="
                             f"{self.max_staleness:g}s; expected the floor at most the ceiling")
        return self

    @field_validator("misfire_policy", mode="before")
    @classmethod
    def _misfire_policy(cls, policy: Any) -> str:
        policy = str(policy).lower()
        if policy not in MISFIRE_POLICIES:
            raise ValueError(f"misfire_policy={policy!r}; expected one of {', '.join(MISFIRE_POLICIES)}")
        return policy

    @field_validator("catchup_cap", mode="before")
    @classmethod
    def _catchup_cap(cls, cap: Any) -> int:
        if not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= MAX_CATCHUP_CAP:
            raise ValueError(f"catchup_cap={cap!r}; expected an integer from 1 to {MAX_CATCHUP_CAP}")
        return cap

    @field_validator("owner", "description", "namespace", "format", mode="before")
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> Any:
        value = _within_limit(str(info.field_name), value)
        return value if value is None or info.field_name == "description" else str(value)

    @field_validator("dynamic_options", "execution_config", mode="before")
    @classmethod
    def _strings(cls, value: Any, info: ValidationInfo) -> dict[str, str]:
        value = value or {}
        if not isinstance(value, dict):
            raise ValueError(f"{info.field_name}={value!r}; expected a mapping of strings")
        return {str(k): str(v) for k, v in value.items()}

    def table(self) -> MaterializedTable:
        values = self.model_dump()
        values["freshness"] = None if self.freshness is None else str(self.freshness)
        return MaterializedTable(**values)


_KNOWN_KEYS = frozenset(TableDeclaration.model_fields)


def _table(raw: Any, where: str) -> MaterializedTable:
    try:
        return TableDeclaration.model_validate(raw).table()
    except ValidationError as exc:
        raise TableDeclarationError(_problem(exc, raw, where)) from None


def _problem(exc: ValidationError, raw: Any, where: str) -> str:
    """The one problem of a declaration to report, as the loader has always worded it: a bad identifier
    first, then unknown fields (all in one message), then the first bad field."""
    errors = exc.errors()
    # a key that is not a string (YAML's `1: x`) is no field either
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] in ("extra_forbidden", "invalid_key"))
    problems = [e for e in errors if e["type"] not in ("extra_forbidden", "invalid_key")]
    first = problems[0] if problems else None
    cause = first and (first.get("ctx") or {}).get("error")
    if isinstance(cause, _Unnamed):
        return f"{where}: {cause}"
    where = f"{where} ({raw['identifier']})"
    if unknown:
        return f"{where}: unknown field(s) {', '.join(unknown)}; expected some of {', '.join(sorted(_KNOWN_KEYS))}"
    assert first is not None
    return f"{where}: {cause if cause is not None else first['msg']}"


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
