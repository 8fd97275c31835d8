"""Session catalog tables: CTAS / ``saveAsTable`` of data source tables, ``CREATE TABLE``, and Hive tables.

Hive-format tables (``STORED AS``) of Parquet or ORC are read and written by Spark's own file
sources once ``spark.sql.hive.convertMetastore*`` converts them (``LogicalRelation`` and
``InsertIntoHadoopFsRelationCommand``, handled in ``files``/``v1``); other formats stay
``HiveTableRelation`` and ``InsertIntoHiveTable``, handled here. Either way the dataset's format is
the storage format (``textfile``, ``parquet``, ...), not the provider name ``hive``.
"""

from __future__ import annotations

from typing import Any

from lineagewire.schemas.events import Dataset, dataset

from ..context import Extraction, column_names, dict_or_none
from ..jvm import option, scala_map
from ..naming import file_dataset_id
from ..plan import PlanNode
from ..schema import fields_of_struct_json

__all__ = ["create_data_source_table_as_select", "create_hive_table_as_select", "create_table",
           "hive_format", "hive_table_relation", "insert_into_hive_table"]

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


def _location(ctx: Extraction, jtable: Any) -> str:
    """Where a (possibly not yet created) catalog table's files are."""
    location = option(jtable.storage().locationUri())
    if location is None:
        location = ctx.session().sessionState().catalog().defaultTablePath(jtable.identifier())
    return str(location.toString())


def _static_partitions(jmap: Any) -> dict[str, str]:
    """Static values of a ``Map[String, Option[String]]`` partition spec (dynamic ones are ``None``)."""
    out: dict[str, str] = {}
    for key, value in scala_map(jmap).items():
        if value.startswith("Some(") and value.endswith(")"):
            out[key] = value[5:-1]
    return out


def create_data_source_table_as_select(ctx: Extraction, node: PlanNode) -> None:
    """``CreateDataSourceTableAsSelectCommand``: CTAS and ``saveAsTable`` of a new table."""
    table = dict_or_none(node.fields.get("table")) or {}
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    names = column_names(node)
    ctx.deadline.check_essential("looking up the new table's location")
    location = _location(ctx, ctx.j(node).table())
    mode = ctx.mode(node)
    ds = dataset(*file_dataset_id(location), format=table.get("provider"),
                 fields=ctx.query_fields(query, names), symlinks=ctx.symlinks(table),
                 operation="CreateTableAsSelect", properties={"mode": mode} if mode else {})
    ctx.add_output(ds, query, names)


def create_hive_table_as_select(ctx: Extraction, node: PlanNode) -> None:
    """``CreateHiveTableAsSelectCommand``: ``CREATE TABLE ... STORED AS ... AS SELECT``."""
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    names = column_names(node)
    ctx.deadline.check_essential("looking up the new Hive table")
    jtable = ctx.j(node).tableDesc()
    mode = ctx.mode(node)
    ds = dataset(*file_dataset_id(_location(ctx, jtable)), format=_jvm_format(jtable),
                 fields=ctx.query_fields(query, names), symlinks=[ctx.table_symlink(_jvm_table_name(jtable))],
                 operation="CreateTableAsSelect", properties={"mode": mode} if mode else {})
    ctx.add_output(ds, query, names)


def create_table(ctx: Extraction, node: PlanNode) -> None:
    """``CreateTableCommand`` / ``CreateDataSourceTableCommand``: a new empty table (DDL, no data read)."""
    ctx.deadline.check_essential("looking up the new table")
    jtable = ctx.j(node).table()
    table = dict_or_none(node.fields.get("table")) or {}
    schema = table.get("schema")
    fields = fields_of_struct_json(schema) if isinstance(schema, dict) else []
    ds = dataset(*file_dataset_id(_location(ctx, jtable)), format=_jvm_format(jtable), fields=fields,
                 symlinks=[ctx.table_symlink(_jvm_table_name(jtable))], operation="CreateTable")
    ctx.add_output(ds, None, None)


def insert_into_hive_table(ctx: Extraction, node: PlanNode) -> None:
    """``InsertIntoHiveTable``: INSERT [OVERWRITE] into a Hive SerDe table, static partitions included."""
    query = node.children[0] if node.children else node.nested.get("query")
    names = column_names(node)
    ctx.deadline.check_essential("looking up the Hive table written")
    jnode = ctx.j(node)
    jtable = jnode.table()
    op = "Overwrite" if node.fields.get("overwrite") is True else "Append"
    ds = dataset(*file_dataset_id(_location(ctx, jtable)), format=_jvm_format(jtable),
                 fields=ctx.query_fields(query, names, dict_or_none(node.fields.get("table"))),
                 symlinks=[ctx.table_symlink(_jvm_table_name(jtable))], operation=op,
                 partition_values=_static_partitions(jnode.partition()))
    ctx.add_output(ds, query, names)


def hive_table_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``HiveTableRelation`` (a Hive SerDe table of the session catalog)."""
    meta = dict_or_none(node.fields.get("tableMeta"))
    ctx.deadline.check_essential("looking up a Hive table location")
    jtable = ctx.j(node).tableMeta()
    return [dataset(*file_dataset_id(str(jtable.location())), format=_jvm_format(jtable),
                    fields=ctx.fields_of(node), symlinks=ctx.symlinks(meta))]
