"""The Spark side of the refresh scheduler: executes RefreshCommands as INSERT OVERWRITE of static partitions,
inside ``job_run(...)`` so status and lineage flow back; CancelRefresh interrupts a running refresh."""

from .exceptions import RefreshCanceled, RefreshQueryError, RunnerError
from .refresh import execute_refresh, insert_statement
from .runner import RefreshRunner
from .state import CompletedStore

__all__ = ["CompletedStore", "RefreshCanceled", "RefreshQueryError", "RefreshRunner", "RunnerError",
           "execute_refresh", "insert_statement"]
