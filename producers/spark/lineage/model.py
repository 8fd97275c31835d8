"""What one extraction returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lineagewire.schemas.events import ColumnLineage, Dataset

__all__ = ["ActionLineage"]


@dataclass
class ActionLineage:
    """Lineage of one Spark action (one QueryExecution).

    ``inputs``/``outputs`` and ``column_lineage`` are the contract's dicts
    (``lineagewire.schemas.events.Dataset`` / ``ColumnLineage``), ready to go
    into an ``ActionLineageEvent``. ``complete`` is False when anything was
    left out (time budget, an unknown relation, an error); ``incomplete_reason``
    then says what.
    """

    inputs: list[Dataset] = field(default_factory=list)
    outputs: list[Dataset] = field(default_factory=list)
    column_lineage: list[ColumnLineage] = field(default_factory=list)
    plan_node: str | None = None
    sql: str | None = None
    complete: bool = True
    incomplete_reason: str | None = None
    job_type: Literal["BATCH", "STREAMING"] = "BATCH"

    def mark_incomplete(self, reason: str) -> None:
        """Record one more reason the result is partial (reasons are joined with '; ')."""
        self.complete = False
        if self.incomplete_reason is None:
            self.incomplete_reason = reason
        elif reason not in self.incomplete_reason:
            self.incomplete_reason = f"{self.incomplete_reason}; {reason}"
