"""The refresh scheduler for materialized tables (after Flink's WorkflowScheduler).

Declare tables in YAML (``tables``), create periodic or one-time workflows
(``EmbeddedWorkflowScheduler``, persistent in any SQLAlchemy database), and
every fire publishes a RefreshCommand to Kafka for the Spark refresh runner.
The service (``service``) and the ``lineagewire workflows`` CLI wrap it.
"""

from .api import RefreshHandler, RefreshInfo, TableStatus, WorkflowInfo, WorkflowScheduler
from .commands import CommandSink, KafkaCommandSink, ListSink, Undelivered, command_id_for, run_id_for
from .cron import CronSchedule
from .embedded import EmbeddedWorkflowScheduler
from .exceptions import (
    BadRequestError,
    CronError,
    SchedulerError,
    TableDeclarationError,
    UnknownTableError,
    UnknownWorkflowError,
    WorkflowStateError,
)
from .options import SchedulerOptions
from .tables import MaterializedTable, TableCatalog, format_partition, load_tables, parse_tables

__all__ = [
    "BadRequestError",
    "CommandSink",
    "CronError",
    "CronSchedule",
    "EmbeddedWorkflowScheduler",
    "KafkaCommandSink",
    "ListSink",
    "MaterializedTable",
    "RefreshHandler",
    "RefreshInfo",
    "SchedulerError",
    "SchedulerOptions",
    "TableCatalog",
    "TableDeclarationError",
    "TableStatus",
    "Undelivered",
    "UnknownTableError",
    "UnknownWorkflowError",
    "WorkflowInfo",
    "WorkflowScheduler",
    "WorkflowStateError",
    "command_id_for",
    "format_partition",
    "load_tables",
    "parse_tables",
    "run_id_for",
]
