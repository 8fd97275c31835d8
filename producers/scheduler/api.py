"""The WorkflowScheduler contract (after Flink's ``WorkflowScheduler``) and its value types.

A *workflow* refreshes one materialized table: periodically on a cron, or
once for one nominal time. Each *fire* (a nominal time) becomes one
*refresh*, published as a RefreshCommand; its status comes back from the job
status events of the run that executed it.

Implementations: ``EmbeddedWorkflowScheduler`` (persistent, SQLAlchemy).
"""

from __future__ import annotations

import abc
import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["RefreshHandler", "RefreshInfo", "TableStatus", "WorkflowInfo", "WorkflowScheduler"]

WORKFLOW_STATUSES = ("ACTIVE", "PAUSED", "COMPLETED")
#: PENDING: claimed, not yet on Kafka; HELD: not published because an input is broken; QUEUED: on Kafka, no status
#: yet; then what the run reported.
REFRESH_STATUSES = ("PENDING", "HELD", "QUEUED", "RUNNING", "COMPLETED", "FAILED", "CANCELED", "ABANDONED")
TERMINAL_REFRESH = frozenset({"COMPLETED", "FAILED", "CANCELED", "ABANDONED"})


@dataclass(frozen=True)
class RefreshHandler:
    """A serialisable handle to a workflow, stored with the table (Flink's RefreshHandler)."""

    workflow_id: str
    table: str
    scheduler: str = "embedded"

    def serialize(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def deserialize(cls, text: str | bytes) -> RefreshHandler:
        doc = json.loads(text)
        return cls(workflow_id=doc["workflow_id"], table=doc["table"], scheduler=doc.get("scheduler", "embedded"))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dt.datetime):
        return obj.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_jsonable(v) for v in obj]
    return obj


@dataclass
class WorkflowInfo:
    """What a workflow is and where it stands. Times are aware UTC datetimes."""

    id: str
    name: str
    table: str
    kind: str  # PERIODIC | ONE_TIME | UPSTREAM
    status: str  # ACTIVE | PAUSED | COMPLETED
    cron: str | None
    time_zone: str
    misfire_policy: str
    catchup_cap: int
    next_fire: dt.datetime | None
    last_fire: dt.datetime | None
    created: dt.datetime
    updated: dt.datetime
    paused_at: dt.datetime | None = None
    #: what its commands say fired them: CRON, FRESHNESS, ONE_TIME, MANUAL or UPSTREAM
    refresh_trigger: str | None = None
    #: its refresh is published whatever holds it (``workflows refresh --force``)
    force: bool = False

    @property
    def handler(self) -> RefreshHandler:
        return RefreshHandler(self.id, self.table)

    def as_dict(self) -> dict[str, Any]:
        return _jsonable({**asdict(self), "handler": self.handler.serialize()})


@dataclass
class RefreshInfo:
    """One fire of a workflow and the status of its current attempt."""

    command_id: str
    workflow_id: str
    table: str
    nominal_time: dt.datetime
    trigger: str  # SCHEDULED | MISFIRE | BACKFILL | MANUAL | UPSTREAM | STALENESS: how the loop fired it
    status: str
    attempt: int
    run_id: str
    claimed_at: dt.datetime
    published_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    duration_ms: int | None = None
    error: str | None = None
    next_retry_at: dt.datetime | None = None
    #: the scheduler instance that claimed (and published) the current attempt
    claimed_by: str | None = None
    static_partitions: dict[str, str] = field(default_factory=dict)
    #: the command's header.schedule.trigger (CRON, FRESHNESS, ONE_TIME, MANUAL, UPSTREAM) and, for UPSTREAM,
    #: the upstream run (job_namespace, job_name, run_id)
    refresh_trigger: str | None = None
    trigger_run: dict[str, Any] | None = None
    #: why it is HELD (HoldReason dicts: condition, input, upstream_run, detail); [] unless HELD
    hold_reasons: list[dict[str, Any]] = field(default_factory=list)
    held_since: dt.datetime | None = None

    @property
    def retry_count(self) -> int:
        return self.attempt - 1

    def as_dict(self) -> dict[str, Any]:
        return _jsonable({**asdict(self), "retry_count": self.retry_count})


@dataclass
class TableStatus:
    """Refresh health of one table: healthy unless its newest finished refresh did not complete."""

    table: str
    healthy: bool
    reason: str
    last_success: dt.datetime | None
    latest: RefreshInfo | None
    counts: dict[str, int]
    #: the reasons of its newest HELD refresh ([] when none is held)
    hold_reasons: list[dict[str, Any]] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return bool(self.hold_reasons)

    def as_dict(self) -> dict[str, Any]:
        return _jsonable({"table": self.table, "healthy": self.healthy, "reason": self.reason,
                          "last_success": self.last_success, "counts": self.counts,
                          "latest": self.latest.as_dict() if self.latest else None, "held": self.held,
                          "hold_reasons": self.hold_reasons})


class WorkflowScheduler(abc.ABC):
    """Creates and manages refresh workflows. Contract:

    * ``open()`` before use and ``close()`` after; both idempotent.
    * Create returns the new WorkflowInfo; modify/delete of an unknown id raise UnknownWorkflowError,
      a change that does not fit the status raises WorkflowStateError, a bad cron CronError,
      an undeclared table UnknownTableError.
    * At most one refresh per (workflow, nominal time), whatever the number of instances.
    """

    @abc.abstractmethod
    def open(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def create_periodic(self, table: str, cron: str | None = None, *, name: str | None = None,
                        time_zone: str | None = None, misfire_policy: str | None = None,
                        catchup_cap: int | None = None, start: dt.datetime | None = None) -> WorkflowInfo: ...

    @abc.abstractmethod
    def create_one_time(self, table: str, *, nominal_time: dt.datetime | None = None,
                        name: str | None = None) -> WorkflowInfo: ...

    @abc.abstractmethod
    def suspend(self, workflow_id: str) -> WorkflowInfo: ...

    @abc.abstractmethod
    def resume(self, workflow_id: str, *, catch_up: bool = False) -> WorkflowInfo: ...

    @abc.abstractmethod
    def set_cron(self, workflow_id: str, cron: str, *, time_zone: str | None = None) -> WorkflowInfo: ...

    @abc.abstractmethod
    def delete(self, workflow_id: str) -> None: ...

    @abc.abstractmethod
    def get(self, workflow_id: str) -> WorkflowInfo: ...

    @abc.abstractmethod
    def list_workflows(self, *, table: str | None = None) -> list[WorkflowInfo]: ...

    @abc.abstractmethod
    def backfill(self, workflow_id: str, start: dt.datetime, end: dt.datetime) -> list[RefreshInfo]: ...

    @abc.abstractmethod
    def cancel(self, command_id: str, reason: str = "") -> RefreshInfo: ...

    @abc.abstractmethod
    def refreshes(self, *, workflow_id: str | None = None, table: str | None = None,
                  limit: int = 50) -> list[RefreshInfo]: ...

    @abc.abstractmethod
    def table_status(self, table: str) -> TableStatus: ...
