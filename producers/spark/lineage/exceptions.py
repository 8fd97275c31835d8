"""Errors of lineage extraction.

    LineagewireError
    └── LineageError                 extraction could not finish
        ├── PlanFormatError          the plan JSON is not what Spark's toJSON() gives
        └── BudgetExceededError      the time budget ran out

``extract_action_lineage`` never lets these escape: it turns them into
``ActionLineage(complete=False, incomplete_reason=...)``.
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = ["BudgetExceededError", "LineageError", "PlanFormatError"]


class LineageError(LineagewireError):
    """Lineage extraction from a Spark plan could not finish."""


class PlanFormatError(LineageError):
    """The plan JSON does not have the shape of ``TreeNode.toJSON()``."""


class BudgetExceededError(LineageError):
    """The time budget of one extraction ran out."""
