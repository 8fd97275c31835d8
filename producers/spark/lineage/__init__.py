"""Lineage of Spark actions from their Catalyst plans.

``extract_action_lineage(qe, func_name, budget_s=...)`` takes the
QueryExecution a QueryExecutionListener receives and returns an
``ActionLineage``: input and output datasets named after the OpenLineage
conventions (with schema, format, catalog-table symlinks, write operation,
static partitions) and column lineage (direct and indirect). It never raises.
See docs/lineage-coverage.md for what is covered.
"""

from __future__ import annotations

from .connectors.streaming import SINK_KINDS, described_path, sink_description
from .exceptions import BudgetExceededError, LineageError, PlanFormatError
from .extract import extract_action_lineage, extract_from_plan, extract_stream_lineage
from .model import ActionLineage

__all__ = [
    "SINK_KINDS",
    "ActionLineage",
    "BudgetExceededError",
    "LineageError",
    "PlanFormatError",
    "described_path",
    "extract_action_lineage",
    "extract_from_plan",
    "extract_stream_lineage",
    "sink_description",
]
