"""What the firing loop asks of a table's inputs, and the one implementation over the scheduler's database.

The loop (``loop.py``) needs three answers about a table's inputs and nothing else:

* ``writes_after(table, after)``: the successful writes to its inputs that the scheduler stored after
  ``after`` (their ``recorded_at``), oldest first, each with the upstream run that made it: what triggers an
  UPSTREAM workflow;
* ``hold_reasons(table, now)``: why a refresh of it must not run now (HoldReason dicts of the contract, for the
  conditions its ``hold_on`` names); [] when nothing holds it;
* ``states(table, now)``: each input with its last write and health, as JSON (``GET /tables/{t}/inputs``).

``DbInputs`` answers them from the tables the inputs tracker (``inputs.py``) fills from ``lineage.jobs``, with
the pure hold rules of ``holds.py``. Tests pass their own ``Inputs``; a scheduler without one never holds and
fires no upstream refresh.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import sqlalchemy as sa

from .tables import MaterializedTable

if TYPE_CHECKING:
    from lineagewire.freshness import Promises

__all__ = ["DbInputs", "Inputs", "Write"]


class Write(NamedTuple):
    """A successful write to an input: when the scheduler stored it, and the upstream run that wrote it."""

    recorded_at: dt.datetime
    run: dict[str, Any] | None


class Inputs(Protocol):
    """The loop's view of a table's inputs; see the module docstring. Each call may raise a database error:
    the round then fails and is retried, nothing is published blind."""

    def writes_after(self, table: MaterializedTable, after: dt.datetime) -> list[Write]: ...

    def hold_reasons(self, table: MaterializedTable, now: dt.datetime) -> list[dict[str, Any]]: ...

    def states(self, table: MaterializedTable, now: dt.datetime) -> list[dict[str, Any]]: ...


class DbInputs:
    """``Inputs`` over the scheduler's database (``engine()`` returns its engine); ``promises``: the freshness
    promises of the ``datasets:`` section, which ``INPUT_STALE`` judges inputs by."""

    def __init__(self, engine: Callable[[], sa.Engine], promises: Promises | None = None) -> None:
        self._engine = engine
        self.promises = promises

    def writes_after(self, table: MaterializedTable, after: dt.datetime) -> list[Write]:
        from .inputs import writes_after

        with self._engine().connect() as c:
            found = writes_after(c, table, after)
        return sorted((Write(w.recorded_at, w.run) for w in found), key=lambda w: w.recorded_at)

    def _inputs(self, table: MaterializedTable, now: dt.datetime) -> list[Any]:
        from .inputs import inputs_of

        with self._engine().connect() as c:
            return list(inputs_of(c, table, now, promises=self.promises))

    def hold_reasons(self, table: MaterializedTable, now: dt.datetime) -> list[dict[str, Any]]:
        from .holds import hold_reasons

        if not table.hold_on:
            return []
        return [dict(r) for r in hold_reasons(self._inputs(table, now), table.hold_on, now)]

    def states(self, table: MaterializedTable, now: dt.datetime) -> list[dict[str, Any]]:
        return [i.as_json() for i in self._inputs(table, now)]
