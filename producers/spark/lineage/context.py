"""The state of one extraction, as the connector handlers see it.

``Extraction`` is the small public surface the handlers in ``connectors/`` use:
the parsed plan, the JVM look-ups (``j(node)``), the time budget, the column
graph, and the ways to report what was found (``add_input``, ``add_output``,
``mark_incomplete``). The driver (``extract.py``) owns the order of the work.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from lineagewire.schemas.events import Boundedness, Dataset, SchemaField, Symlink

from .columns import ColumnGraph, Sources
from .jvm import Deadline, JvmPlan
from .model import ActionLineage
from .naming import normalize_uri
from .origins import Origin
from .plan import PlanNode
from .schema import fields_of_attributes, fields_of_catalog_string, fields_of_struct_json

__all__ = ["Extraction", "column_names", "dict_or_none", "table_name"]

log = logging.getLogger(__name__)

_DELTA_LOG = "/_delta_log/"


def column_names(node: PlanNode) -> list[str] | None:
    """The ``outputColumnNames`` of a write command, as a list."""
    raw = node.fields.get("outputColumnNames")
    if isinstance(raw, list):
        return [str(n) for n in raw]
    if isinstance(raw, str) and raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1]
        return [n for n in inner.split(", ")] if inner else []
    return None


def dict_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def table_name(catalog_table: dict[str, Any]) -> str:
    """``db.table`` of a CatalogTable's JSON."""
    ident = catalog_table.get("identifier") or {}
    table = str(ident.get("table", ""))
    database = ident.get("database")
    return f"{database}.{table}" if database else table


class Extraction:
    """What the handlers of one extraction share."""

    def __init__(self, qe: Any, root: PlanNode, jvm: JvmPlan | None, result: ActionLineage,
                 deadline: Deadline | None = None) -> None:
        self.qe = qe
        self.root = root
        self.jvm = jvm
        self.deadline = deadline or (jvm.deadline if jvm else Deadline(1.0))
        self.result = result
        self.graph = ColumnGraph(self.deadline.check)
        self._catalog_ns: str | None = None
        #: ids of plan nodes that are write targets, not inputs
        self.targets: set[int] = set()
        #: (output dataset, query node, column names)
        self.writes: list[tuple[Dataset, PlanNode | None, list[str] | None]] = []
        #: (output dataset, [(column, attribute id)]) for commands without a query (Delta's MERGE, UPDATE)
        self.column_ids: list[tuple[Dataset, list[tuple[str, int]]]] = []
        #: ids of leaf nodes whose columns are not their datasets' columns (``add_leaf_sources`` gave theirs)
        self.leaves_with_sources: set[int] = set()
        #: what a connector looked up once and needs again in this extraction (a catalog's namespace, ...)
        self.memo: dict[tuple[str, ...], Any] = {}

    # -- JVM ------------------------------------------------------------------------------------------

    def j(self, node: PlanNode) -> Any:
        """The JVM object of ``node`` (raises LookupError for plan JSON without a JVM)."""
        if self.jvm is None:
            raise LookupError("needs a JVM look-up (plan JSON only)")
        return self.jvm.node(node.path)

    def stream_origin(self, key: tuple[int, ...]) -> Origin | None:
        """The origin of a ``foreachBatch`` micro-batch whose output exprIds are ``key`` (the driver's)."""
        return None

    def session(self) -> Any:
        """The JVM SparkSession of the action, or None without one."""
        return self.qe.sparkSession() if self.qe is not None else None

    # -- reporting -------------------------------------------------------------------------------------

    def mark_incomplete(self, reason: str) -> None:
        self.result.mark_incomplete(reason)

    def mark_target(self, node: PlanNode) -> None:
        """``node`` (and what is under it) is written, not read: it names no input."""
        for sub in node.walk():
            self.targets.add(id(sub))

    def add_column_ids(self, ds: Dataset, columns: list[tuple[str, int]]) -> None:
        """Output ``ds``'s column lineage: column name -> the graph attribute (``graph.add_update``, ...)."""
        self.column_ids.append((ds, columns))

    def add_leaf_sources(self, node: PlanNode, columns: list[Sources], indirect: Sources) -> None:
        """Leaf ``node``'s output columns come from ``columns`` (in order), not from its datasets' columns;
        ``indirect``: the source columns that decided which of its rows exist."""
        self.leaves_with_sources.add(id(node))
        for attr, sources in zip(self.graph.output(node), columns, strict=False):
            self.graph.add_presolved(attr.expr_id, sources)
        self.graph.add_indirect_fields(indirect)

    def add_input(self, ds: Dataset, node: PlanNode) -> None:
        """Report an input read by leaf ``node``, whose output columns are the dataset's columns unless the
        dataset says otherwise (property ``rdd``: records parsed from files) or ``add_leaf_sources`` gave them."""
        if _DELTA_LOG in ds["name"] or ds["name"].endswith(_DELTA_LOG[:-1]):
            return  # Delta reading its own transaction log (its internal actions), not the user's data
        if id(node) not in self.leaves_with_sources and "query" not in ds["properties"] \
                and "rdd" not in ds["properties"]:
            self.graph.add_source(self.graph.output(node), ds["namespace"], ds["name"])
        for known in self.result.inputs:
            if (known["namespace"], known["name"]) == (ds["namespace"], ds["name"]):
                return
        self.result.inputs.append(ds)

    def add_output(self, ds: Dataset, query: PlanNode | None, names: list[str] | None) -> None:
        self.result.outputs.append(ds)
        self.writes.append((ds, query, names))

    # -- helpers ---------------------------------------------------------------------------------------

    def boundedness(self, node: PlanNode) -> Boundedness:
        """Unbounded for a node marked ``isStreaming`` and for a streaming relation (``StreamingDataSourceV2Relation``
        has no such field)."""
        streaming = node.fields.get("isStreaming") is True or node.simple.startswith("Streaming")
        return "CONTINUOUS_UNBOUNDED" if streaming else "BOUNDED"

    def fields_of(self, node: PlanNode) -> list[SchemaField]:
        """Schema fields of what ``node`` outputs, from the plan JSON alone."""
        return fields_of_attributes(self.graph.output(node))

    def query_fields(self, query: PlanNode | None, names: list[str] | None,
                     catalog_table: dict[str, Any] | None = None) -> list[SchemaField]:
        """Schema fields of the data a command writes."""
        schema = (catalog_table or {}).get("schema")
        if isinstance(schema, dict) and schema.get("fields"):
            return fields_of_struct_json(schema)
        if query is None:
            return []
        attrs = self.graph.output(query)
        fields: list[SchemaField] = []
        if self.jvm is not None and not self.deadline.expired():
            # Expression types are not in the plan JSON; catalogString is the cheap way to get them.
            fields = fields_of_catalog_string(str(self.j(query).schema().catalogString()),
                                              [a.nullable for a in attrs])
        else:
            fields = fields_of_attributes(attrs)
        if names and len(names) == len(fields):
            for f, n in zip(fields, names, strict=True):
                f["name"] = n
        return fields

    def mode(self, node: PlanNode) -> str | None:
        """The SaveMode of a write command."""
        self.deadline.check_essential("looking up the save mode")
        mode = self.j(node).mode()
        return str(mode.toString()) if mode is not None else None

    def catalog_namespace(self) -> str:
        """Namespace of catalog-table symlinks: the Hive metastore, else the warehouse folder."""
        if self._catalog_ns is not None:
            return self._catalog_ns
        ns = "spark_catalog"
        if self.qe is not None:
            self.deadline.check_essential("reading the catalog's location")
            session = self.qe.sparkSession()
            conf = session.conf()
            uris = ""
            if str(conf.get("spark.sql.catalogImplementation", "in-memory")) == "hive":
                uris = str(session.sparkContext().hadoopConfiguration().get("hive.metastore.uris") or "")
            if uris:
                ns = "hive://" + re.sub(r"^[a-z]+://", "", uris.split(",")[0].strip())
            else:
                warehouse = str(conf.get("spark.sql.warehouse.dir"))
                if "://" not in warehouse and not warehouse.startswith("file:"):
                    warehouse = normalize_uri(os.path.abspath(warehouse))
                ns = warehouse.rstrip("/")
        self._catalog_ns = ns
        return ns

    def table_symlink(self, name: str) -> Symlink:
        return {"namespace": self.catalog_namespace(), "name": name, "type": "TABLE"}

    def symlinks(self, catalog_table: dict[str, Any] | None) -> list[Symlink]:
        if not catalog_table:
            return []
        return [self.table_symlink(table_name(catalog_table))]
