"""Errors of the refresh runner.

    LineagewireError
    └── RunnerError              the runner cannot do what a command asks
        ├── RefreshQueryError    the table's query and the table do not fit (names the columns)
        └── RefreshCanceled      a CancelRefresh arrived; the run ends CANCELED
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = ["RefreshCanceled", "RefreshQueryError", "RunnerError"]


class RunnerError(LineagewireError):
    """Base of the refresh runner's errors."""


class RefreshQueryError(RunnerError):
    """The defining query does not produce what the table needs."""


class RefreshCanceled(RunnerError):
    """The refresh was cancelled by a CancelRefresh command.

    The message starts with "job cancelled" so the emitter reports the run as CANCELED, like a cancelled Spark job.
    """

    def __init__(self, command_id: str, reason: str) -> None:
        super().__init__(f"job cancelled: refresh {command_id} ({reason or 'no reason given'})")
        self.command_id = command_id
