"""Dated folders are one dataset: ``…/orders/20261129`` and ``…/orders/2026-11-30`` are both ``…/orders``.

A daily job that writes a folder per day would otherwise make a new dataset every day, and the registry,
DataHub, the lineage graph and the ``schema_changed`` rule would see a thousand unrelated datasets instead of
one. openlineage-spark trims such folders too (its dataset name trimmers). Here the trailing segments of a
file dataset's path that look like a date or an hour, or are Hive-style ``key=value`` folders, are cut off the
name and kept as the dataset's ``partition_values``: ``{"date": "20261129"}``, ``{"ds": "2026-11-29"}``.

The rule is applied to a whole action at once (``DatedFolders.apply``), after the extraction, so reads,
writes, RDD paths and column lineage all name the same dataset. Two inputs that trim to the same name (a job
reading two days) become one input whose partition value lists both.

A segment that only looks like a date (``v20261129x``, ``20261399``) is left as it is, and a path is never
trimmed to its root.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lineagewire.schemas.events import ColumnLineage, Dataset, InputField

if TYPE_CHECKING:
    from .model import ActionLineage

__all__ = ["DatedFolders"]

#: Namespaces of datasets named by a path (``file``, ``s3://b``, ``hdfs://nn:8020``, ...); JDBC, Kafka and
#: catalog names (``db.table``) never contain a dated folder.
_PATH_NAMESPACE = re.compile(r"^(file|(s3|gs|hdfs|abfss?|wasbs?|viewfs|dbfs|oss|cos|o3fs|ofs)://.*)$")

# One segment: 20261129, 2026112913, 2026-11-29, 2026-11-29T13, 2026-11-29T13:05:00Z, 20261129T1305Z, 2026-11.
_MINUTES = r"(?::?\d{2}(?::?\d{2})?)?Z?"
_DATE_SEGMENT = re.compile(r"(?P<y>\d{4})(?:"
                           r"-(?P<m>\d{2})(?:-(?P<d>\d{2})(?:[T_](?P<h>\d{2})" + _MINUTES + r")?)?"  # 2026-11-29T13
                           r"|(?P<m2>\d{2})(?P<d2>\d{2})(?:T?(?P<h2>\d{2})" + _MINUTES + r")?)")  # 20261129T13
_KEY_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([^/=]*)$")


def _is_date(segment: str) -> bool:
    """Whether a folder name is a real date or hour (20261399 is not; 1234 or 202611 are ids, not months)."""
    m = _DATE_SEGMENT.fullmatch(segment)
    if m is None or not 1900 <= int(m["y"]) < 2200:
        return False
    month, day, hour = m["m"] or m["m2"], m["d"] or m["d2"], m["h"] or m["h2"]
    try:
        dt.date(int(m["y"]), int(month), int(day or 1))
    except ValueError:
        return False
    return hour is None or int(hour) < 24


def _year_month_day(segments: list[str]) -> int:
    """How many trailing segments form ``yyyy/mm/dd`` or ``yyyy/mm/dd/hh`` (0 when they do not)."""
    for n in (4, 3):
        tail = segments[-n:]
        if len(segments) > n and all(s.isdigit() for s in tail) and [len(s) for s in tail] == [4, 2, 2, 2][:n]:
            if _is_date("".join(tail[:3])) and (n == 3 or int(tail[3]) < 24):
                return n
    return 0


@dataclass(frozen=True)
class DatedFolders:
    """The rule, as the emitter's settings configure it: ``enabled`` (``dated_folders``) and ``extra``, more
    regular expressions a whole trailing segment may match (``dated_folder_patterns``)."""

    enabled: bool = True
    extra: tuple[str, ...] = ()
    _extra: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = []
        for text in self.extra:
            try:
                compiled.append(re.compile(text))
            except re.error as exc:
                raise ValueError(f"dated_folder_patterns: {text!r} is not a regular expression ({exc}); "
                                   "expected a Python regex that a whole folder name matches, such as "
                                   r"'batch_\d+'") from None
        object.__setattr__(self, "_extra", tuple(compiled))

    def trim(self, namespace: str, name: str) -> tuple[str, dict[str, str]]:
        """``name`` without its dated trailing folders, and what was cut as partition values (empty: none)."""
        if not self.enabled or "/" not in name or not _PATH_NAMESPACE.match(namespace):
            return name, {}
        segments = [s for s in name.split("/") if s]
        values = self._cut(segments)
        if not values:
            return name, {}
        return ("/" if name.startswith("/") else "") + "/".join(segments), values

    def _cut(self, segments: list[str]) -> dict[str, str]:
        """Takes the dated and ``key=value`` folders off the end of ``segments`` (never the first) and gives
        them as partition values, in path order."""
        keyed: list[tuple[str, str]] = []
        dates: list[str] = []
        while len(segments) > 1:
            last = segments[-1]
            kv = _KEY_VALUE.match(last)
            n = 0 if kv else 1 if _is_date(last) or any(p.fullmatch(last) for p in self._extra) \
                else _year_month_day(segments)
            if kv:
                keyed.insert(0, (kv.group(1), kv.group(2)))
                segments.pop()
            elif n:
                dates.insert(0, "/".join(segments[-n:]))
                del segments[-n:]
            else:
                break
        values = dict(keyed)
        if dates:
            values["date"] = "/".join(dates)
        return values

    def apply(self, result: ActionLineage) -> ActionLineage:
        """``result`` with every dated dataset renamed, in its inputs, outputs and column lineage."""
        if not self.enabled:
            return result
        renames: dict[tuple[str, str], str] = {}
        result.inputs = self._datasets(result.inputs, renames)
        result.outputs = self._datasets(result.outputs, renames)
        if renames:
            result.column_lineage = _renamed_columns(result.column_lineage, renames)
        return result

    def _datasets(self, datasets: Iterable[Dataset], renames: dict[tuple[str, str], str]) -> list[Dataset]:
        out: dict[tuple[str, str], Dataset] = {}
        for ds in datasets:
            name, values = self.trim(ds["namespace"], ds["name"])
            if values:
                renames[(ds["namespace"], ds["name"])] = name
                ds = {**ds, "name": name, "partition_values": {**ds["partition_values"], **values}}
            key = (ds["namespace"], ds["name"])
            seen = out.get(key)
            if seen is None:
                out[key] = ds
            else:  # two days of one dataset read together: one input, both days in its partition values
                merged = dict(seen["partition_values"])
                for k, v in ds["partition_values"].items():
                    parts = merged[k].split(",") if merged.get(k) else []
                    if v not in parts:
                        merged[k] = ",".join([*parts, v])
                out[key] = {**seen, "partition_values": merged,
                            "fields": seen["fields"] or ds["fields"]}
        return list(out.values())


def _renamed_columns(columns: list[ColumnLineage], renames: dict[tuple[str, str], str]) -> list[ColumnLineage]:
    out: dict[tuple[str, str, str], ColumnLineage] = {}
    for col in columns:
        name = renames.get((col["namespace"], col["name"]), col["name"])
        inputs: list[InputField] = []
        seen = set()
        for inp in col["inputs"]:
            renamed: InputField = {**inp, "name": renames.get((inp["namespace"], inp["name"]), inp["name"])}
            key = (renamed["namespace"], renamed["name"], renamed["field"])
            if key not in seen:
                seen.add(key)
                inputs.append(renamed)
        key = (col["namespace"], name, col["field"])
        if key in out:  # the same column of two dated folders: one column, the inputs of both
            known = {(i["namespace"], i["name"], i["field"]) for i in out[key]["inputs"]}
            out[key]["inputs"].extend(i for i in inputs if (i["namespace"], i["name"], i["field"]) not in known)
        else:
            out[key] = {**col, "name": name, "inputs": inputs}
    return list(out.values())
