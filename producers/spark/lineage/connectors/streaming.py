"""Streaming queries: their sources and sinks, in the query's logical plan (``extract_stream_lineage``).

A query's logical plan (``StreamExecution.logicalPlan``) is the sink's write node over the query:

- ``WriteToMicroBatchDataSourceV1``: a V1 ``Sink`` (``FileStreamSink``, Delta's ``DeltaSink``,
  ``ForeachBatchSink``), with the writer's options (``path``) and, for ``toTable``, the ``catalogTable``;
- ``WriteToMicroBatchDataSource``: a V2 table (Kafka, memory, console, noop, ``foreach``, and catalog tables
  such as Iceberg's through ``toTable``), with the writer's options (``topic``) and the table's ``relation``.

Its V1 sources (files, Delta) are ``StreamingExecutionRelation``s, whose source says which folder it reads
only in its description (``FileStreamSource[file:/in]``, ``DeltaSource[file:/t]``); V2 sources (Kafka,
rate) are ``StreamingDataSourceV2Relation``s, named in ``v2``.

A sink's description (``StreamingQueryProgress.sink.description``, the sink's ``toString``) is read only
where nothing structured says it: the folder of a V1 sink started without a ``path`` option, and the
sink's name when the query starts (``sink_description``: the emitter names the query's job after it).
"""

from __future__ import annotations

import os
import re
from typing import Any

from lineagewire.schemas.events import Dataset, Symlink, dataset

from ..context import Extraction
from ..jvm import option, scala_map
from ..naming import file_dataset_id
from ..plan import PlanNode
from .delta_log import add_write_version
from .iceberg import iceberg_datasets, is_iceberg_table
from .kafka import kafka_save

__all__ = ["NO_DATASET_SINKS", "SINK_KINDS", "described_path", "execution_relation", "micro_batch_v1", "micro_batch_v2",
           "sink_description"]

#: Sinks that store no dataset, by class (``$``: Scala objects) -> the kind a query is named after.
#: ``foreachBatch`` hands each micro-batch to the user's function, whose own actions report what it writes.
NO_DATASET_SINKS = {"ForeachBatchSink": "foreachBatch", "ForeachWriterTable": "foreach", "MemorySink": "memory",
                    "ConsoleTable": "console", "NoopTable": "noop"}
#: V1 sinks and sources whose description is ``Kind[path]`` -> the format (None: the file format is not said).
_PATH_SINKS = {"DeltaSink": "delta", "FileSink": None}
_PATH_SOURCES = {"DeltaSource": "delta", "FileStreamSource": None}
#: V1 sources of in-memory data (tests, ``MemoryStream``): no dataset.
_MEMORY_SOURCES = ("MemoryStream",)
#: What ``sink_description`` answers for sinks that name no dataset when the query starts.
SINK_KINDS = frozenset({*NO_DATASET_SINKS.values(), "kafka"})
_DESCRIBED = re.compile(r"^(\w+)\[(.*)\]$", re.S)


def described_path(description: str, kinds: dict[str, str | None] | None = None) -> tuple[str, str, str | None] | None:
    """``(namespace, name, format)`` of a ``Kind[path]`` description of a path sink or source
    (``DeltaSink``, ``FileSink``, ``DeltaSource``, ``FileStreamSource``; ``kinds`` narrows them), else None."""
    kinds = kinds if kinds is not None else {**_PATH_SINKS, **_PATH_SOURCES}
    m = _DESCRIBED.match(description.strip())
    if m is None or m.group(1) not in kinds or not m.group(2):
        return None
    return (*file_dataset_id(_absolute(m.group(2))), kinds[m.group(1)])


def sink_description(description: str) -> tuple[str, str, str | None] | str:
    """What a sink's description (its ``toString``) names: ``(namespace, name, format)`` of a path sink
    (``DeltaSink[s3a://b/t]``, ``FileSink[file:/x]``), else the sink's kind (``foreachBatch``, ``console``,
    ``memory``, ``noop``, ``foreach``, ``kafka``) or, for a sink of no known form, its class name.

    Classes without a ``toString`` of their own print ``class@hash`` (``KafkaTable``, ``ConsoleTable$``):
    the hash changes from run to run and is dropped.
    """
    found = described_path(description, _PATH_SINKS)
    if found is not None:
        return found
    cls = re.sub(r"@[0-9a-f]+$", "", description.strip()).rsplit(".", 1)[-1].rsplit("$", 2)
    simple = cls[-1] or cls[0]  # 'KafkaSourceProvider$KafkaTable' -> 'KafkaTable'; 'ConsoleTable$' -> 'ConsoleTable'
    if simple == "KafkaTable":
        return "kafka"
    return NO_DATASET_SINKS.get(simple, simple)


def _absolute(path: str) -> str:
    """A sink path as Hadoop resolves it: a scheme-less relative path is under the driver's working folder."""
    if "://" in path or path.startswith(("/", "file:")):
        return path
    return os.path.abspath(path)


def _simple_class(obj: Any) -> str:
    return str(obj.getClass().getSimpleName()).rstrip("$")


def _table_name(catalog_table: Any) -> str:
    ident = catalog_table.identifier()
    database = option(ident.database())
    return f"{database}.{ident.table()}" if database else str(ident.table())


def execution_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``StreamingExecutionRelation``, a V1 source of a streaming query (files, Delta), by the folder its
    description names; a TABLE symlink when it was read with ``readStream.table``."""
    ctx.deadline.check_essential("looking up a streaming source")
    jnode = ctx.j(node)
    source = jnode.source()
    text = str(source.toString())
    found = described_path(text, _PATH_SOURCES)
    if found is None:
        if text.startswith(_MEMORY_SOURCES):
            return []
        raise LookupError(f"streaming source {source.getClass().getName()} ({text[:100]}) is not supported")
    catalog_table = option(jnode.catalogTable())
    symlinks = [ctx.table_symlink(_table_name(catalog_table))] if catalog_table is not None else []
    return [dataset(found[0], found[1], format=found[2], fields=ctx.fields_of(node), symlinks=symlinks,
                    boundedness="CONTINUOUS_UNBOUNDED")]


def _query(node: PlanNode) -> PlanNode | None:
    return node.nested.get("query") or (node.children[0] if node.children else None)


def _output_mode(jnode: Any) -> str:
    """The query's output mode as the operation: ``Append``, ``Update`` or ``Complete``."""
    return str(jnode.outputMode().toString())


def _write_options(jnode: Any, *keys: str) -> dict[str, str]:
    """Only the writer's options that name the target (the others may hold credentials)."""
    opts = {k.lower(): v for k, v in scala_map(jnode.writeOptions()).items()}
    return {k: opts[k] for k in keys if k in opts}


def micro_batch_v1(ctx: Extraction, node: PlanNode) -> None:
    """``WriteToMicroBatchDataSourceV1``: a V1 sink's folder (``path`` option, else its description), with the
    table's symlink and format when it was started by ``toTable``."""
    ctx.deadline.check_essential("looking up the streaming sink")
    jnode = ctx.j(node)
    sink = jnode.sink()
    kind = _simple_class(sink)
    if kind in NO_DATASET_SINKS:
        return
    query = _query(node)
    catalog_table = option(jnode.catalogTable())
    path = _write_options(jnode, "path").get("path")
    if catalog_table is not None:
        path = str(catalog_table.location().toString())
    if path is not None:
        namespace, name = file_dataset_id(_absolute(path))
    else:  # a sink that knows its folder otherwise: only its description says which
        described = sink_description(str(sink.toString()))
        if not isinstance(described, tuple):
            raise LookupError(f"streaming sink {sink.getClass().getName()} ({described}) names no path")
        namespace, name = described[:2]
    fmt = "delta" if kind == "DeltaSink" else None
    symlinks: list[Symlink] = []
    if catalog_table is not None:
        symlinks = [ctx.table_symlink(_table_name(catalog_table))]
        provider = option(catalog_table.provider())
        fmt = str(provider) if provider is not None else fmt
    ds = dataset(namespace, name, format=fmt, fields=ctx.query_fields(query, None), symlinks=symlinks,
                 operation=_output_mode(jnode), boundedness="CONTINUOUS_UNBOUNDED")
    add_write_version(ctx, ds)
    ctx.add_output(ds, query, None)


def micro_batch_v2(ctx: Extraction, node: PlanNode) -> None:
    """``WriteToMicroBatchDataSource``: a V2 streaming sink. Kafka by its ``topic`` option; a catalog table
    (``toTable``) by its relation; memory, console, noop and ``foreach`` store no dataset."""
    ctx.deadline.check_essential("looking up the streaming sink")
    jnode = ctx.j(node)
    table = jnode.table()
    kind = _simple_class(table)
    if kind in NO_DATASET_SINKS:
        return
    query = _query(node)
    fields = ctx.query_fields(query, None)
    mode = _output_mode(jnode)
    if kind == "KafkaTable":
        kafka_save(ctx, node, query, _write_options(jnode, "topic", "kafka.bootstrap.servers"), fields, mode)
        for ds in ctx.result.outputs:
            ds["boundedness"] = "CONTINUOUS_UNBOUNDED"
        return
    relation = option(jnode.relation())
    if relation is None:
        raise LookupError(f"streaming sink {table.getClass().getName()} is not supported")
    catalog, ident = option(relation.catalog()), option(relation.identifier())
    if is_iceberg_table(str(table.getClass().getName())):
        found = iceberg_datasets(ctx, None, table, fields, catalog=catalog, ident=ident, write=True)
    else:
        name = str(ident.toString()) if ident is not None else str(table.name())
        found = [dataset(str(catalog.name()) if catalog is not None else "spark", name, fields=fields)]
    for ds in found:
        ds["operation"], ds["boundedness"] = mode, "CONTINUOUS_UNBOUNDED"
        ctx.add_output(ds, query, None)

