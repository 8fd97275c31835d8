"""Delta Lake (delta-spark): table versions, ``DeltaTableV2`` writes, ``MERGE INTO``, ``UPDATE``, ``DELETE``.

Delta reads are V1 file relations over a Delta file index (named in ``files``, format ``delta``);
writes by path are ``SaveIntoDataSourceCommand``; table writes (``saveAsTable``, ``INSERT``) are V2
``AppendData``/``OverwriteByExpression`` on a ``DeltaTableV2``; ``MERGE``/``UPDATE``/``DELETE`` are
Delta's own commands, whose target is the output (and an input, since its rows are read).
The table version goes into the dataset's ``properties["version"]``: for a read, the version read
(time travel included); for a write, the table's version after it.
"""

from __future__ import annotations

import logging
from typing import Any

from lineagewire.schemas.events import Dataset, dataset

from ..context import Extraction, dict_or_none
from ..naming import file_dataset_id
from ..plan import PlanNode
from .v1 import relation_datasets

__all__ = ["add_write_version", "delete", "delta_table_v2", "merge", "update", "version_after_write", "version_read"]

log = logging.getLogger(__name__)


def version_read(file_index: Any) -> str | None:
    """The Delta version a Delta file index reads (time travel included), else None."""
    # The Delta file indexes differ by how the table was read: the current snapshot (TahoeLogFileIndex),
    # a time-travel read (a version pinned at analysis), a prepared scan.
    for way in (lambda: file_index.getSnapshot().version(), lambda: file_index.version(),
                lambda: file_index.snapshotAtAnalysis().version()):
        try:
            return str(way())
        except Exception:  # noqa: BLE001 - not this kind of index: try the next
            continue
    return None


def version_after_write(ctx: Extraction, path: str) -> str | None:
    """The version of the Delta table at ``path`` once the write committed (the listener runs after it)."""
    session = ctx.session()
    if session is None:
        return None
    try:
        from pyspark import SparkContext

        jvm = SparkContext._jvm
        # forTable returns the DeltaLog this JVM just committed through: its snapshot is the new version.
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(session, path)
        return str(delta_log.unsafeVolatileSnapshot().version())
    except Exception:  # noqa: BLE001 - a Delta version is extra information: leave it out
        log.debug("no Delta version for %s", path, exc_info=True)
        return None


def add_write_version(ctx: Extraction, ds: Dataset) -> None:
    """Put the version a write to a Delta dataset committed into its properties."""
    if ds["format"] != "delta":
        return
    ds["properties"].pop("version", None)
    version = version_after_write(ctx, ds["name"] if ds["namespace"] == "file" else f"{ds['namespace']}/{ds['name']}")
    if version is not None:
        ds["properties"]["version"] = version


def delta_table_v2(ctx: Extraction, node: PlanNode, table: Any) -> list[Dataset]:
    """A ``DeltaTableV2`` (catalog or path table) by its location, with a TABLE symlink for a catalog one."""
    fallback: str | None = None
    try:
        path = str(table.path().toString())
        catalog_table = table.catalogTable()
    except Exception:  # noqa: BLE001 - the staged table saveAsTable creates has no path yet: its default one
        catalog_table = None
        parts = str(table.name()).split(".")
        database, name = (parts[-2], parts[-1]) if len(parts) >= 2 else ("default", parts[-1])
        folder = name if database == "default" else f"{database}.db/{name}"
        path = f"{ctx.catalog_namespace()}/{folder}"
        fallback = f"{database}.{name}"
    symlinks = []
    if catalog_table is not None and catalog_table.isDefined():
        ident = catalog_table.get().identifier()
        database = ident.database()
        name = f"{database.get()}.{ident.table()}" if database.isDefined() else str(ident.table())
        symlinks = [ctx.table_symlink(name)]
    elif fallback:
        symlinks = [ctx.table_symlink(fallback)]
    return [dataset(*file_dataset_id(path), format="delta", fields=ctx.fields_of(node), symlinks=symlinks,
                    boundedness=ctx.boundedness(node))]


def _target_outputs(ctx: Extraction, node: PlanNode, operation: str) -> list[Dataset]:
    target = node.nested.get("target")
    if target is None:
        raise LookupError(f"{node.simple} without a target plan")
    leaves = [n for n in target.walk() if n.simple == "LogicalRelation"]
    if not leaves:
        raise LookupError(f"{node.simple}: no relation in its target plan")
    leaf = leaves[0]
    ctx.deadline.check_essential("looking up the Delta table written")
    out = relation_datasets(ctx, leaf, ctx.j(leaf).relation(), dict_or_none(leaf.fields.get("catalogTable")),
                            ctx.fields_of(leaf))
    for ds in out:
        ds["operation"] = operation
        add_write_version(ctx, ds)
    return out


def merge(ctx: Extraction, node: PlanNode) -> None:
    """``MergeIntoCommand``: the target is written; every SET / INSERT column derives from its expression,
    the ON condition's columns are INDIRECT/JOIN, the clauses' conditions INDIRECT/FILTER."""
    outputs = _target_outputs(ctx, node, "Merge")
    columns = ctx.graph.add_merge(node)
    for ds in outputs:
        ctx.add_output(ds, None, None)
        ctx.add_column_ids(ds, columns)


def update(ctx: Extraction, node: PlanNode) -> None:
    """``UpdateCommand``: column i of the target is ``updateExpressions[i]``; the WHERE is INDIRECT/FILTER."""
    outputs = _target_outputs(ctx, node, "Update")
    columns = ctx.graph.add_update(node, node.nested["target"])
    for ds in outputs:
        ctx.add_output(ds, None, None)
        ctx.add_column_ids(ds, columns)


def delete(ctx: Extraction, node: PlanNode) -> None:
    """``DeleteCommand``: the target is written (rows removed); no column gets a new value."""
    for ds in _target_outputs(ctx, node, "Delete"):
        ctx.add_output(ds, None, None)
