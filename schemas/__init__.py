"""The lineagewire event contract: Avro schemas (``avro/*.avsc``), typed events, and the codec.

The .avsc files are the public API. ``released/v<N>/`` keeps every released
version; the tests check that each resolves to the current one and back.
"""

from lineagewire.exceptions import DecodeError, SchemaError

from ._repository import EVENT_SCHEMAS, SCHEMA_VERSION, full_name
from .codec import Codec
from .events import (
    TERMINAL_STATUSES,
    ActionLineageEvent,
    CancelRefresh,
    ColumnLineage,
    Dataset,
    Event,
    EventHeader,
    JobCreatedEvent,
    JobStatusChangedEvent,
    LineageGraph,
    RefreshCommand,
    RefreshHeld,
    RunRef,
    action_lineage,
    cancel_refresh,
    dataset,
    header,
    job_created,
    job_key,
    job_spec,
    job_status_changed,
    kind_of,
    refresh_command,
    refresh_held,
    schema_field,
    summary,
    to_jsonable,
    utcnow,
)

__all__ = [
    "EVENT_SCHEMAS", "SCHEMA_VERSION", "TERMINAL_STATUSES", "ActionLineageEvent", "CancelRefresh", "Codec",
    "ColumnLineage", "Dataset", "DecodeError", "Event", "EventHeader", "JobCreatedEvent", "JobStatusChangedEvent",
    "LineageGraph", "RefreshCommand", "RefreshHeld", "RunRef", "SchemaError", "action_lineage", "cancel_refresh",
    "dataset",
    "full_name", "header", "job_created", "job_key", "job_spec", "job_status_changed", "kind_of",
    "refresh_command", "refresh_held", "schema_field", "summary", "to_jsonable", "utcnow",
]
