"""The connector registry: which handler names the datasets of which plan node.

``OUTPUTS`` maps a write command's simple class name to a handler that adds
the output datasets (``ctx.add_output``); ``INPUTS`` maps a leaf relation's
simple class name to a handler that returns its input datasets. One module
per connector family; V1 relations and providers are dispatched further by
their JVM class in ``v1.RELATIONS`` / ``v1.DATA_SOURCES``. A leaf listed in
``NO_DATASET`` reads nothing that is a dataset.

To support a new node, write the handler in the family's module and add it here.
"""

from __future__ import annotations

from collections.abc import Callable

from lineagewire.schemas.events import Dataset

from ..context import Extraction
from ..plan import PlanNode
from . import catalog, delta, files, lifecycle, rdd, streaming, v1, v2

__all__ = ["INPUTS", "NO_DATASET", "OUTPUTS", "InputHandler", "OutputHandler"]

InputHandler = Callable[[Extraction, PlanNode], list[Dataset]]
OutputHandler = Callable[[Extraction, PlanNode], None]

OUTPUTS: dict[str, OutputHandler] = {
    "InsertIntoHadoopFsRelationCommand": files.insert_into_hadoop_fs,
    "InsertIntoDataSourceDirCommand": files.insert_into_dir,
    "CreateDataSourceTableAsSelectCommand": catalog.create_data_source_table_as_select,
    "CreateHiveTableAsSelectCommand": catalog.create_hive_table_as_select,
    "CreateTableCommand": catalog.create_table,
    "CreateDataSourceTableCommand": catalog.create_table,
    "CreateViewCommand": catalog.create_view,
    "AlterViewAsCommand": catalog.alter_view_as,
    "InsertIntoHiveTable": catalog.insert_into_hive_table,
    "InsertIntoHiveDirCommand": catalog.insert_into_hive_dir,
    # DDL: what a command did to a table (lifecycle): session catalog commands, then V2 catalogs' (Delta, Iceberg)
    "AlterTableAddColumnsCommand": lifecycle.alter_v1,
    "AlterTableChangeColumnCommand": lifecycle.alter_v1,
    "AlterTableSetPropertiesCommand": lifecycle.alter_v1,
    "AlterTableUnsetPropertiesCommand": lifecycle.alter_v1,
    "AlterTableSetLocationCommand": lifecycle.alter_v1,
    "AlterTableRenameCommand": lifecycle.rename_v1,
    "TruncateTableCommand": lifecycle.truncate_v1,
    "DropTableCommand": lifecycle.drop_v1,
    "CreateTable": lifecycle.create_v2,
    "ReplaceTable": lifecycle.create_v2,
    "AddColumns": lifecycle.alter_v2,
    "ReplaceColumns": lifecycle.alter_v2,
    "RenameColumn": lifecycle.alter_v2,
    "AlterColumn": lifecycle.alter_v2,
    "AlterColumns": lifecycle.alter_v2,
    "DropColumns": lifecycle.alter_v2,
    "SetTableProperties": lifecycle.alter_v2,
    "UnsetTableProperties": lifecycle.alter_v2,
    "SetTableLocation": lifecycle.alter_v2,
    "TruncateTable": lifecycle.alter_v2,
    "RenameTable": lifecycle.rename_v2,
    "DropTable": lifecycle.drop_v2,
    "InsertIntoDataSourceCommand": v1.insert_into_data_source,
    "SaveIntoDataSourceCommand": v1.save_into_data_source,
    "AppendData": v2.append_data,
    "OverwriteByExpression": v2.overwrite_by_expression,
    "OverwritePartitionsDynamic": v2.overwrite_partitions_dynamic,
    "ReplaceData": v2.row_level_write,
    "WriteDelta": v2.row_level_write,
    "DeleteFromTableWithFilters": v2.delete_from_table,
    "DeleteFromTable": v2.delete_from_table,
    "CreateTableAsSelect": lifecycle.table_as_select_named,
    "ReplaceTableAsSelect": lifecycle.table_as_select_named,
    "MergeIntoCommand": delta.merge,
    "UpdateCommand": delta.update,
    "DeleteCommand": delta.delete,
    # A streaming query's sink (the write node of its last micro-batch: extract_stream_lineage)
    "WriteToMicroBatchDataSourceV1": streaming.micro_batch_v1,
    "WriteToMicroBatchDataSource": streaming.micro_batch_v2,
}

INPUTS: dict[str, InputHandler] = {
    "LogicalRelation": v1.logical_relation,
    "HiveTableRelation": catalog.hive_table_relation,
    # A persisted view, read in the analyzed plan (the optimizer removes View nodes): see catalog
    "View": catalog.view_relation,
    "DataSourceV2Relation": v2.v2_relation,
    "DataSourceV2ScanRelation": v2.v2_scan_relation,
    # A streaming query's micro-batch (read behind foreachBatch: see origins)
    "StreamingDataSourceV2Relation": v2.streaming_v2_relation,
    "StreamingDataSourceV2ScanRelation": v2.v2_scan_relation,
    "LogicalRDD": rdd.rdd_relation,
    "ExternalRDD": rdd.rdd_relation,
    # A streaming query's V1 source (its logical plan: extract_stream_lineage)
    "StreamingExecutionRelation": streaming.execution_relation,
}

#: Leaves that read no dataset. Any other leaf that is not in ``INPUTS`` makes the result incomplete
#: (``extract.py``), and so does a handler that cannot name what its leaf reads: ``complete`` never claims
#: inputs that were not traced. ``CommandResult`` holds the rows of a command that ran as an action of its own;
#: ``CTERelationRef`` reads a ``CTERelationDef`` of the same plan, whose leaves are read there.
NO_DATASET = frozenset({
    "LocalRelation", "OneRowRelation", "Range", "UnresolvedRelation",
    "ResolvedIdentifier", "ResolvedNamespace", "ResolvedTable", "InMemoryRelation",
    "CommandResult", "CTERelationRef",
})
