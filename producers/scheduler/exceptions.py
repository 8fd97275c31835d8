"""Errors of the refresh scheduler.

    LineagewireError
    └── SchedulerError               anything the scheduler refuses or cannot do
        ├── TableDeclarationError    a materialized-table file is wrong (names file, table, field, value)
        ├── UnknownTableError        a workflow names a table that is not declared          (HTTP 404)
        ├── CronError                a cron expression or time zone is not valid            (HTTP 422)
        ├── UnknownWorkflowError     no workflow / refresh with that id                     (HTTP 404)
        ├── WorkflowStateError       the change does not fit the workflow's status          (HTTP 409)
        ├── BadRequestError          any other malformed request, e.g. an empty backfill range  (HTTP 422)
        └── ServiceError             the scheduler service answered with an error (CLI side)
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = [
    "BadRequestError",
    "CronError",
    "SchedulerError",
    "ServiceError",
    "TableDeclarationError",
    "UnknownTableError",
    "UnknownWorkflowError",
    "WorkflowStateError",
]


class SchedulerError(LineagewireError):
    """Base of the scheduler's errors; ``http_status`` is what the service answers with."""

    http_status = 400


class TableDeclarationError(SchedulerError):
    """A materialized-table declaration is invalid; the message names file, table, field and value."""

    http_status = 422


class UnknownTableError(SchedulerError):
    """The table is not declared in the tables file."""

    http_status = 404


class CronError(SchedulerError):
    """A cron expression or time zone cannot be used."""

    http_status = 422


class UnknownWorkflowError(SchedulerError):
    """No workflow or refresh with that id."""

    http_status = 404


class WorkflowStateError(SchedulerError):
    """The change is not allowed in the workflow's current status (e.g. resuming a COMPLETED one)."""

    http_status = 409


class ServiceError(SchedulerError):
    """The scheduler service answered with an error status; ``status_code`` and the server's message."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"scheduler service answered {status_code}: {message}")
        self.status_code = status_code
        self.detail = message


class BadRequestError(SchedulerError):
    """A request is malformed in a way no other error names (e.g. a backfill range that ends before it starts)."""

    http_status = 422
