"""Rows and bytes an action wrote, from its write command's SQL metrics (the contract's ``row_count`` and
``byte_count`` of an output).

Spark's write commands count what they wrote in SQL metrics of the executed plan's root: a V1 file write
(``DataWritingCommandExec`` over ``InsertIntoHadoopFsRelationCommand``, ``InsertIntoHiveTable``) has
``numOutputRows`` and ``numOutputBytes`` from its ``BasicWriteJobStatsTracker``; a connector's command that
uses the same tracker has the same names. A CTAS (``CreateDataSourceTableAsSelectCommand``) has none: it runs
its insert as an action of its own, and that action carries the counts. Other commands (DDL, V2 writes whose
connector reports no such metrics) leave the counts null: "Spark did not say", not zero.

The cost is four py4j calls (the executed plan, its node name, its metrics, their text; three more when
adaptive execution wraps the write), made only for actions that write something: a read-only action makes
none (the emitter's overhead on them is benchmarked, ``bench.emitter``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from .context import Extraction
from .exceptions import BudgetExceededError

__all__ = ["attach", "parse_write_metrics", "write_node"]

log = logging.getLogger(__name__)

#: Spark's metric names for what a write wrote, by the contract field each fills.
_FIELDS = {"numOutputRows": "row_count", "numOutputBytes": "byte_count"}
#: One entry of the metrics map's text, ``numOutputRows -> SQLMetric(id: 3, name: Some(...), value: 100)``
#: (Spark 3.5 and 4.x alike); the name (an Option of free text) is skipped up to the value.
_ENTRY = re.compile(r"\b(numOutputRows|numOutputBytes) -> SQLMetric\(id: -?\d+, name: .*?, value: (-?\d+)\)")


def parse_write_metrics(text: str) -> dict[str, int | None]:
    """``row_count`` and ``byte_count`` from the text of a plan's ``metrics()`` map; None for what it lacks.

    A negative value is a metric that was never set (Spark 4 starts size metrics at -1): not a count.
    """
    found: dict[str, int | None] = dict.fromkeys(_FIELDS.values())
    for name, value in _ENTRY.findall(text):
        count = int(value)
        found[_FIELDS[name]] = count if count >= 0 else None
    return found


def attach(extraction: Extraction) -> None:
    """Set ``row_count`` and ``byte_count`` on the action's output from its executed plan's write metrics.

    Only an action with exactly one output is counted: Spark counts per command, so with several outputs which
    wrote what is not known. Never raises: metrics are a fact about the write, not lineage, so a failed or
    late look-up leaves the counts null without marking the lineage incomplete.
    """
    outputs = extraction.result.outputs
    if len(outputs) != 1 or extraction.qe is None:
        return
    try:
        extraction.deadline.check_essential("reading the write's metrics")
        text = str(write_node(extraction.qe.executedPlan()).metrics().toString())
    except BudgetExceededError:
        log.debug("no write metrics: the time budget is spent")
        return
    except Exception:  # noqa: BLE001 - a plan that could not be planned has no metrics: leave the counts null
        log.debug("the write's metrics could not be read", exc_info=True)
        return
    counts = parse_write_metrics(text)
    output = outputs[0]
    output["row_count"], output["byte_count"] = counts["row_count"], counts["byte_count"]


def write_node(plan: Any) -> Any:
    """The node of the executed plan ``plan`` (py4j) that ran the write: its root, or, when adaptive execution
    wraps the whole write (a write of a shuffled query), the root of the adaptive plan's final plan, itself
    wrapped in a ``ResultQueryStage`` since Spark 4.0. The counts are on that node: the command in the plan
    before adaptive execution re-planned it (``sparkPlan``) is a copy that never ran."""
    if str(plan.nodeName()) != "AdaptiveSparkPlan":
        return plan
    final = plan.executedPlan()
    return final.plan() if str(final.nodeName()) == "ResultQueryStage" else final
