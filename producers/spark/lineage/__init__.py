"""Lineage of Spark actions from their Catalyst plans.

``extract_action_lineage(qe, func_name, budget_s=...)`` takes the
QueryExecution a QueryExecutionListener receives and returns an
``ActionLineage``: input and output datasets named after the OpenLineage
conventions (with schema, format, catalog-table symlinks, write operation,
static partitions) and column lineage (direct and indirect). It never raises.
See docs/lineage-coverage.md for what is covered.
"""

from __future__ import annotations

from .exceptions import BudgetExceededError, LineageError, PlanFormatError
from .extract import extract_action_lineage, extract_from_plan
from .model import ActionLineage

__all__ = [
    "ActionLineage",
    "BudgetExceededError",
    "LineageError",
    "PlanFormatError",
    "extract_action_lineage",
    "extract_from_plan",
]
