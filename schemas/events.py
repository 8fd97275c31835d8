"""Typed event classes of the contract, and constructors that fill the envelope.

Events are ``TypedDict``s: mypy checks their fields, and the codec hands them
to fastavro as they are, with no conversion step (see bench/codec). Field
docs live in the .avsc files; the names here match them one to one, and
``tests/schemas/test_events.py`` checks that they do.

Build events with the constructors (``job_status_changed(...)``); they set the
event id, time, producer, schema name and version.
"""

from __future__ import annotations

import datetime as dt
import socket
import uuid
from typing import Any, Literal, NotRequired, TypedDict

from ._repository import EVENT_SCHEMAS, SCHEMA_VERSION

JobStatus = Literal[
    "INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED",
    "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING", "UNKNOWN",
]
LifecycleState = Literal["STARTING", "STARTED", "TERMINATING", "TERMINATED", "FAILED", "FINISHED", "UNKNOWN"]
JobType = Literal["BATCH", "STREAMING", "UNKNOWN"]
ActionStatus = Literal["SUCCEEDED", "FAILED", "RUNNING", "UNKNOWN"]
Boundedness = Literal["BOUNDED", "CONTINUOUS_UNBOUNDED", "UNKNOWN"]
TransformationType = Literal["DIRECT", "INDIRECT", "UNKNOWN"]

#: Flink JobStatus values after which a run changes no more.
TERMINAL_STATUSES: frozenset[str] = frozenset({"FAILED", "CANCELED", "FINISHED"})

#: The lifecycle state that goes with each status (Ververica Platform's Job resource).
LIFECYCLE_OF_STATUS: dict[str, str] = {
    "INITIALIZING": "STARTING",
    "CREATED": "STARTING",
    "RUNNING": "STARTED",
    "RESTARTING": "STARTED",
    "RECONCILING": "STARTED",
    "FAILING": "TERMINATING",
    "CANCELLING": "TERMINATING",
    "SUSPENDED": "TERMINATED",
    "CANCELED": "TERMINATED",
    "FAILED": "FAILED",
    "FINISHED": "FINISHED",
    "UNKNOWN": "UNKNOWN",
}


class Producer(TypedDict):
    name: str
    version: str
    host: str


class RunRef(TypedDict):
    job_namespace: str
    job_name: str
    run_id: str


class ScheduleRef(TypedDict):
    workflow_id: str
    command_id: str
    nominal_time: dt.datetime
    attempt: int
    #: CRON, FRESHNESS, ONE_TIME, MANUAL or UPSTREAM; absent or None from schedulers before the field existed
    trigger: NotRequired[str | None]
    #: for UPSTREAM: the upstream run whose write triggered the refresh
    trigger_run: NotRequired[RunRef | None]


class EventHeader(TypedDict):
    event_id: str
    event_time: dt.datetime
    producer: Producer
    job_namespace: str
    job_name: str
    run_id: str
    parent_run: RunRef | None
    sequence: int
    schema_name: str
    schema_version: int
    schedule: ScheduleRef | None
    root_parent_run: RunRef | None
    #: version 2: JSON of the OpenLineage event an ingested event came from (schemas/openlineage.py); absent or
    #: None on events of lineagewire's own producers
    openlineage: NotRequired[str | None]


class ErrorInfo(TypedDict):
    error_class: str
    message: str
    stack_trace: str | None


class SchemaField(TypedDict):
    name: str
    type: str
    nullable: bool
    description: str | None
    fields: list[SchemaField]


class Symlink(TypedDict):
    namespace: str
    name: str
    type: str


class Dataset(TypedDict):
    namespace: str
    name: str
    format: str | None
    fields: list[SchemaField]
    symlinks: list[Symlink]
    boundedness: Boundedness
    operation: str | None
    partition_values: dict[str, str]
    properties: dict[str, str]
    # Version 2: absent from datasets built by hand before it (the codec writes their default, null).
    dataset_type: NotRequired[str | None]
    view_sql: NotRequired[str | None]
    lifecycle_change: NotRequired[str | None]
    previous_identifier: NotRequired[DatasetId | None]
    row_count: NotRequired[int | None]
    byte_count: NotRequired[int | None]


class DatasetId(TypedDict):
    namespace: str
    name: str


class LineageEdge(TypedDict):
    source: DatasetId
    sink: DatasetId


class Transformation(TypedDict):
    type: TransformationType
    subtype: str
    description: str
    masking: bool


class InputField(TypedDict):
    namespace: str
    name: str
    field: str
    transformations: list[Transformation]


class ColumnLineage(TypedDict):
    namespace: str
    name: str
    field: str
    inputs: list[InputField]


class LineageGraph(TypedDict):
    sources: list[Dataset]
    sinks: list[Dataset]
    relations: list[LineageEdge]
    column_lineage: list[ColumnLineage]


class JobSpec(TypedDict):
    application_name: str
    application_id: str | None
    engine: str
    engine_version: str
    master: str | None
    deploy_mode: str | None
    parallelism: int | None
    job_type: JobType
    conf: dict[str, str]
    sql: str | None
    tags: dict[str, str]


class JobCreatedEvent(TypedDict):
    header: EventHeader
    spec: JobSpec
    lineage: LineageGraph
    status: JobStatus


class JobStatusChangedEvent(TypedDict):
    header: EventHeader
    old_status: JobStatus | None
    new_status: JobStatus
    lifecycle_state: LifecycleState
    transition_time: dt.datetime
    error: ErrorInfo | None
    restarts: int
    duration_ms: int | None


class ActionLineageEvent(TypedDict):
    header: EventHeader
    action_id: str
    action_name: str
    action_status: ActionStatus
    plan_node: str | None
    sql: str | None
    duration_ms: int | None
    inputs: list[Dataset]
    outputs: list[Dataset]
    column_lineage: list[ColumnLineage]
    lineage_complete: bool
    incomplete_reason: str | None
    part: int
    parts: int
    error: ErrorInfo | None


class RefreshCommand(TypedDict):
    header: EventHeader
    command_id: str
    workflow_id: str
    table: str
    nominal_time: dt.datetime
    query: str
    static_partitions: dict[str, str]
    dynamic_options: dict[str, str]
    execution_config: dict[str, str]
    attempt: int
    deadline: NotRequired[dt.datetime | None]


class CancelRefresh(TypedDict):
    header: EventHeader
    command_id: str
    workflow_id: str
    table: str
    reason: str


class HoldReason(TypedDict):
    condition: str  # UPSTREAM_FAILED, UPSTREAM_RUNNING, BREAKING_CHANGE or INPUT_STALE
    input: DatasetId
    upstream_run: RunRef | None
    detail: str


class RefreshHeld(TypedDict):
    header: EventHeader
    command_id: str
    workflow_id: str
    table: str
    nominal_time: dt.datetime
    reasons: list[HoldReason]
    held_since: dt.datetime


Event = JobCreatedEvent | JobStatusChangedEvent | ActionLineageEvent | RefreshCommand | CancelRefresh | RefreshHeld


def utcnow() -> dt.datetime:
    """Now, UTC, at the microsecond precision the contract stores."""
    return dt.datetime.now(dt.UTC)


_HOST = socket.gethostname()


def default_producer(name: str = "lineagewire") -> Producer:
    from lineagewire import __version__

    return {"name": name, "version": __version__, "host": _HOST}


def kind_of(event: Event | dict[str, Any]) -> str:
    """Short kind of an event ('JobStatusChangedEvent'), from its header."""
    return event["header"]["schema_name"].rsplit(".", 1)[-1]


def header(
    kind: str,
    *,
    job_namespace: str,
    job_name: str,
    run_id: str,
    sequence: int = 0,
    parent_run: RunRef | None = None,
    schedule: ScheduleRef | None = None,
    root_parent_run: RunRef | None = None,
    producer: Producer | None = None,
    event_time: dt.datetime | None = None,
    event_id: str | None = None,
    openlineage: str | None = None,
) -> EventHeader:
    """The envelope of a new event of ``kind`` (a short name such as 'JobCreatedEvent')."""
    return {
        "event_id": event_id or str(uuid.uuid4()),
        "event_time": event_time or utcnow(),
        "producer": producer or default_producer(),
        "job_namespace": job_namespace,
        "job_name": job_name,
        "run_id": run_id,
        "parent_run": parent_run,
        "sequence": sequence,
        "schema_name": EVENT_SCHEMAS[kind],
        "schema_version": SCHEMA_VERSION,
        "schedule": schedule,
        "root_parent_run": root_parent_run,
        "openlineage": openlineage,
    }


def dataset(
    namespace: str,
    name: str,
    *,
    format: str | None = None,  # noqa: A002 - the contract's field name
    fields: list[SchemaField] | None = None,
    symlinks: list[Symlink] | None = None,
    boundedness: Boundedness = "BOUNDED",
    operation: str | None = None,
    partition_values: dict[str, str] | None = None,
    properties: dict[str, str] | None = None,
    dataset_type: str | None = None,
    view_sql: str | None = None,
    lifecycle_change: str | None = None,
    previous_identifier: DatasetId | None = None,
    row_count: int | None = None,
    byte_count: int | None = None,
) -> Dataset:
    return {
        "namespace": namespace,
        "name": name,
        "format": format,
        "fields": fields or [],
        "symlinks": symlinks or [],
        "boundedness": boundedness,
        "operation": operation,
        "partition_values": partition_values or {},
        "properties": properties or {},
        "dataset_type": dataset_type,
        "view_sql": view_sql,
        "lifecycle_change": lifecycle_change,
        "previous_identifier": previous_identifier,
        "row_count": row_count,
        "byte_count": byte_count,
    }


def schema_field(name: str, type: str, nullable: bool = True, description: str | None = None,  # noqa: A002
                 fields: list[SchemaField] | None = None) -> SchemaField:
    return {"name": name, "type": type, "nullable": nullable, "description": description, "fields": fields or []}


def empty_lineage() -> LineageGraph:
    return {"sources": [], "sinks": [], "relations": [], "column_lineage": []}


def job_spec(application_name: str, engine_version: str, **fields: Any) -> JobSpec:
    spec: JobSpec = {
        "application_name": application_name,
        "application_id": None,
        "engine": "spark",
        "engine_version": engine_version,
        "master": None,
        "deploy_mode": None,
        "parallelism": None,
        "job_type": "BATCH",
        "conf": {},
        "sql": None,
        "tags": {},
    }
    spec.update(fields)  # type: ignore[typeddict-item]
    return spec


def job_created(hdr: EventHeader, spec: JobSpec, lineage: LineageGraph | None = None,
                status: JobStatus = "CREATED") -> JobCreatedEvent:
    return {"header": hdr, "spec": spec, "lineage": lineage or empty_lineage(), "status": status}


def job_status_changed(
    hdr: EventHeader,
    new_status: JobStatus,
    old_status: JobStatus | None = None,
    *,
    error: ErrorInfo | None = None,
    restarts: int = 0,
    duration_ms: int | None = None,
    transition_time: dt.datetime | None = None,
    lifecycle_state: LifecycleState | None = None,
) -> JobStatusChangedEvent:
    return {
        "header": hdr,
        "old_status": old_status,
        "new_status": new_status,
        "lifecycle_state": lifecycle_state or LIFECYCLE_OF_STATUS[new_status],  # type: ignore[typeddict-item]
        "transition_time": transition_time or hdr["event_time"],
        "error": error,
        "restarts": restarts,
        "duration_ms": duration_ms,
    }


def action_lineage(
    hdr: EventHeader,
    action_id: str,
    action_name: str,
    *,
    inputs: list[Dataset] | None = None,
    outputs: list[Dataset] | None = None,
    column_lineage: list[ColumnLineage] | None = None,
    action_status: ActionStatus = "SUCCEEDED",
    plan_node: str | None = None,
    sql: str | None = None,
    duration_ms: int | None = None,
    lineage_complete: bool = True,
    incomplete_reason: str | None = None,
    part: int = 0,
    parts: int = 1,
    error: ErrorInfo | None = None,
) -> ActionLineageEvent:
    return {
        "header": hdr,
        "action_id": action_id,
        "action_name": action_name,
        "action_status": action_status,
        "plan_node": plan_node,
        "sql": sql,
        "duration_ms": duration_ms,
        "inputs": inputs or [],
        "outputs": outputs or [],
        "column_lineage": column_lineage or [],
        "lineage_complete": lineage_complete,
        "incomplete_reason": incomplete_reason,
        "part": part,
        "parts": parts,
        "error": error,
    }


def refresh_command(
    hdr: EventHeader,
    *,
    command_id: str,
    workflow_id: str,
    table: str,
    nominal_time: dt.datetime,
    query: str,
    static_partitions: dict[str, str] | None = None,
    dynamic_options: dict[str, str] | None = None,
    execution_config: dict[str, str] | None = None,
    attempt: int = 1,
    deadline: dt.datetime | None = None,
) -> RefreshCommand:
    return {
        "header": hdr,
        "command_id": command_id,
        "workflow_id": workflow_id,
        "table": table,
        "nominal_time": nominal_time,
        "query": query,
        "static_partitions": static_partitions or {},
        "dynamic_options": dynamic_options or {},
        "execution_config": execution_config or {},
        "attempt": attempt,
        "deadline": deadline,
    }


def cancel_refresh(hdr: EventHeader, *, command_id: str, workflow_id: str, table: str,
                   reason: str = "") -> CancelRefresh:
    return {"header": hdr, "command_id": command_id, "workflow_id": workflow_id, "table": table, "reason": reason}


def refresh_held(hdr: EventHeader, *, command_id: str, workflow_id: str, table: str, nominal_time: dt.datetime,
                 reasons: list[HoldReason], held_since: dt.datetime | None = None) -> RefreshHeld:
    return {"header": hdr, "command_id": command_id, "workflow_id": workflow_id, "table": table,
            "nominal_time": nominal_time, "reasons": reasons, "held_since": held_since or hdr["event_time"]}


def job_key(event: Event | dict[str, Any]) -> str:
    """The Kafka key of a job event: job namespace and name, so one job's events share a partition."""
    h = event["header"]
    return f"{h['job_namespace']}/{h['job_name']}"


def to_jsonable(value: Any) -> Any:
    """The event with datetimes as ISO-8601 UTC strings, ready for json.dumps."""
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return value


def summary(event: dict[str, Any]) -> str:
    """One human line for an event (used by the table view and logs)."""
    kind = kind_of(event)
    if kind == "JobStatusChangedEvent":
        err = event.get("error")
        text = f"{event['old_status'] or '-'} -> {event['new_status']} ({event['lifecycle_state']})"
        return text + (f" {err['error_class']}: {err['message'][:80]}" if err else "")
    if kind == "JobCreatedEvent":
        spec = event["spec"]
        return f"created {spec['job_type']} on {spec['engine']} {spec['engine_version']} master={spec['master']}"
    if kind == "ActionLineageEvent":
        ins = ",".join(d["name"] for d in event["inputs"]) or "-"
        outs = ",".join(d["name"] for d in event["outputs"]) or "-"
        done = "" if event["lineage_complete"] else " [incomplete]"
        return f"{event['action_name']} {event['action_status']} {ins} -> {outs}{done}"
    if kind == "RefreshCommand":
        return f"refresh {event['table']} @ {event['nominal_time'].isoformat()} attempt {event['attempt']}"
    if kind == "CancelRefresh":
        return f"cancel {event['command_id']} ({event['table']})"
    if kind == "RefreshHeld":
        why = ", ".join(f"{r['condition']} {r['input']['name']}" for r in event["reasons"])
        return f"held {event['table']} @ {event['nominal_time'].isoformat()}: {why}"
    return kind
