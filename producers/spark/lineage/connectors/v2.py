"""DataSource V2: ``DataSourceV2Relation`` reads and ``AppendData`` / ``OverwriteByExpression`` /
``OverwritePartitionsDynamic`` writes, to file tables, V1 tables behind a V2 catalog, and other catalogs."""

from __future__ import annotations

import logging

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ..context import Extraction
from ..jvm import option
from ..naming import file_dataset_id
from ..plan import PlanNode
from .delta import add_write_version, delta_table_v2
from .files import root_paths

__all__ = ["append_data", "overwrite_by_expression", "overwrite_partitions_dynamic", "v2_datasets",
           "v2_relation", "v2_scan_relation"]

log = logging.getLogger(__name__)


def v2_datasets(ctx: Extraction, node: PlanNode, fields: list[SchemaField]) -> list[Dataset]:
    """Datasets of a ``DataSourceV2Relation`` node."""
    ctx.deadline.check_essential("looking up a DataSourceV2 table")
    jnode = ctx.j(node)
    table = jnode.table()
    cls = str(table.getClass().getName())
    bounded = ctx.boundedness(node)
    if cls.rstrip("$").endswith("NoopTable"):
        return []  # format("noop"): benchmarks write here, nothing is stored
    if cls.endswith("DeltaTableV2"):
        return delta_table_v2(ctx, node, table)
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


def v2_scan_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``DataSourceV2ScanRelation``.

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
    for ds in v2_datasets(ctx, target, fields):
        ds["operation"] = operation
        add_write_version(ctx, ds)
        ctx.add_output(ds, query, None)


def append_data(ctx: Extraction, node: PlanNode) -> None:
    _v2_write(ctx, node, "Append")


def overwrite_by_expression(ctx: Extraction, node: PlanNode) -> None:
    _v2_write(ctx, node, "Overwrite")


def overwrite_partitions_dynamic(ctx: Extraction, node: PlanNode) -> None:
    _v2_write(ctx, node, "OverwritePartitionsDynamic")
