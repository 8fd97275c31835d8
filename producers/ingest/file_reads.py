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

import functools
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
    renamed = _pair(inputs, *scanned) if scanned is not None else None
    if not renamed:
        return ev
    return _rewritten(ev, renamed, _by_function(scanned[0], renamed))  # type: ignore[index]


def _by_function(reads: tuple[_Read, ...], renamed: dict[Target, list[Target]]) -> ByFunction:
    """Column lineage may name the table function instead of the relation: a function called once, whose read was
    paired, in the namespace of a paired input."""
    functions = [r.function for r in reads]
    namespaces = {ns for ns, _name in renamed}
    return {(ns, r.function): r.targets for r in reads for ns in namespaces
            if functions.count(r.function) == 1 and r.targets in renamed.values()}


def _query(job: Any) -> str | None:
    facets = job.get("facets") if isinstance(job, dict) else None
    sql = facets.get("sql") if isinstance(facets, dict) else None
    query = sql.get("query") if isinstance(sql, dict) else None
    return query if isinstance(query, str) else None


@functools.lru_cache(maxsize=256)
def _scan(query: str) -> tuple[tuple[_Read, ...], frozenset[str]] | None:
    """The file reads of ``query`` and the (lower-case) names of the tables it names; None when it does not
    parse as DuckDB SQL. Remembered for the last queries: a run's START and COMPLETE carry the same SQL, and
    parsing it takes about half a millisecond."""
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
    return tuple(reads), frozenset(tables)


def _read(func: Any) -> _Read | None:
    from sqlglot import exp

    name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
    if name not in FILE_FUNCTIONS:
        return None
    targets = [dataset_id(_folder(p)) for p in _paths(func) if _located(p)]
    return _Read(name, targets) if targets else None


def _paths(func: Any) -> list[str]:
    """The path or list of paths a file function is called with (its first argument)."""
    from sqlglot import exp

    first = func.this if isinstance(func.this, exp.Expression) else next(iter(func.expressions), None)
    literals = first.expressions if isinstance(first, exp.Array) else [first]
    return [lit.this for lit in literals if isinstance(lit, exp.Literal) and lit.is_string]


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


def _ident(d: Any) -> Target | None:
    if isinstance(d, dict) and isinstance(d.get("namespace"), str) and isinstance(d.get("name"), str):
        return d["namespace"], d["name"]
    return None


def _pair(inputs: list[Any], reads: tuple[_Read, ...], tables: frozenset[str]) -> dict[Target, list[Target]]:
    """(namespace, name) of each input the SQL reads in place -> the datasets it reads."""
    left = [i for i in map(_ident, inputs) if i is not None and _table_of(i[1]) not in tables]
    free = list(reads)
    renamed: dict[Target, list[Target]] = {}
    for ident in list(left):
        read = _read_of_folder(free, _table_of(ident[1]))
        if read is not None:
            renamed[ident] = read.targets
            free.remove(read)
            left.remove(ident)
    if len(left) == 1 and len(free) == 1:
        renamed[left[0]] = free[0].targets
    return renamed


def _read_of_folder(reads: list[_Read], table: str) -> _Read | None:
    """The read of a folder named as the table (dbt-duckdb's ``external_location`` says ``{name}``)."""
    return next((r for r in reads if any(_folder_name(n) == table for _ns, n in r.targets)), None)


def _rewritten(ev: dict[str, Any], renamed: dict[Target, list[Target]], by_function: ByFunction) -> dict[str, Any]:
    inputs: list[Any] = []
    for d in ev["inputs"]:
        ident = _ident(d)
        targets = renamed.get(ident) if ident is not None else None
        inputs += [d] if targets is None else [_as_file(d, t, ev.get("producer")) for t in targets]
    outputs = [_mapped_output(d, renamed, by_function) if isinstance(d, dict) else d
               for d in ev.get("outputs") or []]
    return {**ev, "inputs": inputs, **({"outputs": outputs} if "outputs" in ev else {})}


def _as_file(d: dict[str, Any], target: Target, producer: Any) -> dict[str, Any]:
    """The input ``d`` named ``target``, its first name a symlink (kept first among the symlinks it had)."""
    facets = dict(d.get("facets") or {})
    first = next((f.get("_producer") for f in facets.values() if isinstance(f, dict)), None)
    had = facets.get("symlinks")
    symlinks: dict[str, Any] = had if isinstance(had, dict) else {
        "_producer": first or producer, "_schemaURL": FACET_URLS["symlinks"], "identifiers": []}
    facets["symlinks"] = {**symlinks, "identifiers": [
        {"namespace": d["namespace"], "name": d["name"], "type": "TABLE"}, *(symlinks.get("identifiers") or [])]}
    return {**d, "namespace": target[0], "name": target[1], "facets": facets}


def _mapped_output(d: dict[str, Any], renamed: dict[Target, list[Target]], by_function: ByFunction
                   ) -> dict[str, Any]:
    facets = d.get("facets")
    if not isinstance(facets, dict) or not isinstance(facets.get("columnLineage"), dict):
        return d
    lineage: dict[str, Any] = facets["columnLineage"]
    fields = lineage.get("fields")
    mapped = dict(lineage)
    if isinstance(fields, dict):
        mapped["fields"] = {name: {**spec, "inputFields": _mapped_inputs(spec["inputFields"], renamed, by_function)}
                            if isinstance(spec, dict) and isinstance(spec.get("inputFields"), list) else spec
                            for name, spec in fields.items()}
    if isinstance(lineage.get("dataset"), list):
        mapped["dataset"] = _mapped_inputs(lineage["dataset"], renamed, by_function)
    return {**d, "facets": {**facets, "columnLineage": mapped}}


def _mapped_inputs(fields: list[Any], renamed: dict[Target, list[Target]], by_function: ByFunction) -> list[Any]:
    out: list[Any] = []
    for f in fields:
        if not isinstance(f, dict):
            out.append(f)
            continue
        ident = _ident(f)
        targets = None if ident is None else renamed.get(ident) or by_function.get((ident[0], ident[1].lower()))
        out += [f] if not targets else [{**f, "namespace": ns, "name": n} for ns, n in targets]
    return out
