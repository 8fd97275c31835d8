"""Where the rows of a ``LogicalRDD`` came from, when a plan before it said so.

Two Spark operations cut a DataFrame from the plan that computed it and leave a ``LogicalRDD``
in its place, whose RDD lineage names no dataset (a checkpoint truncates it; a micro-batch's RDD
reads Kafka partitions, not files):

- ``checkpoint()`` / ``localCheckpoint()`` run as an action of their own, named ``checkpoint`` /
  ``localCheckpoint``, on the DataFrame being checkpointed: the listener sees that plan with its
  sources. ``LogicalRDD.fromDataset`` gives the new plan the same output attributes (the same
  exprIds) as that DataFrame's plan.
- ``foreachBatch`` hands each micro-batch to the user's function as ``LogicalRDD.fromDataset`` of the
  micro-batch's DataFrame: again the same output attributes as the streaming query's plan.

So an ``Origin`` (the inputs, and the source columns of each output attribute) is kept by the
output exprIds of the plan it was read from; a later ``LogicalRDD`` with those exprIds reports the
origin's inputs and column lineage. ExprIds are unique within the driver JVM, so a key cannot
meet another plan's. The store is bounded: the oldest origins go first.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass

from lineagewire.schemas.events import Dataset

from .columns import Sources

__all__ = ["CHECKPOINT_ACTIONS", "MAX_ORIGINS", "Origin", "find", "forget_all", "remember"]

#: The action names Spark's ``Dataset.checkpoint`` runs under.
CHECKPOINT_ACTIONS = frozenset({"checkpoint", "localCheckpoint"})
#: Origins kept at most (one per checkpointed DataFrame or streaming query: a few hundred bytes to a few kB).
MAX_ORIGINS = 512


@dataclass(frozen=True)
class Origin:
    """The inputs of a plan, and the source columns of its output attributes (in order).

    ``how`` says what cut the plan ("checkpoint", "localCheckpoint", "foreachBatch"): it goes into the
    inputs' ``properties["via"]``. ``complete`` is False when the time budget ran out before the plan's
    column lineage was traced (a streaming query's origin is then read again by the next batch). ``gaps``
    is why that plan's own lineage was incomplete (an input it could not name): every plan that reads
    the origin is incomplete for the same reason, not only the first.
    """

    key: tuple[int, ...]
    how: str
    inputs: list[Dataset]
    columns: list[Sources]
    indirect: Sources
    complete: bool = True
    gaps: str | None = None

    def datasets(self) -> list[Dataset]:
        """Copies of the inputs (a result's datasets are its own to change)."""
        out = copy.deepcopy(self.inputs)
        for ds in out:
            ds["properties"] = {**ds["properties"], "via": self.how}
        return out


_LOCK = threading.Lock()
_ORIGINS: OrderedDict[tuple[int, ...], Origin] = OrderedDict()


def remember(origin: Origin) -> None:
    """Keep ``origin`` for later plans whose ``LogicalRDD`` outputs ``origin.key``."""
    if not origin.key:
        return
    with _LOCK:
        _ORIGINS[origin.key] = origin
        _ORIGINS.move_to_end(origin.key)
        while len(_ORIGINS) > MAX_ORIGINS:
            _ORIGINS.popitem(last=False)


def find(key: tuple[int, ...]) -> Origin | None:
    with _LOCK:
        return _ORIGINS.get(key)


def forget_all() -> None:
    """Drop every origin (tests)."""
    with _LOCK:
        _ORIGINS.clear()
