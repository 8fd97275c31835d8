"""Session catalog tables: CTAS / ``saveAsTable`` of data source tables, ``CREATE TABLE``, Hive tables, and views.

Hive-format tables (``STORED AS``) of Parquet or ORC are read and written by Spark's own file
sources once ``spark.sql.hive.convertMetastore*`` converts them (``LogicalRelation`` and
``InsertIntoHadoopFsRelationCommand``, handled in ``files``/``v1``); other formats stay
``HiveTableRelation`` and ``InsertIntoHiveTable``, handled here. Either way the dataset's format is
the storage format (``textfile``, ``parquet``, ...), not the provider name ``hive``.

A persisted view (``CREATE [OR REPLACE] VIEW``, ``ALTER VIEW ... AS``) is a dataset of its own, named as
a table is by its catalog name, without a location: namespace the catalog's, name ``db.view``, and a
``TABLE`` symlink of the same name, so that consumers name it as they name tables. Its inputs and column
lineage are those of its query. A later read of it is an input named as the view (``View`` of the
analyzed plan), not as what it reads. Temporary views name no dataset: a read of one names what it reads.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lineagewire.schemas.events import Dataset, SchemaField, dataset

from ..context import Extraction, column_names, dict_or_none, table_name
from ..jvm import option, scala_map
from ..naming import file_dataset_id
from ..plan import PlanNode
from ..schema import fields_of_struct_json

__all__ = ["alter_view_as", "catalog_table_dataset", "create_data_source_table_as_select",
           "create_hive_table_as_select", "create_table", "create_view", "hive_format", "hive_table_relation",
           "insert_into_hive_dir", "insert_into_hive_table", "table_location", "view_relation"]

log = logging.getLogger(__name__)

#: Hive InputFormat class (end of its name) -> storage format.
_HIVE_INPUT_FORMATS = {
    "TextInputFormat": "textfile", "SequenceFileInputFormat": "sequencefile", "RCFileInputFormat": "rcfile",
    "OrcInputFormat": "orc", "MapredParquetInputFormat": "parquet", "AvroContainerInputFormat": "avro",
}


def hive_format(provider: str | None, input_format: str | None) -> str:
    """The storage format of a catalog table: its provider, or for ``hive`` its InputFormat's."""
    if provider and provider.lower() != "hive":
        return provider
    for suffix, fmt in _HIVE_INPUT_FORMATS.items():
        if input_format and input_format.endswith(suffix):
            return fmt
    return "hive"


def _jvm_format(jtable: Any) -> str:
    provider = option(jtable.provider())
    return hive_format(provider and str(provider), option(jtable.storage().inputFormat()) and
                       str(option(jtable.storage().inputFormat())))


def _jvm_table_name(jtable: Any) -> str:
    ident = jtable.identifier()
    database = option(ident.database())
    return f"{database}.{ident.table()}" if database else str(ident.table())


def table_location(ctx: Extraction, jtable: Any) -> str:
    """Where a (possibly not yet created) catalog table's files are (``jtable``: a JVM ``CatalogTable``)."""
    location = option(jtable.storage().locationUri())
    if location is None:
        location = ctx.session().sessionState().catalog().defaultTablePath(jtable.identifier())
    return str(location.toString())


def catalog_table_dataset(ctx: Extraction, jtable: Any) -> Dataset:
    """A session catalog table (JVM ``CatalogTable``) as the catalog has it now: its location, storage format,
    columns (partition columns included) and ``TABLE`` symlink."""
    return dataset(*file_dataset_id(table_location(ctx, jtable)), format=_jvm_format(jtable),
                   fields=fields_of_struct_json(str(jtable.schema().json())),
                   symlinks=[ctx.table_symlink(_jvm_table_name(jtable))])


def _static_partitions(jmap: Any) -> dict[str, str]:
    """Static values of a ``Map[String, Option[String]]`` partition spec (dynamic ones are ``None``)."""
    out: dict[str, str] = {}
    for key, value in scala_map(jmap).items():
        if value.startswith("Some(") and value.endswith(")"):
            out[key] = value[5:-1]
    return out


def _created(mode: str | None) -> str:
    """The lifecycle change of a CTAS: ``saveAsTable`` in mode overwrite replaces a table that may exist."""
    return "OVERWRITE" if mode == "Overwrite" else "CREATE"


def create_data_source_table_as_select(ctx: Extraction, node: PlanNode) -> None:
    """``CreateDataSourceTableAsSelectCommand``: CTAS and ``saveAsTable`` of a new table."""
    table = dict_or_none(node.fields.get("table")) or {}
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    names = column_names(node)
    ctx.deadline.check_essential("looking up the new table's location")
    location = table_location(ctx, ctx.j(node).table())
    mode = ctx.mode(node)
    ds = dataset(*file_dataset_id(location), format=table.get("provider"),
                 fields=ctx.query_fields(query, names), symlinks=ctx.symlinks(table),
                 operation="CreateTableAsSelect", properties={"mode": mode} if mode else {},
                 lifecycle_change=_created(mode))
    ctx.add_output(ds, query, names)


def create_hive_table_as_select(ctx: Extraction, node: PlanNode) -> None:
    """``CreateHiveTableAsSelectCommand``: ``CREATE TABLE ... STORED AS ... AS SELECT``."""
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    names = column_names(node)
    ctx.deadline.check_essential("looking up the new Hive table")
    jtable = ctx.j(node).tableDesc()
    mode = ctx.mode(node)
    ds = dataset(*file_dataset_id(table_location(ctx, jtable)), format=_jvm_format(jtable),
                 fields=ctx.query_fields(query, names), symlinks=[ctx.table_symlink(_jvm_table_name(jtable))],
                 operation="CreateTableAsSelect", properties={"mode": mode} if mode else {},
                 lifecycle_change=_created(mode))
    ctx.add_output(ds, query, names)


def create_table(ctx: Extraction, node: PlanNode) -> None:
    """``CreateTableCommand`` / ``CreateDataSourceTableCommand``: a new empty table (DDL, no data read)."""
    ctx.deadline.check_essential("looking up the new table")
    jtable = ctx.j(node).table()
    table = dict_or_none(node.fields.get("table")) or {}
    schema = table.get("schema")
    fields = fields_of_struct_json(schema) if isinstance(schema, dict) else []
    ds = dataset(*file_dataset_id(table_location(ctx, jtable)), format=_jvm_format(jtable), fields=fields,
                 symlinks=[ctx.table_symlink(_jvm_table_name(jtable))], operation="CreateTable",
                 lifecycle_change="CREATE")
    ctx.add_output(ds, None, None)


def insert_into_hive_table(ctx: Extraction, node: PlanNode) -> None:
    """``InsertIntoHiveTable``: INSERT [OVERWRITE] into a Hive SerDe table, static partitions included."""
    query = node.children[0] if node.children else node.nested.get("query")
    names = column_names(node)
    ctx.deadline.check_essential("looking up the Hive table written")
    jnode = ctx.j(node)
    jtable = jnode.table()
    op = "Overwrite" if node.fields.get("overwrite") is True else "Append"
    ds = dataset(*file_dataset_id(table_location(ctx, jtable)), format=_jvm_format(jtable),
                 fields=ctx.query_fields(query, names, dict_or_none(node.fields.get("table"))),
                 symlinks=[ctx.table_symlink(_jvm_table_name(jtable))], operation=op,
                 partition_values=_static_partitions(jnode.partition()))
    ctx.add_output(ds, query, names)


def insert_into_hive_dir(ctx: Extraction, node: PlanNode) -> None:
    """``InsertIntoHiveDirCommand``: ``INSERT OVERWRITE [LOCAL] DIRECTORY '...' STORED AS / ROW FORMAT / USING hive``,
    the directory named as the data source form (``files.insert_into_dir``) names it, in its storage format."""
    query = node.children[0] if node.children else node.nested.get("query")
    names = column_names(node)
    ctx.deadline.check_essential("looking up the directory written")
    storage = ctx.j(node).storage()
    location = option(storage.locationUri())
    if location is None:
        raise LookupError("INSERT OVERWRITE DIRECTORY without a location")
    described = option(storage.inputFormat())
    fmt = hive_format(None, described and str(described))
    if fmt == "hive":  # USING hive OPTIONS (fileFormat 'parquet'): the format is an option of the storage
        fmt = {k.lower(): v for k, v in scala_map(storage.properties()).items()}.get("fileformat", fmt).lower()
    op = "Overwrite" if node.fields.get("overwrite") is True else "Append"
    ds = dataset(*file_dataset_id(str(location.toString())), format=fmt, fields=ctx.query_fields(query, names),
                 operation=op)
    ctx.add_output(ds, query, names)


def hive_table_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``HiveTableRelation`` (a Hive SerDe table of the session catalog)."""
    meta = dict_or_none(node.fields.get("tableMeta"))
    ctx.deadline.check_essential("looking up a Hive table location")
    jtable = ctx.j(node).tableMeta()
    return [dataset(*file_dataset_id(str(jtable.location())), format=_jvm_format(jtable),
                    fields=ctx.fields_of(node), symlinks=ctx.symlinks(meta))]


# -- views ---------------------------------------------------------------------------------------------


def _view(ctx: Extraction, name: str, fields: list[SchemaField], **kw: Any) -> Dataset:
    return dataset(ctx.catalog_namespace(), name, fields=fields, symlinks=[ctx.table_symlink(name)],
                   dataset_type="VIEW", **kw)


def view_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: a read of a persisted view (``View``, ``isTempView=false``), named as the view."""
    desc = dict_or_none(node.fields.get("desc")) or {}
    schema = desc.get("schema")
    fields = fields_of_struct_json(schema) if isinstance(schema, dict) else ctx.fields_of(node)
    return [_view(ctx, table_name(desc), fields)]


def create_view(ctx: Extraction, node: PlanNode) -> None:
    """``CreateViewCommand``: ``CREATE [OR REPLACE] VIEW`` (a temporary view's creation names no dataset)."""
    query = node.nested.get("plan")
    kind = str((dict_or_none(node.fields.get("viewType")) or {}).get("object", ""))
    if not kind.endswith(".PersistedView$"):  # LocalTempView$, GlobalTempView$: transparent
        if query is not None:
            ctx.mark_target(query)
        return
    _view_output(ctx, node, query, "CreateOrReplaceView" if node.fields.get("replace") is True else "CreateView")


def alter_view_as(ctx: Extraction, node: PlanNode) -> None:
    """``AlterViewAsCommand``: ``ALTER VIEW v AS SELECT ...`` (of a temporary view: no dataset)."""
    query = node.nested.get("query")
    ctx.deadline.check_essential("looking up whether the view altered is temporary")
    if bool(ctx.session().sessionState().catalog().isTempView(ctx.j(node).name())):
        if query is not None:
            ctx.mark_target(query)
        return
    _view_output(ctx, node, query, "AlterViewAs")


def _view_output(ctx: Extraction, node: PlanNode, query: PlanNode | None, operation: str) -> None:
    name = table_name({"identifier": dict_or_none(node.fields.get("name")) or {}})
    text = node.fields.get("originalText")
    text = text if isinstance(text, str) else None
    fields, kept = _view_in_catalog(ctx, node)
    if node.fields.get("allowExisting") is True and kept is not None and kept != text:
        # CREATE VIEW IF NOT EXISTS of a view that existed: the statement changed nothing.
        if query is not None:
            ctx.mark_target(query)
        return
    if not fields:  # the view is not in the catalog (a failed action): the query's columns
        fields = ctx.query_fields(query, None)
    ds = _view(ctx, name, fields, operation=operation, view_sql=text)
    ctx.add_output(ds, query, [f["name"] for f in fields] or None)


def _view_in_catalog(ctx: Extraction, node: PlanNode) -> tuple[list[SchemaField], str | None]:
    """The view's columns as the catalog keeps them once the command ran (the names the statement gave,
    ``CREATE VIEW v (a, b) AS ...``, and their comments, which the plan JSON leaves null), and its SQL text."""
    ctx.deadline.check_essential("looking up the view's columns")
    try:
        jtable = ctx.session().sessionState().catalog().getTableMetadata(ctx.j(node).name())
        return fields_of_struct_json(json.loads(str(jtable.schema().json()))), option(jtable.viewText())
    except Exception:  # noqa: BLE001 - e.g. CREATE VIEW failed: there is no view to look up
        log.debug("view not in the catalog", exc_info=True)
        return [], None
