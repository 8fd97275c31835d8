"""Whether a table's inputs hold its refresh, and why (pure: no database, no clock of its own).

An input holds a refresh when it meets a condition the table's ``hold_on`` names (the contract's
``HoldCondition``):

=================  =====================================================================  ================
condition          the input                                                              upstream_run
=================  =====================================================================  ================
UPSTREAM_FAILED    its writer's last run failed (or was canceled, or suspended)           that run
UPSTREAM_RUNNING   its writer is running (a streaming writer runs by nature: never)       that run
BREAKING_CHANGE    its writes removed or retyped a column the table's query reads         the run that did
                   (readers whose columns are unknown read every column), or it was
                   dropped, truncated or renamed away
INPUT_STALE        it is older than its freshness promise (``datasets:``), inside the     its last writer
                   promise's business hours; an input never written is not stale
=================  =====================================================================  ================

``hold_on`` defaults to all but ``INPUT_STALE``. One input may meet several conditions: each is a reason.
``detail`` is one human line (``raw.events: writer ingest_events FAILED at 05:02 UTC: OOM``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from lineagewire.schemas.events import HoldReason, RunRef

if TYPE_CHECKING:
    from .inputs import InputState

__all__ = ["CONDITIONS", "DEFAULT_HOLD_ON", "HEALTH_OF", "conditions", "hold_reasons", "parse_hold_on", "when"]

#: the conditions that can hold a refresh, in the order reasons are listed
CONDITIONS = ("UPSTREAM_FAILED", "UPSTREAM_RUNNING", "BREAKING_CHANGE", "INPUT_STALE")
#: what holds a table's refresh when its declaration says nothing (staleness alone does not)
DEFAULT_HOLD_ON = frozenset(CONDITIONS) - {"INPUT_STALE"}
#: the health an input has when it meets each condition (``InputState.health``)
HEALTH_OF = {"UPSTREAM_FAILED": "failed", "UPSTREAM_RUNNING": "running", "BREAKING_CHANGE": "breaking",
             "INPUT_STALE": "stale"}

Run = tuple[str, str, str]


def parse_hold_on(value: object) -> frozenset[str]:
    """``hold_on`` of a declaration: None for the default, a list of conditions (any case), or ``[]`` for
    "never hold". ValueError naming the value and the conditions expected."""
    if value is None:
        return DEFAULT_HOLD_ON
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple | set | frozenset):
        raise ValueError(f"hold_on={value!r}: expected a list of {', '.join(CONDITIONS)}")
    out = set()
    for item in items:
        name = str(item).strip().upper()
        if name not in CONDITIONS:
            raise ValueError(f"hold_on: {item!r} is not a hold condition; expected one of {', '.join(CONDITIONS)}")
        out.add(name)
    return frozenset(out)


def when(t: dt.datetime, now: dt.datetime) -> str:
    """``05:02 UTC`` on ``now``'s day, ``2026-01-30 05:02 UTC`` on another."""
    t, now = t.astimezone(dt.UTC), now.astimezone(dt.UTC)
    return t.strftime("%H:%M UTC" if t.date() == now.date() else "%Y-%m-%d %H:%M UTC")


def _job(run: Run | None) -> str:
    return run[1] if run else "an unknown job"


def conditions(s: InputState, now: dt.datetime) -> list[tuple[str, Run | None, str]]:
    """Every condition input ``s`` meets at ``now``: (condition, upstream run, detail), in ``CONDITIONS`` order."""
    met = (_failed(s, now), _running(s, now), _breaking(s), _stale(s, now))
    return [m for m in met if m is not None]


def _failed(s: InputState, now: dt.datetime) -> tuple[str, Run | None, str] | None:
    if s.writer_status != "FAILED":
        return None
    at = f" at {when(s.writer_at, now)}" if s.writer_at else ""
    return ("UPSTREAM_FAILED", s.writer,
            f"{s.label}: writer {_job(s.writer)} FAILED{at}: {s.writer_error or 'no error reported'}")


def _running(s: InputState, now: dt.datetime) -> tuple[str, Run | None, str] | None:
    if s.writer_status != "RUNNING" or s.streaming_writer:
        return None
    since = f" since {when(s.writer_at, now)}" if s.writer_at else ""
    run = f" (run {s.writer[2]})" if s.writer else ""
    return ("UPSTREAM_RUNNING", s.writer, f"{s.label}: writer {_job(s.writer)} RUNNING{since}{run}")


def _breaking(s: InputState) -> tuple[str, Run | None, str] | None:
    if not s.breaking_columns:
        return None
    cols = "the whole dataset" if s.breaking_columns == ("*",) else ", ".join(s.breaking_columns)
    return ("BREAKING_CHANGE", s.breaking_run,
            f"{s.label}: {_job(s.breaking_run)} {s.breaking_change}; the query reads {cols}")


def _stale(s: InputState, now: dt.datetime) -> tuple[str, Run | None, str] | None:
    if s.promise is None or s.last_write_at is None or not s.promise.stale(s.last_write_at, now):
        return None
    return ("INPUT_STALE", s.last_write_run,
            f"{s.label}: last written {when(s.last_write_at, now)} by {_job(s.last_write_run)}, "
            f"{_age(now - s.last_write_at)} ago; promised: {s.promise.describe()}")


def _age(delta: dt.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours < 48 else f"{hours // 24}d{hours % 24}h"


def _run_ref(run: Run | None) -> RunRef | None:
    return {"job_namespace": run[0], "job_name": run[1], "run_id": run[2]} if run else None


def hold_reasons(inputs: Iterable[InputState], hold_on: Collection[str] = DEFAULT_HOLD_ON,
                 now: dt.datetime | None = None) -> list[HoldReason]:
    """The contract's ``HoldReason`` for every condition in ``hold_on`` an input meets at ``now`` (required when
    ``INPUT_STALE`` is held on, and for the times in the details); [] when nothing holds the refresh."""
    if now is None:
        if "INPUT_STALE" in hold_on:
            raise ValueError("hold_reasons: now=None with INPUT_STALE in hold_on; expected the time to judge "
                             "staleness at")
        now = dt.datetime.now(dt.UTC)
    reasons: list[HoldReason] = []
    for s in inputs:
        for condition, run, detail in conditions(s, now):
            if condition in hold_on:
                reasons.append({"condition": condition, "input": {"namespace": s.dataset[0], "name": s.dataset[1]},
                                "upstream_run": _run_ref(run), "detail": detail})
    return reasons
