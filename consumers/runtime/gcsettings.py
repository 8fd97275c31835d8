"""Garbage-collector settings for a service process that keeps many decoded events alive at once.

CPython runs a young-generation collection every 700 net allocations and, every
hundred of those, a full one over every live container object. A service that
buffers thousands of decoded events (the audit archive holds a batch per
partition until it becomes Arrow columns) makes each full pass long while
finding almost nothing: those events are freed by reference counting, not by
the collector. ``tune_gc`` (called once by the service's command, after
startup) moves what startup created out of the collector's passes for good
(``gc.freeze``) and runs a young collection every ``young`` net allocations
instead; cycles are still collected, later. Process-wide, so library code never
calls it: the command that owns the process does.
"""

from __future__ import annotations

import gc

__all__ = ["tune_gc"]


def tune_gc(young: int = 50_000) -> None:
    """Freeze what exists now and collect the young generation every ``young`` net allocations."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
