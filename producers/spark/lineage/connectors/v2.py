"""DataSource V2: ``DataSourceV2Relation`` reads; ``AppendData`` / ``OverwriteByExpression`` /
``OverwritePartitionsDynamic`` writes, to file tables, V1 tables behind a V2 catalog, and other catalogs;
the row-level commands (``ReplaceData``, ``WriteDelta``: MERGE, UPDATE, DELETE of V2 tables), metadata
deletes and ``CREATE [OR REPLACE] TABLE ... AS SELECT`` (``writeTo(...).create()``) into a V2 catalog.

A row-level command's query reads the target (its rows are rewritten) and writes rows with metadata
columns (``__row_operation``, ``_file``, ...): only the table's columns get column lineage."""

from __future__ import annotations

import logging

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ..context import Extraction
from ..jvm import option
from ..naming import file_dataset_id
from ..plan import PlanNode
from .delta import delta_table_v2
from .delta_log import add_write_version
from .files import root_paths
from .iceberg import iceberg_datasets, is_iceberg_table
from .kafka import kafka_stream, kafka_table

__all__ = ["append_data", "delete_from_table", "overwrite_by_expression", "overwrite_partitions_dynamic",
           "row_level_write", "streaming_v2_relation", "table_as_select", "v2_datasets", "v2_relation",
           "v2_scan_relation"]

log = logging.getLogger(__name__)


def v2_datasets(ctx: Extraction, node: PlanNode, fields: list[SchemaField], *, write: bool = False) -> list[Dataset]:
    """Datasets of a ``DataSourceV2Relation`` node (``write``: the relation is a write's target)."""
    ctx.deadline.check_essential("looking up a DataSourceV2 table")
    jnode = ctx.j(node)
    table = jnode.table()
    cls = str(table.getClass().getName())
    if cls.endswith("RowLevelOperationTable"):  # MERGE / UPDATE / DELETE wrap the table they rewrite
        table = table.table()
        cls = str(table.getClass().getName())
    bounded = ctx.boundedness(node)
    if cls.rstrip("$").endswith("NoopTable"):
        return []  # format("noop"): benchmarks write here, nothing is stored
    if is_iceberg_table(cls):
        return iceberg_datasets(ctx, node, table, fields, catalog=option(jnode.catalog()),
                                ident=option(jnode.identifier()), write=write)
    if cls.endswith("DeltaTableV2"):
        return delta_table_v2(ctx, node, table)
    if cls.endswith("KafkaTable"):
        return kafka_table(ctx, node, jnode.options(), fields)
    if cls.endswith("V1Table"):
        catalog_table = table.v1Table()
        ident = catalog_table.identifier()
        name = f"{option(ident.database())}.{ident.table()}" if option(ident.database()) else str(ident.table())
        symlinks: list[Symlink] = [ctx.table_symlink(name)]
        provider = option(catalog_table.provider())
        return [dataset(*file_dataset_id(str(catalog_table.location())), format=provider and str(provider),
                        fields=fields, symlinks=symlinks, boundedness=bounded)]
    try:
        paths = root_paths(table.fileIndex())
        fmt = str(table.formatName()).lower()
        return [dataset(*file_dataset_id(p), format=fmt, fields=fields, boundedness=bounded) for p in paths]
    except Exception:  # noqa: BLE001 - not a file table: name it by catalog and identifier
        log.debug("DataSourceV2 table %s is not a file table", cls, exc_info=True)
    catalog = option(jnode.catalog())
    ident = option(jnode.identifier())
    namespace = str(catalog.name()) if catalog is not None else "spark"
    name = str(ident.toString()) if ident is not None else str(table.name())
    return [dataset(namespace, name, fields=fields, boundedness=bounded)]


def v2_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``DataSourceV2Relation``."""
    return v2_datasets(ctx, node, ctx.fields_of(node))


def streaming_v2_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``StreamingDataSourceV2Relation``, a streaming query's source (read behind ``foreachBatch``).

    Spark 4 names two classes apart: this one is the logical relation (a table, as ``DataSourceV2Relation``),
    and the micro-batch reads it through ``StreamingDataSourceV2ScanRelation``. Spark 3.5 has only this class,
    as the micro-batch's scan: no table, a ``stream`` (a Kafka stream names its topics there).
    """
    if "table" in node.fields:
        return v2_relation(ctx, node)
    ctx.deadline.check_essential("reading a streaming query's source")
    stream = ctx.j(node).stream()
    if str(stream.getClass().getSimpleName()) == "KafkaMicroBatchStream":
        return kafka_stream(ctx, node, stream, ctx.fields_of(node))
    raise LookupError(f"streaming source {stream.getClass().getName()} is not supported")


def v2_scan_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``DataSourceV2ScanRelation`` (and ``StreamingDataSourceV2ScanRelation``, a micro-batch's scan).

    The optimizer's scan keeps the relation it reads (a nested plan, named there) and its exprIds.
    """
    return []


def _v2_write(ctx: Extraction, node: PlanNode, operation: str) -> None:
    target = node.nested.get("table")
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    if target is None:
        raise LookupError(f"{node.simple} without a table")
    ctx.mark_target(target)
    fields = ctx.query_fields(query, None)
    for ds in v2_datasets(ctx, target, fields, write=True):
        ds["operation"] = operation
        add_write_version(ctx, ds)
        ctx.add_output(ds, query, None)


def append_data(ctx: Extraction, node: PlanNode) -> None:
    _v2_write(ctx, node, "Append")


def overwrite_by_expression(ctx: Extraction, node: PlanNode) -> None:
    _v2_write(ctx, node, "Overwrite")


def overwrite_partitions_dynamic(ctx: Extraction, node: PlanNode) -> None:
    _v2_write(ctx, node, "OverwritePartitionsDynamic")


def row_level_write(ctx: Extraction, node: PlanNode) -> None:
    """``ReplaceData`` (copy-on-write) / ``WriteDelta`` (merge-on-read): a MERGE, UPDATE or DELETE of a V2 table.

    The target is the output; its scan in the query is an input. MERGE and UPDATE columns derive from
    what the query computes for them (``MergeRows`` instructions, UPDATE's projection); a DELETE gives no
    column a new value, so it has no column lineage.
    """
    target = node.nested.get("table")
    if target is None:
        raise LookupError(f"{node.simple} without a table")
    for written in (target, node.nested.get("originalTable")):
        if written is not None:
            ctx.mark_target(written)
    query = node.children[0] if node.children else node.nested.get("query")
    ctx.deadline.check_essential("looking up the row-level operation")
    command = str(ctx.j(node).operation().command().toString())  # DELETE, UPDATE, MERGE
    columns = {a.name for a in ctx.graph.output(target)}
    for ds in v2_datasets(ctx, target, ctx.fields_of(target), write=True):
        ds["operation"] = command.capitalize()
        ctx.add_output(ds, None, None)
        if query is not None and command != "DELETE":
            ctx.add_column_ids(ds, [(a.name, a.expr_id) for a in ctx.graph.output(query) if a.name in columns])


def delete_from_table(ctx: Extraction, node: PlanNode) -> None:
    """``DeleteFromTableWithFilters`` / ``DeleteFromTable``: a DELETE the table does on its metadata alone
    (whole files or partitions dropped, no rows read): the target is the output only."""
    target = node.nested.get("table")
    if target is None:
        raise LookupError(f"{node.simple} without a table")
    ctx.mark_target(target)
    for ds in v2_datasets(ctx, target, ctx.fields_of(target), write=True):
        ds["operation"] = "Delete"
        ctx.add_output(ds, None, None)


def table_as_select(ctx: Extraction, node: PlanNode) -> None:
    """``CreateTableAsSelect`` / ``ReplaceTableAsSelect`` into a V2 catalog (``writeTo(...).create()``,
    ``createOrReplace()``, ``CREATE TABLE ... USING iceberg AS SELECT``), named once created.

    Spark runs the data write as an inner ``AppendData`` / ``OverwriteByExpression`` action of its own,
    reported too. Only Iceberg tables are named here; other catalogs' tables by that inner write.
    """
    query = node.nested.get("query")
    ctx.deadline.check_essential("looking up the new table")
    resolved = ctx.j(node).name()  # ResolvedIdentifier(catalog, identifier)
    catalog, ident = resolved.catalog(), resolved.identifier()
    table = catalog.loadTable(ident)
    if not is_iceberg_table(str(table.getClass().getName())):
        return
    if node.simple == "CreateTableAsSelect":
        operation = "CreateTableAsSelect"
    else:
        operation = "CreateOrReplaceTableAsSelect" if node.fields.get("orCreate") is True else "ReplaceTableAsSelect"
    fields = ctx.query_fields(query, None)
    for ds in iceberg_datasets(ctx, None, table, fields, catalog=catalog, ident=ident, write=True):
        ds["operation"] = operation
        ctx.add_output(ds, query, None)
