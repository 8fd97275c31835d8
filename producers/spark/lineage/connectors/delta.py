"""Delta Lake (delta-spark): ``DeltaTableV2`` datasets, ``MERGE INTO``, ``UPDATE``, ``DELETE``.

Delta reads are V1 file relations over a Delta file index (named in ``files``, format ``delta``);
writes by path are ``SaveIntoDataSourceCommand``; table writes (``saveAsTable``, ``INSERT``) are V2
``AppendData``/``OverwriteByExpression`` on a ``DeltaTableV2``; ``MERGE``/``UPDATE``/``DELETE`` are
Delta's own commands, whose target is the output (and an input, since its rows are read). The
``DeltaTable`` Python API (``forName/forPath(...).merge(...).execute()``, ``.update``, ``.delete``) runs
the same commands, reported as a ``command`` action: it needs nothing of its own (``test_delta_api``).
The table version goes into the dataset's ``properties["version"]``: for a read, the version read
(time travel included); for a write, the table's version after it (looked up in ``delta_log``).
"""

from __future__ import annotations

from typing import Any

from lineagewire.schemas.events import Dataset, dataset

from ..context import Extraction, dict_or_none
from ..naming import file_dataset_id
from ..plan import PlanNode
from .delta_log import add_write_version
from .v1 import relation_datasets

__all__ = ["delete", "delta_table_v2", "merge", "update"]


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
    """``DeleteCommand``: the target is written (rows removed): the rows that stay keep their columns, and the
    WHERE's columns are INDIRECT/FILTER, as the columns an UPDATE leaves alone."""
    outputs = _target_outputs(ctx, node, "Delete")
    columns = ctx.graph.add_delete(node, node.nested["target"])
    for ds in outputs:
        ctx.add_output(ds, None, None)
        ctx.add_column_ids(ds, columns)
