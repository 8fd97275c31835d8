"""Files: Hadoop file relations (V1), file writes, ``INSERT OVERWRITE DIRECTORY``."""

from __future__ import annotations

from typing import Any

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ..context import Extraction, column_names, dict_or_none
from ..jvm import option, scala_map, short_format
from ..naming import file_dataset_id
from ..plan import PlanNode
from .delta_log import version_read

__all__ = ["hadoop_fs_relation", "insert_into_dir", "insert_into_hadoop_fs", "root_paths"]


def _table_format(catalog_table: dict[str, Any] | None) -> str | None:
    """A catalog table's provider; None for 'hive', whose converted tables are read by the file format."""
    provider = (catalog_table or {}).get("provider")
    return str(provider) if provider and str(provider).lower() != "hive" else None


def root_paths(file_index: Any) -> list[str]:
    """The root paths of a FileIndex, in one call."""
    return [p for p in str(file_index.rootPaths().mkString("\n")).split("\n") if p]


def hadoop_fs_relation(ctx: Extraction, node: PlanNode, relation: Any, catalog_table: dict[str, Any] | None,
                       fields: list[SchemaField], symlinks: list[Symlink],
                       facts: tuple[str, str, list[str]] | None = None) -> list[Dataset]:
    """One dataset per root path of a HadoopFsRelation.

    ``facts`` (format class simple name, short name, root paths: ``JvmPlan.file_relation``) saves
    the round trips of asking the relation for each.
    """
    fmt = _table_format(catalog_table)
    properties: dict[str, str] = {}
    simple = facts[0] if facts is not None else None
    if fmt is None:
        file_format: Any = relation.fileFormat() if facts is None else None
        if simple is None:
            simple = str(file_format.getClass().getSimpleName())
        # Delta's file format is a Parquet format (short name 'parquet'); its index knows the version read.
        if "Delta" in simple:
            fmt = "delta"
            version = version_read(relation.location())
            if version is not None:
                properties["version"] = version
        elif facts is not None:
            fmt = facts[1] or simple.removesuffix("FileFormat").lower() or simple
        else:
            fmt = short_format(file_format)
    paths = facts[2] if facts is not None else root_paths(relation.location())
    return [dataset(*file_dataset_id(p), format=fmt, fields=fields, symlinks=symlinks,
                    boundedness=ctx.boundedness(node), properties=dict(properties)) for p in paths]


def insert_into_hadoop_fs(ctx: Extraction, node: PlanNode) -> None:
    """``InsertIntoHadoopFsRelationCommand``: file writes, and the file part of table writes."""
    query = node.children[0] if node.children else node.nested.get("query")
    names = column_names(node)
    catalog_table = dict_or_none(node.fields.get("catalogTable"))
    ctx.deadline.check_essential("looking up the output path")
    jnode = ctx.j(node)
    path = str(jnode.outputPath().toString())
    fmt = _table_format(catalog_table) or short_format(jnode.fileFormat())
    static = scala_map(jnode.staticPartitions())
    ds = dataset(*file_dataset_id(path), format=fmt, fields=ctx.query_fields(query, names, catalog_table),
                 symlinks=ctx.symlinks(catalog_table), operation=ctx.mode(node), partition_values=static)
    ctx.add_output(ds, query, names)


def insert_into_dir(ctx: Extraction, node: PlanNode) -> None:
    """``INSERT OVERWRITE DIRECTORY '...' USING fmt SELECT ...``."""
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    ctx.deadline.check_essential("looking up the directory written")
    location = option(ctx.j(node).storage().locationUri())
    if location is None:
        raise LookupError("INSERT OVERWRITE DIRECTORY without a location")
    op = "Overwrite" if node.fields.get("overwrite") is True else "Append"
    ds = dataset(*file_dataset_id(str(location.toString())), format=node.fields.get("provider"),
                 fields=ctx.query_fields(query, None), operation=op)
    ctx.add_output(ds, query, None)
