"""Freshness promises: "this dataset is written at least every hour", for any dataset.

The ``datasets:`` section of the scheduler's file and of the alerting file
declares them; the scheduler holds refreshes on stale inputs, the alerting
service pages (``dataset_stale``) and the UI shows whether each is kept.

```yaml
datasets:
  - dataset: sales.orders                  # a catalog table name (its symlinks), or
    freshness: 1h                          # a path (/data/raw/events) or a URI (s3://bucket/key, file:/tmp/x)
    business_hours: "* 8-18 * * MON-FRI"   # optional cron: only stale inside these minutes
    time_zone: Europe/Paris                # of business_hours (UTC by default)
    owner: sales-data                      # optional: who keeps the promise
```

A promise names its dataset the way a user knows it; ``Promise.matches``
compares it with the ``(namespace, name)`` the emitter gives datasets (after
the OpenLineage naming conventions) and with their catalog-table symlinks:

* a URI (``scheme://...`` or ``file:...``) is split into namespace and name as
  the emitter splits paths (``s3a://b/k`` is ``s3://b`` + ``k``);
* a path (``/data/x``) is a dataset with that name in any namespace (``file``,
  ``hdfs://nn:8020``);
* anything else is a table name (``db.table``, or ``table``), matched against
  the dataset's symlinks and its name; a name without its database (or
  catalog) matches the qualified one (``orders`` matches ``default.orders``).

A promise of a dataset nobody has written yet is accepted: it is reported as
"never written" until it is.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import re
import zoneinfo
from collections.abc import Iterable
from typing import Any

import yaml
from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .exceptions import ConfigError
from .schemas.naming import file_dataset_id

__all__ = [
    "Promise", "Promises", "dataset_id", "load_promises", "parse_duration", "parse_promises",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d|w)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, None: 1.0}
#: the longest freshness accepted (a year): larger values overflow date arithmetic
MAX_SECONDS = 366 * 86_400.0


def parse_duration(value: Any, what: str = "duration") -> float:
    """Seconds from ``90``, ``"30s"``, ``"5m"``, ``"2h"``, ``"1d"`` (as the alerting rules read durations);
    ValueError naming ``what`` otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what}={value!r}: expected a duration such as 30s, 5m, 2h or 1d")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise ValueError(f"{what}={value!r}: expected a duration such as 30s, 5m, 2h or 1d")
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if seconds <= 0 or seconds > MAX_SECONDS:
        raise ValueError(f"{what}={value!r}: expected a duration above 0 and at most 366d")
    return seconds


def dataset_id(uri: str) -> tuple[str, str]:
    """``(namespace, name)`` of a path or URI as the emitter names it (``file:/tmp/x`` is ``file`` + ``/tmp/x``,
    ``s3a://b/k`` is ``s3://b`` + ``k``): the contract's ``file_dataset_id``, which the emitter uses too."""
    return file_dataset_id(uri)


def _is_uri(text: str) -> bool:
    return "://" in text or text.startswith("file:")


class Promise(BaseModel):
    """One dataset's freshness promise: written at least every ``freshness`` seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str = Field(..., min_length=1, description="path, URI or table name of the dataset")
    freshness: float = Field(..., description="longest time between two successful writes (`1h`)")
    business_hours: str | None = Field(None, description="cron of the minutes in which staleness counts "
                                       "(`* 8-18 * * MON-FRI`); none: always")
    time_zone: str = Field("UTC", description="time zone of business_hours")
    owner: str | None = Field(None, description="who keeps the promise (a team, a person)")

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("dataset='': expected a path, a URI or a table name")
        return v

    @field_validator("freshness", mode="before")
    @classmethod
    def _freshness(cls, v: object) -> float:
        return parse_duration(v, "freshness")

    @field_validator("business_hours")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None and not croniter.is_valid(v):
            raise ValueError(f"business_hours={v!r}: expected a cron expression such as '* 8-18 * * MON-FRI'")
        return v

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"time_zone={v!r}: expected an IANA time zone such as UTC or Europe/Paris") from None
        return v

    # -- naming ---------------------------------------------------------------------------------

    @property
    def form(self) -> str:
        """How ``dataset`` names the dataset: ``uri``, ``path`` or ``table``."""
        if _is_uri(self.dataset):
            return "uri"
        return "path" if self.dataset.startswith("/") else "table"

    def matches(self, namespace: str, name: str, table_names: Iterable[str] = ()) -> bool:
        """Is the dataset ``(namespace, name)``, with catalog-table names ``table_names``, the promised one?"""
        if self.form == "uri":
            return dataset_id(self.dataset) == (namespace, name.rstrip("/") if len(name) > 1 else name)
        if self.form == "path":
            want = self.dataset.rstrip("/") or "/"
            return name.rstrip("/") == want or (namespace, name) == dataset_id(self.dataset)
        return any(_table_match(self.dataset, t) for t in (*table_names, name))

    # -- time -----------------------------------------------------------------------------------

    def due(self, last_write: dt.datetime) -> dt.datetime:
        """When the dataset goes stale if it is not written again after ``last_write``."""
        return last_write + dt.timedelta(seconds=self.freshness)

    def in_business_hours(self, at: dt.datetime) -> bool:
        """Does staleness count at ``at`` (always, without business hours)?"""
        if self.business_hours is None:
            return True
        local = at.astimezone(zoneinfo.ZoneInfo(self.time_zone)).replace(tzinfo=None)
        return bool(croniter.match(self.business_hours, local))

    def stale(self, last_write: dt.datetime | None, now: dt.datetime, since: dt.datetime | None = None) -> bool:
        """Is the promise broken at ``now``: past ``due(last_write)`` (or, never written, past ``due(since)``,
        ``since`` being when the promise was first watched), inside business hours?"""
        start = last_write if last_write is not None else since
        return start is not None and now > self.due(start) and self.in_business_hours(now)

    def describe(self) -> str:
        hours = f" during {self.business_hours} ({self.time_zone})" if self.business_hours else ""
        return f"{self.dataset} written at least every {_human(self.freshness)}{hours}"


def _table_match(promised: str, candidate: str) -> bool:
    """``orders`` matches ``default.orders`` and ``spark_catalog.default.orders``; ``db.t`` matches
    ``cat.db.t``; case-insensitively, as Spark's catalog names are."""
    p, c = promised.lower(), candidate.lower()
    return c == p or c.endswith("." + p)


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


class Promises(BaseModel):
    """The ``datasets:`` section: a list of promises, the first match wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    promises: tuple[Promise, ...] = ()

    def __iter__(self):  # noqa: ANN204
        return iter(self.promises)

    def __len__(self) -> int:
        return len(self.promises)

    def promise_for(self, namespace: str, name: str, table_names: Iterable[str] = ()) -> Promise | None:
        """The promise of dataset ``(namespace, name)`` (catalog-table names ``table_names``), or None."""
        names = tuple(table_names)
        for p in self.promises:
            if p.matches(namespace, name, names):
                return p
        return None


def parse_promises(doc: Any, source: str = "datasets") -> Promises:
    """The promises of a ``datasets:`` section (a list of mappings, or None for none); ConfigError naming
    ``source``, the entry, the field, the value and what was expected."""
    if doc is None:
        return Promises()
    if not isinstance(doc, list):
        raise ConfigError(f"{source}: datasets={type(doc).__name__}; expected a list of "
                          "{dataset: ..., freshness: ...} entries")
    out: list[Promise] = []
    for i, raw in enumerate(doc):
        where = f"{source}: datasets[{i}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: {raw!r}; expected a mapping with 'dataset' and 'freshness'")
        if isinstance(raw.get("dataset"), str):
            where += f" ({raw['dataset']})"
        try:
            out.append(Promise(**raw))
        except ValidationError as exc:
            raise ConfigError(f"{where}: {_problem(exc, raw)}") from None
    return Promises(promises=tuple(out))


def _problem(exc: ValidationError, raw: dict[str, Any]) -> str:
    parts = []
    for e in exc.errors():
        field = ".".join(str(p) for p in e["loc"]) or "value"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"unknown field {field!r}; expected one of {', '.join(Promise.model_fields)}"
        elif e["type"] == "missing":
            msg = f"{field}: missing; expected e.g. " + ("'dataset: sales.orders'" if field == "dataset"
                                                         else "'freshness: 1h'")
        elif field in raw and f"{field}=" not in msg:
            msg = f"{field}={raw[field]!r}: {msg}"
        parts.append(msg)
    return "; ".join(parts)


def load_promises(path_or_doc: str | os.PathLike[str] | dict[str, Any] | list[Any] | None) -> Promises:
    """The promises of a file's ``datasets:`` section (the scheduler's or the alerting file; a file without one,
    or the scheduler's bare list of tables, has none), of a parsed document (a mapping with ``datasets``, or the
    list itself), or none for None."""
    if path_or_doc is None:
        return Promises()
    if isinstance(path_or_doc, dict | list):
        doc: Any = path_or_doc
        source = "datasets"
    else:
        p = pathlib.Path(path_or_doc)
        source = f"file {str(p)!r}"
        try:
            doc = yaml.safe_load(p.read_text())
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read it: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if isinstance(doc, dict):
        return parse_promises(doc.get("datasets"), source)
    if isinstance(path_or_doc, list):
        return parse_promises(doc, source)
    if isinstance(doc, list) or doc is None:
        return Promises()  # a file that is a bare list is the scheduler's list of tables: no datasets section
    raise ConfigError(f"{source}: {type(doc).__name__}; expected a mapping with a 'datasets:' list")
