"""Datasets behind RDDs: a DataFrame built from an RDD (``createDataFrame(rdd)``, ``rdd.toDF()``).

The plan ends at a ``LogicalRDD`` (PySpark) or ``ExternalRDD`` (a Dataset of JVM objects). What the RDD
read is found by walking its dependencies on the JVM in one call (``PlanJson.rddInputs``, as
openlineage-spark's ``Rdds`` / ``RddDatasetInfoExtractor`` do), down to the RDDs that read:

- ``FileScanRDD``, under ``df.rdd`` of a file source: the folder of each file it reads, less its
  partition folders (``k=v``), which is the root path a direct read names, so a Parquet folder read
  through ``df.rdd`` is the same dataset as the folder read directly. Its read schema gives the columns:
  every column of the new DataFrame derives from every column read (``TRANSFORMATION``: the Python
  function in between is opaque, as for ``mapInPandas``).
- ``DataSourceRDD`` over file partitions (a V2 file source): the folders, as above; the RDD does not say
  which columns it reads, so there is no column lineage through it, and the result says so.
- ``HadoopRDD`` / ``NewHadoopRDD`` (``textFile``, ``hadoopFile``, ``newAPIHadoopFile``,
  ``WholeTextFileRDD``, ``BinaryFileRDD``): the input paths. ``RDD.toDebugString`` prints the chain one
  RDD per line as ``name Class[id] at method at site``, and SparkContext names these RDDs after the
  path they read: the creating method (``properties.rdd``) and format come from there. Their records
  are parsed, not columns of the files: no column lineage.
- An RDD of in-memory data (``parallelize``, which PySpark's ``createDataFrame`` of rows uses, an empty
  RDD) reads no dataset: it is fully traced and names none.
- Any other RDD without dependencies (a connector's own RDD, a checkpoint of unknown origin) or a
  ``DataSourceRDD`` partition that is not a file (Kafka, Iceberg) cannot be traced: the result is
  incomplete, naming its class.

A ``LogicalRDD`` cut from a plan that named its sources (``checkpoint()``, ``localCheckpoint()``,
a ``foreachBatch`` micro-batch) reports that plan's inputs and column lineage instead: see ``origins``.

Without lineagewire's compiled JVM classes only the debug string is read (one call): the Hadoop RDDs'
files are named, and an RDD class outside ``TRACEABLE_WITHOUT_JVM`` makes the result incomplete.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lineagewire.schemas.events import Boundedness, Dataset, dataset

from .. import origins
from ..columns import Sources, Trans
from ..context import Extraction
from ..naming import file_dataset_id
from ..plan import PlanNode
from ..schema import fields_of_struct_json

__all__ = ["FILE_METHODS", "FILE_RDDS", "IN_MEMORY_RDDS", "TRACEABLE_WITHOUT_JVM", "RddReads", "files_in_debug_string",
           "rdd_relation", "read_datasets"]

#: RDD classes that read files -> the dataset format they imply (None: any Hadoop InputFormat).
FILE_RDDS = {"HadoopRDD": None, "NewHadoopRDD": None, "WholeTextFileRDD": "text", "BinaryFileRDD": "binaryFile"}
#: SparkContext methods that read files -> format. Some name the RDD they return, not the reader
#: under it (wholeTextFiles names its map over an unnamed WholeTextFileRDD).
FILE_METHODS = {"textFile": "text", "wholeTextFiles": "text", "binaryFiles": "binaryFile", "hadoopFile": None,
                "newAPIHadoopFile": None, "sequenceFile": "sequencefile", "objectFile": "sequencefile"}

#: Leaf RDDs of in-memory data: they read no dataset.
IN_MEMORY_RDDS = frozenset({"ParallelCollectionRDD", "EmptyRDD"})
#: RDD classes whose inputs the debug string alone accounts for: the Hadoop RDDs (named after their paths),
#: in-memory data, and Spark's and PySpark's RDDs that only pass on their parents' rows.
TRACEABLE_WITHOUT_JVM = frozenset({
    *FILE_RDDS, *IN_MEMORY_RDDS, "MapPartitionsRDD", "PythonRDD", "PairwiseRDD", "ShuffledRDD", "UnionRDD",
    "PartitionerAwareUnionRDD", "CoalescedRDD", "CartesianRDD", "ZippedPartitionsRDD2", "ZippedPartitionsRDD3",
    "ZippedPartitionsRDD4", "CoGroupedRDD", "SubtractedRDD", "PartitionPruningRDD", "ZippedWithIndexRDD",
    "SQLExecutionRDD",
})
#: How a column of the DataFrame derives from each column an RDD read: the functions between are opaque.
_OPAQUE: Trans = ("DIRECT", "TRANSFORMATION", False)

_LINE = re.compile(r"^[\s|+\-]*(?:\(\d+\)\s+)?(?:(?P<name>\S.*?)\s+)?(?P<cls>\w+)\[\d+\] at (?P<method>\w+) at ")


def files_in_debug_string(text: str) -> list[tuple[str, str, str | None]]:
    """(path, creating method, format) of every file-reading RDD in ``RDD.toDebugString``, in order."""
    found: list[tuple[str, str, str | None]] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None or not m.group("name"):
            continue
        method, cls = m.group("method"), m.group("cls")
        if cls not in FILE_RDDS and method not in FILE_METHODS:
            continue  # a name the user gave some other RDD
        fmt = FILE_METHODS.get(method) or FILE_RDDS.get(cls)
        for path in m.group("name").split(","):
            entry = (path.strip(), method, fmt)
            if path.strip() and entry not in found:
                found.append(entry)
    return found


def rdd_relation(ctx: Extraction, node: PlanNode) -> list[Dataset]:
    """Input: ``LogicalRDD`` / ``ExternalRDD``: the origin's inputs (checkpoint, foreachBatch), else what the
    RDD chain read (see the module's doc)."""
    if node.simple == "LogicalRDD":
        from_origin = _origin_datasets(ctx, node)
        if from_origin is not None:
            return from_origin
    ctx.deadline.check_essential("walking the RDD dependencies")
    jrdd = ctx.j(node).rdd()
    found = ctx.jvm.rdd_inputs(jrdd) if ctx.jvm is not None else None
    if found is None:
        return _without_jvm_classes(ctx, node, str(jrdd.toDebugString()))
    leaves, _, debug = found.partition("\x1e")
    reads = read_datasets(leaves, debug, where=node.simple, boundedness=ctx.boundedness(node))
    for gap in (*reads.untraced, *reads.no_columns):
        ctx.mark_incomplete(gap)
    if reads.sources:
        ctx.add_leaf_sources(node, [reads.sources] * len(ctx.graph.output(node)), {})
    return reads.datasets


def _origin_datasets(ctx: Extraction, node: PlanNode) -> list[Dataset] | None:
    """The inputs of the plan a ``LogicalRDD`` was cut from (checkpoint, foreachBatch), with its column
    lineage; None when that plan is not known."""
    key = tuple(a.expr_id for a in ctx.graph.output(node))
    origin = origins.find(key)
    if origin is None or (not origin.complete and origin.how == "foreachBatch"):
        origin = ctx.stream_origin(key) or origin
    if origin is None:
        return None
    if origin.gaps:
        ctx.mark_incomplete(f"the plan before {origin.how}: {origin.gaps}")
    if not origin.complete:
        ctx.mark_incomplete(f"the plan before {origin.how} ran out of time budget: no column lineage through it")
    ctx.add_leaf_sources(node, origin.columns, origin.indirect)
    return origin.datasets()


@dataclass
class RddReads:
    """What an RDD chain read (``PlanJson.rddInputs``' answer): the datasets, the source columns of every column
    made from them, and why the result is not complete: ``untraced`` RDDs (their input is unknown) and
    ``no_columns`` (files named, but not which columns were read)."""

    datasets: list[Dataset] = field(default_factory=list)
    sources: Sources = field(default_factory=dict)
    untraced: list[str] = field(default_factory=list)
    no_columns: list[str] = field(default_factory=list)


def read_datasets(leaves: str, debug_string: str, *, where: str, boundedness: Boundedness) -> RddReads:
    """What the leaf RDDs (``PlanJson.rddInputs``' lines) and the Hadoop RDDs of ``debug_string`` read; ``where``
    starts each reason (the plan node, or the RDD-only job's action). A leaf that cannot be traced is a gap."""
    reads = RddReads(datasets=_hadoop_files(boundedness, debug_string))
    named = {(d["namespace"], d["name"]) for d in reads.datasets}
    for line in leaves.splitlines():
        kind, cls, schema, paths = [*line.split("\t"), "", "", ""][:4]
        simple = cls.rsplit(".", 1)[-1]
        if kind in ("scan", "source", "hadoop"):
            _add_files(boundedness, simple, schema, paths.split("\x1f"), named, reads)
            if kind == "source":
                reads.no_columns.append(f"{where}: the RDD reads files through {simple}, which does not say which "
                                        "columns it reads: no column lineage from them")
        elif kind == "partition":
            reads.untraced.append(f"{where}: the RDD reads input partitions of class {cls}, a data source "
                                  "lineagewire does not name")
        elif simple not in IN_MEMORY_RDDS:
            reads.untraced.append(f"{where}: the RDD reads through {cls}, whose input lineagewire cannot trace")
    return reads


def _add_files(boundedness: Boundedness, rdd_class: str, schema: str, paths: list[str],
               named: set[tuple[str, str]], reads: RddReads) -> None:
    """One file-reading leaf RDD: a dataset per folder not ``named`` yet, each column read a source of all."""
    fields = fields_of_struct_json(schema) if schema else []
    for path in filter(None, paths):
        ident = file_dataset_id(path)
        if ident in named:
            continue
        named.add(ident)
        reads.datasets.append(dataset(*ident, format=FILE_RDDS.get(rdd_class), fields=fields,
                                      boundedness=boundedness, properties={"rdd": rdd_class}))
        for f in fields:
            reads.sources[(*ident, f["name"])] = {_OPAQUE}


def _hadoop_files(boundedness: Boundedness, debug_string: str) -> list[Dataset]:
    # The DataFrame's columns are parsed from the files' records, not columns of the files: the
    # 'rdd' property keeps them out of column lineage.
    return [dataset(*file_dataset_id(path), format=fmt, boundedness=boundedness,
                    properties={"rdd": method})
            for path, method, fmt in files_in_debug_string(debug_string)]


def _without_jvm_classes(ctx: Extraction, node: PlanNode, debug_string: str) -> list[Dataset]:
    """The Hadoop RDDs' files from the debug string alone; incomplete if the chain has an RDD class that only
    the JVM walk can look into."""
    unknown = sorted({m.group("cls") for m in map(_LINE.match, debug_string.splitlines())
                      if m is not None and m.group("cls") not in TRACEABLE_WITHOUT_JVM})
    if unknown:
        ctx.mark_incomplete(f"{node.simple}: the RDD goes through {', '.join(unknown)}, which only lineagewire's "
                            "compiled JVM classes can trace (not compiled yet: a JDK's javac is needed)")
    return _hadoop_files(ctx.boundedness(node), debug_string)
