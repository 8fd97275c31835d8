"""Oversized action lineage: split the column lineage over several events, never cut it silently.

An ``ActionLineageEvent`` whose encoded size exceeds ``max_bytes`` becomes
``parts`` events with the same ``action_id``, ``part`` 0..parts-1; each carries
the inputs and outputs and a slice of ``column_lineage``, so every part reads
on its own. The one thing that cannot be split, a single output column whose
lineage alone is over the limit, is left out and the part says so:
``lineage_complete=false`` with the reason naming the column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["split_action_lineage"]


def split_action_lineage(event: dict[str, Any], size: Callable[[dict[str, Any]], int],
                         max_bytes: int) -> list[dict[str, Any]]:
    """The parts of ``event`` (itself if it fits); ``size`` returns an event's encoded size.

    The parts share the original header; the caller gives each its own header
    (sequence, event id) before sending.
    """
    total = size(event)
    if total <= max_bytes:
        return [event]
    columns = event["column_lineage"]
    base = {**event, "column_lineage": []}
    base_size = size(base)
    budget = max_bytes - base_size
    parts: list[list[dict[str, Any]]] = [[]]
    used = 0
    dropped: list[str] = []
    for col in columns:
        one = size({**base, "column_lineage": [col]}) - base_size
        if one > budget:
            dropped.append(f"{col['namespace']}/{col['name']}.{col['field']}")
            continue
        if used + one > budget and parts[-1]:
            parts.append([])
            used = 0
        parts[-1].append(col)
        used += one
    out = []
    for i, cols in enumerate(parts):
        part = {**base, "column_lineage": cols, "part": i, "parts": len(parts)}
        if dropped:
            reason = (f"column lineage of {', '.join(dropped[:5])}{' ...' if len(dropped) > 5 else ''} exceeds "
                      f"max_event_bytes={max_bytes} on its own and was left out")
            part["lineage_complete"] = False
            part["incomplete_reason"] = "; ".join(r for r in (event.get("incomplete_reason"), reason) if r)
        out.append(part)
    return out
