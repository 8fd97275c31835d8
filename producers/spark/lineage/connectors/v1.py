"""DataSource V1: ``LogicalRelation`` reads and the commands that write a BaseRelation or a provider.

Which connector names a relation is decided by the relation's (or the
provider's) JVM class, through the ``RELATIONS`` and ``DATA_SOURCES`` registries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ..context import Extraction, dict_or_none
from ..jvm import scala_map
from ..naming import file_dataset_id
from ..plan import PlanNode
from .delta_log import add_write_version
from .files import hadoop_fs_relation
from .jdbc import jdbc_relation, jdbc_save
from .kafka import kafka_relation, kafka_save

__all__ = ["DATA_SOURCES", "RELATIONS", "insert_into_data_source", "logical_relation", "relation_datasets",
           "save_into_data_source"]

#: (ctx, leaf node, JVM BaseRelation, catalog table JSON, schema fields, symlinks) -> datasets
RelationHandler = Callable[[Extraction, PlanNode, Any, "dict[str, Any] | None", list[SchemaField], list[Symlink]],
                           list[Dataset]]
#: (ctx, command node, query, lower-cased options, schema fields, save mode) -> None (adds outputs)
SaveHandler = Callable[[Extraction, PlanNode, "PlanNode | None", dict[str, str], list[SchemaField], "str | None"],
                       None]

#: BaseRelation classes by the end of their JVM class name.
RELATIONS: dict[str, RelationHandler] = {
    "HadoopFsRelation": hadoop_fs_relation,
    "JDBCRelation": jdbc_relation,
    "KafkaRelation": kafka_relation,
}

#: Relation providers written through SaveIntoDataSourceCommand, by the end of their JVM class name.
DATA_SOURCES: dict[str, SaveHandler] = {
    "JdbcRelationProvider": jdbc_save,
    "KafkaSourceProvider": kafka_save,
}


def _by_class(registry: dict[str, Any], cls: str) -> Any:
    for suffix, handler in registry.items():
        if cls.endswith(suffix):
            return handler
    return None


def relation_datasets(ctx: Extraction, node: PlanNode, relation: Any, catalog_table: dict[str, Any] | None,
                      fields: list[SchemaField]) -> list[Dataset]:
    """Datasets of a V1 BaseRelation (files, JDBC, Kafka)."""
    facts = ctx.jvm.file_relation(relation) if ctx.jvm is not None else None
    if facts is not None:
        return hadoop_fs_relation(ctx, node, relation, catalog_table, fields, ctx.symlinks(catalog_table), facts)
    jcls = relation.getClass()
    cls = str(jcls.getName())
    handler = _by_class(RELATIONS, cls)
    if handler is None and "$anon$" in cls:
        # An anonymous subclass (Delta's HadoopFsRelation with InsertableRelation): named by its parent.
        handler = _by_class(RELATIONS, str(jcls.getSuperclass().getName()))
    if handler is None:
        raise LookupError(f"relation class {cls} is not supported")
    return handler(ctx, node, relation, catalog_table, fields, ctx.symlinks(catalog_table))


def logical_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``LogicalRelation``."""
    catalog_table = dict_or_none(node.fields.get("catalogTable"))
    fields = ctx.fields_of(node)
    ctx.deadline.check_essential("looking up an input relation")
    facts = ctx.jvm.known_file_relation(node.path) if ctx.jvm is not None else None
    if facts is not None and "Delta" not in facts[0]:  # Delta's version read needs the relation itself
        return hadoop_fs_relation(ctx, node, None, catalog_table, fields, ctx.symlinks(catalog_table), facts)
    return relation_datasets(ctx, node, ctx.j(node).relation(), catalog_table, fields)


def insert_into_data_source(ctx: Extraction, node: PlanNode) -> None:
    """``InsertIntoDataSourceCommand``: INSERT into a table over a BaseRelation (JDBC catalog tables)."""
    target = node.nested.get("logicalRelation")
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    if target is None:
        raise LookupError("InsertIntoDataSourceCommand without a logicalRelation")
    ctx.mark_target(target)
    catalog_table = dict_or_none(target.fields.get("catalogTable"))
    ctx.deadline.check_essential("looking up the target relation")
    fields = ctx.query_fields(query, None, catalog_table)
    op = "Overwrite" if node.fields.get("overwrite") is True else "Append"
    for ds in relation_datasets(ctx, target, ctx.j(target).relation(), catalog_table, fields):
        ds["operation"] = op
        ctx.add_output(ds, query, None)


def save_into_data_source(ctx: Extraction, node: PlanNode) -> None:
    """``SaveIntoDataSourceCommand``: ``df.write.format(...).save()`` to a V1 provider."""
    query = node.nested.get("query") or (node.children[0] if node.children else None)
    ctx.deadline.check_essential("looking up the data source written")
    jnode = ctx.j(node)
    provider = jnode.dataSource()
    cls = str(provider.getClass().getName())
    # Only the keys that name the target are read: options also hold passwords.
    opts = {k.lower(): v for k, v in scala_map(jnode.options()).items()}
    mode = ctx.mode(node)
    fields = ctx.query_fields(query, None)
    handler = _by_class(DATA_SOURCES, cls)
    if handler is not None:
        handler(ctx, node, query, opts, fields, mode)
    elif opts.get("path"):
        try:
            fmt = str(provider.shortName())
        except Exception:  # noqa: BLE001 - a provider without a short name
            fmt = cls.rsplit(".", 1)[-1]
        ds = dataset(*file_dataset_id(opts["path"]), format=fmt, fields=fields, operation=mode)
        add_write_version(ctx, ds)
        ctx.add_output(ds, query, None)
    else:
        ctx.mark_incomplete(f"output data source {cls} is not supported")
