"""Inputs that a job's SQL reads from files in place, named as the files (as the emitter names them).

dbt-duckdb reads a source with an ``external_location`` in place: the compiled SQL says
``read_parquet('/lake/orders/*.parquet')``, but openlineage-dbt names the input by the source's relation
(``duckdb:///…/orders.duckdb``, ``orders.main.orders``), and its column lineage by the table function
(``read_parquet``). The Spark job that wrote the folder names it ``file`` + ``/lake/orders`` (our emitter and
openlineage-spark alike), so the graph would break between the two. ``relocate_file_reads`` renames such an
input to the folder, as ``lineagewire.freshness.dataset_id`` (the emitter's naming) names it, the glob of a
folder of part files cut off (``/lake/orders/*.parquet`` is the folder ``/lake/orders``). The input keeps its
first name as a symlink (type ``TABLE``), and the column lineage's input fields that named the relation or the
table function name the folder.

Which input is which read: an input whose table the SQL does not name (dbt replaced the relation by the table
function) is paired with the read whose folder has the table's name, else, when one such input and one read are
left, with that read. An event without such a function in its SQL (a cheap text check, before any parsing), or
whose SQL sqlglot cannot parse, is given back as it came (the same object).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from lineagewire.freshness import dataset_id
from lineagewire.schemas.openlineage import FACET_URLS

log = logging.getLogger(__name__)

__all__ = ["FILE_FUNCTIONS", "relocate_file_reads"]

#: DuckDB's table functions that read files in place
FILE_FUNCTIONS = frozenset({"read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "read_json",
                            "read_json_auto"})
_MENTION = re.compile(r"\b(?:" + "|".join(sorted(FILE_FUNCTIONS)) + r")\s*\(", re.IGNORECASE)
_GLOB = re.compile(r"[*?\[{]")

Target = tuple[str, str]
#: (namespace, table function) of the column lineage's input fields -> the datasets the function read
ByFunction = dict[tuple[str, str], list[Target]]


class _Read:
    """One table function call of the SQL: its function and the datasets (namespace, name) it reads."""

    __slots__ = ("function", "targets")

    def __init__(self, function: str, targets: list[Target]) -> None:
        self.function, self.targets = function, targets


def relocate_file_reads(ev: dict[str, Any]) -> dict[str, Any]:
    """``ev`` with its inputs read in place by the SQL named as files (see the module docstring); ``ev`` itself,
    untouched, when there are none."""
    inputs = ev.get("inputs")
    query = _query(ev.get("job"))
    if not inputs or not isinstance(inputs, list) or query is None or not _MENTION.search(query):
        return ev
    scanned = _scan(query)
    if scanned is None:
        return ev
    reads, tables = scanned
    renamed = _pair(inputs, reads, tables)
    if not renamed:
        return ev
    # column lineage may name the function instead of the relation: only a function read once is unambiguous
    functions = [r.function for r in reads]
    by_function = {(ns, r.function): r.targets for r in reads for ns in {ns for ns, _name in renamed}
                   if functions.count(r.function) == 1 and r.targets in renamed.values()}
    return _rewritten(ev, renamed, by_function)


def _query(job: Any) -> str | None:
    facets = job.get("facets") if isinstance(job, dict) else None
    sql = facets.get("sql") if isinstance(facets, dict) else None
    query = sql.get("query") if isinstance(sql, dict) else None
    return query if isinstance(query, str) else None


def _scan(query: str) -> tuple[list[_Read], set[str]] | None:
    """The file reads of ``query`` and the (lower-case) names of the tables it names; None when it does not
    parse as DuckDB SQL."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        statements = sqlglot.parse(query, read="duckdb")
    except SqlglotError as exc:
        log.debug("the sql facet does not parse as DuckDB SQL (%s); its inputs keep their names", exc)
        return None
    reads: list[_Read] = []
    tables: set[str] = set()
    for table in (t for s in statements if s is not None for t in s.find_all(exp.Table)):
        if isinstance(table.this, exp.Func):
            read = _read(table.this)
            if read is not None:
                reads.append(read)
        elif table.name:
            tables.add(table.name.lower())
    return reads, tables


def _read(func: Any) -> _Read | None:
    from sqlglot import exp

    name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
    if name not in FILE_FUNCTIONS:
        return None
    first = func.this if isinstance(func.this, exp.Expression) else next(iter(func.expressions), None)
    literals = first.expressions if isinstance(first, exp.Array) else [first]
    paths = [lit.this for lit in literals if isinstance(lit, exp.Literal) and lit.is_string]
    targets = [dataset_id(_folder(p)) for p in paths if _located(p)]
    return _Read(name, targets) if targets else None


def _located(path: str) -> bool:
    """An absolute path or a URI: a relative one depends on the directory the tool ran in, unknown here."""
    return path.startswith("/") or "://" in path or path.startswith("file:")


def _folder(path: str) -> str:
    """The path up to its first component with a glob (the folder of part files, as the emitter names it)."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if _GLOB.search(part):
            return "/".join(parts[:i]) or "/"
    return path


def _table_of(name: Any) -> str:
    """The table of a relation's name (``db.schema.table``)."""
    return name.rsplit(".", 1)[-1].strip('"').lower() if isinstance(name, str) else ""


def _folder_name(name: str) -> str:
    """The last folder of a path, without an extension (``/lake/orders.parquet``: ``orders``)."""
    return name.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0].lower()


def _pair(inputs: list[Any], reads: list[_Read], tables: set[str]) -> dict[Target, list[Target]]:
    """(namespace, name) of each input the SQL reads in place -> the datasets it reads."""
    left = [(d["namespace"], d["name"]) for d in inputs if isinstance(d, dict) and isinstance(d.get("namespace"), str)
            and isinstance(d.get("name"), str) and _table_of(d["name"]) not in tables]
    free = list(reads)
    renamed: dict[Target, list[Target]] = {}
    for ident in list(left):
        read = next((r for r in free if any(_folder_name(n) == _table_of(ident[1]) for _ns, n in r.targets)), None)
        if read is not None:
            renamed[ident] = read.targets
            free.remove(read)
            left.remove(ident)
    if len(left) == 1 and len(free) == 1:
        renamed[left[0]] = free[0].targets
    return renamed


def _rewritten(ev: dict[str, Any], renamed: dict[Target, list[Target]], by_function: ByFunction) -> dict[str, Any]:
    inputs: list[Any] = []
    for d in ev["inputs"]:
        targets = renamed.get((d.get("namespace"), d.get("name"))) if isinstance(d, dict) else None
        inputs += [d] if targets is None else [_as_file(d, t, ev.get("producer")) for t in targets]
    outputs = [_mapped_output(d, renamed, by_function) if isinstance(d, dict) else d
               for d in ev.get("outputs") or []]
    return {**ev, "inputs": inputs, **({"outputs": outputs} if "outputs" in ev else {})}


def _as_file(d: dict[str, Any], target: Target, producer: Any) -> dict[str, Any]:
    """The input ``d`` named ``target``, its first name a symlink (kept first among the symlinks it had)."""
    facets = dict(d.get("facets") or {})
    first = next((f.get("_producer") for f in facets.values() if isinstance(f, dict)), None)
    symlinks = facets.get("symlinks") if isinstance(facets.get("symlinks"), dict) else {
        "_producer": first or producer, "_schemaURL": FACET_URLS["symlinks"], "identifiers": []}
    facets["symlinks"] = {**symlinks, "identifiers": [
        {"namespace": d["namespace"], "name": d["name"], "type": "TABLE"}, *(symlinks.get("identifiers") or [])]}
    return {**d, "namespace": target[0], "name": target[1], "facets": facets}


def _mapped_output(d: dict[str, Any], renamed: dict[Target, list[Target]], by_function: ByFunction
                   ) -> dict[str, Any]:
    facets = d.get("facets")
    lineage = facets.get("columnLineage") if isinstance(facets, dict) else None
    if not isinstance(lineage, dict):
        return d
    fields = lineage.get("fields")
    mapped = dict(lineage)
    if isinstance(fields, dict):
        mapped["fields"] = {name: {**spec, "inputFields": _mapped_inputs(spec["inputFields"], renamed, by_function)}
                            if isinstance(spec, dict) and isinstance(spec.get("inputFields"), list) else spec
                            for name, spec in fields.items()}
    if isinstance(lineage.get("dataset"), list):
        mapped["dataset"] = _mapped_inputs(lineage["dataset"], renamed, by_function)
    return {**d, "facets": {**facets, "columnLineage": mapped}}  # type: ignore[dict-item]


def _mapped_inputs(fields: list[Any], renamed: dict[Target, list[Target]], by_function: ByFunction) -> list[Any]:
    out: list[Any] = []
    for f in fields:
        if not isinstance(f, dict):
            out.append(f)
            continue
        ns, name = f.get("namespace"), f.get("name")
        targets = renamed.get((ns, name)) or (
            by_function.get((ns, name.lower())) if isinstance(ns, str) and isinstance(name, str) else None)
        out += [f] if not targets else [{**f, "namespace": ns, "name": n} for ns, n in targets]
    return out
