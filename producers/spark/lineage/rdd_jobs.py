"""Lineage of Spark jobs that run no SQL query: RDD actions (``sc.textFile(a).map(f).saveAsTextFile(b)``).

The QueryExecutionListener never hears of them. The emitter's JVM SparkListener (``java/RddJobs.java``) reads,
when such a job starts, what its RDDs read (``PlanJson.rddInputs``, the walk ``df.rdd`` round trips use) and
where a Hadoop write puts its output (every ``saveAs*`` of RDDs), and hands it over as JSON when the job ends.
This module turns that JSON into an ``ActionLineage``, the result a QueryExecution's extraction gives:

- inputs: as ``connectors/rdd.py`` names an RDD chain's reads (``textFile``, ``wholeTextFiles``,
  ``binaryFiles``, ``hadoopFile``, ``newAPIHadoopFile``, ``sequenceFile``, ``pickleFile``, a file scan under
  ``df.rdd``); in-memory data (``parallelize``) reads no dataset;
- the output: the write's output folder, named as a DataFrame write of the folder is (``file_dataset_id``), its
  format from the Hadoop output format (``text``, ``sequencefile``), ``properties.rdd`` = the action;
- no column lineage: records go through Python functions, not columns;
- incomplete, with the reason, when an RDD in the chain cannot be traced or the job ended before its RDDs
  could be read.

The action is named as the user called it where Spark says: PySpark's own call site (``collect``, ``count``),
else the outermost RDD operation the job ran in (``saveAsTextFile``, ``saveAsHadoopFile``), else the job's
call site (``runJob`` for PySpark's ``take``). PySpark's ``saveAsPickleFile`` is the JVM's
``saveAsObjectFile``, and its ``saveAsSequenceFile`` runs as ``saveAsHadoopFile``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from lineagewire.schemas.events import Dataset, dataset

from .connectors.rdd import read_datasets
from .model import ActionLineage
from .naming import file_dataset_id

__all__ = ["RddJob", "job_lineage", "parse"]

#: JVM operations PySpark reaches under another name
_PYSPARK_NAMES = {"saveAsObjectFile": "saveAsPickleFile", "collectAndServe": "collect"}
#: Hadoop output formats -> the dataset format a DataFrame write would give (by class simple name)
_OUTPUT_FORMATS = {"TextOutputFormat": "text", "SequenceFileOutputFormat": "sequencefile",
                   "SequenceFileAsBinaryOutputFormat": "sequencefile"}
_METHOD = re.compile(r"^\s*([\w$]+)")


@dataclass
class RddJob:
    """One RDD-only Spark job as the JVM listener reported it (see the module's doc)."""

    job_id: int | None
    action: str
    status: str = "SUCCEEDED"
    duration_ms: int | None = None
    inputs: str | None = None
    output: dict[str, Any] | None = None
    untraced: list[str] = field(default_factory=list)


def parse(text: str) -> RddJob:
    """The job ``JobEventsListener`` sent; a job it could not describe is an ``RddJob`` saying so."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return RddJob(None, "rddJob", untraced=[f"the job's description could not be read: {exc}"])
    start, end = raw.get("start_ms"), raw.get("end_ms")
    return RddJob(
        job_id=raw.get("job_id"), action=action_name(raw), status=raw.get("status") or "SUCCEEDED",
        duration_ms=int(end - start) if isinstance(start, int) and isinstance(end, int) else None,
        inputs=raw.get("inputs"), output=raw.get("output"), untraced=list(raw.get("untraced") or []))


def action_name(raw: dict[str, Any]) -> str:
    """The RDD action the job ran, as PySpark names it (see the module's doc)."""
    name = _method(raw.get("call_site"))
    if name is None and raw.get("scope"):
        try:
            name = json.loads(raw["scope"]).get("name") or None
        except (ValueError, AttributeError):
            name = None
    name = name or _method(raw.get("stage")) or "rddJob"
    return _PYSPARK_NAMES.get(name, name)


def _method(call_site: Any) -> str | None:
    # Spark's short call site: "collect at /jobs/daily.py:12", "runJob at PythonRDD.scala:189"
    found = _METHOD.match(call_site) if isinstance(call_site, str) else None
    return found.group(1) if found else None


def job_lineage(job: RddJob) -> ActionLineage:
    """The job's inputs and output as an extraction result (see the module's doc)."""
    result = ActionLineage()
    for reason in job.untraced:
        result.mark_incomplete(f"{job.action}: {reason}")
    if job.inputs is not None:
        leaves, _, debug = job.inputs.partition("\x1e")
        reads = read_datasets(leaves, debug, where=job.action, boundedness="BOUNDED")
        result.inputs = reads.datasets
        for gap in reads.untraced:  # no_columns does not apply: an RDD job has no column lineage
            result.mark_incomplete(gap)
    if job.output is not None:
        out = _output(job)
        if out is None:
            result.mark_incomplete(f"{job.action}: the write's Hadoop configuration names no output folder "
                                   f"(output format {job.output.get('format')})")
        else:
            result.outputs = [out]
    return result


def _output(job: RddJob) -> Dataset | None:
    output = job.output or {}
    path = output.get("path")
    if not path:
        return None
    output_format = output.get("format") or ""
    properties = {"rdd": job.action}
    if output_format:
        properties["output_format"] = output_format
    return dataset(*file_dataset_id(path), format=_OUTPUT_FORMATS.get(output_format.rsplit(".", 1)[-1]),
                   properties=properties)
