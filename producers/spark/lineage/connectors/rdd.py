"""Files behind RDDs: a DataFrame built from an RDD (``createDataFrame(rdd)``, ``rdd.toDF()``).

The plan ends at a ``LogicalRDD`` (PySpark) or ``ExternalRDD`` (a Dataset of JVM objects). The files
are found by walking the RDD's dependencies on the JVM in one call: ``RDD.toDebugString`` prints the
whole chain (through shuffles and PySpark's own RDDs), one RDD per line as ``name Class[id] at
method at site``. The RDDs that read files (``HadoopRDD`` for ``textFile``/``hadoopFile``,
``NewHadoopRDD`` for ``newAPIHadoopFile``, ``WholeTextFileRDD``, ``BinaryFileRDD``) are named by
SparkContext after the path they read (a comma-separated list when several). An RDD of in-memory
data (``parallelize``) names no dataset.

A ``LogicalRDD`` cut from a plan that named its sources (``checkpoint()``, ``localCheckpoint()``,
a ``foreachBatch`` micro-batch) reports that plan's inputs and column lineage instead: see ``origins``.

Why not a hand-written walk over ``dependencies()``: that is one py4j round trip per RDD and per
dependency; the debug string is one, and Spark writes it from the same dependency graph.
"""

from __future__ import annotations

import re

from lineagewire.schemas.events import Dataset, dataset

from .. import origins
from ..context import Extraction
from ..naming import file_dataset_id
from ..plan import PlanNode

__all__ = ["FILE_METHODS", "FILE_RDDS", "files_in_debug_string", "rdd_relation"]

#: RDD classes that read files -> the dataset format they imply (None: any Hadoop InputFormat).
FILE_RDDS = {"HadoopRDD": None, "NewHadoopRDD": None, "WholeTextFileRDD": "text", "BinaryFileRDD": "binaryFile"}
#: SparkContext methods that read files -> format. Some name the RDD they return, not the reader
#: under it (wholeTextFiles names its map over an unnamed WholeTextFileRDD).
FILE_METHODS = {"textFile": "text", "wholeTextFiles": "text", "binaryFiles": "binaryFile", "hadoopFile": None,
                "newAPIHadoopFile": None, "sequenceFile": "sequencefile", "objectFile": "sequencefile"}

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
    """Input: ``LogicalRDD`` / ``ExternalRDD``: the origin's inputs (checkpoint, foreachBatch), else the files
    the RDD chain read, if any."""
    if node.simple == "LogicalRDD":
        key = tuple(a.expr_id for a in ctx.graph.output(node))
        origin = origins.find(key)
        if origin is None or (not origin.complete and origin.how == "foreachBatch"):
            origin = ctx.stream_origin(key) or origin
        if origin is not None:
            if origin.gaps:
                ctx.mark_incomplete(f"the plan before {origin.how}: {origin.gaps}")
            if not origin.complete:
                ctx.mark_incomplete(f"the plan before {origin.how} ran out of time budget: no column lineage "
                                    "through it")
            ctx.add_leaf_sources(node, origin.columns, origin.indirect)
            return origin.datasets()
    ctx.deadline.check_essential("walking the RDD dependencies")
    text = str(ctx.j(node).rdd().toDebugString())
    # The DataFrame's columns are parsed from the files' records, not columns of the files: the
    # 'rdd' property keeps them out of column lineage.
    return [dataset(*file_dataset_id(path), format=fmt, boundedness=ctx.boundedness(node),
                    properties={"rdd": method})
            for path, method, fmt in files_in_debug_string(text)]
