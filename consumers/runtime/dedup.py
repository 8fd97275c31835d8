"""A bounded window of recently handled event ids."""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["DedupWindow"]


class DedupWindow:
    """Remembers the last ``size`` event ids; the oldest is forgotten first.

    It catches redelivery within one process (a rebalance, a retried batch);
    across restarts idempotence rests on the outputs' deterministic ids.
    """

    def __init__(self, size: int = 100_000) -> None:
        if size < 0:
            raise ValueError(f"dedup window size={size}; expected >= 0")
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, event_id: str) -> bool:
        return event_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, event_id: str) -> None:
        if self.size == 0:
            return
        self._ids[event_id] = None
        self._ids.move_to_end(event_id)
        while len(self._ids) > self.size:
            self._ids.popitem(last=False)

    def clear(self) -> None:
        """Forget every id (events handed to a handler that were not made durable must be handled again)."""
        self._ids.clear()
