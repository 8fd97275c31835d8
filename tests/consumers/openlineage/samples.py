"""lineagewire events shaped like the emitter's: an application run with actions, a scheduled refresh."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from lineagewire.schemas import (
    action_lineage,
    dataset,
    header,
    job_created,
    job_spec,
    job_status_changed,
    refresh_command,
    schema_field,
)

COLS = [schema_field("id", "bigint", False), schema_field("amount", "double"),
        schema_field("customer", "struct", fields=[schema_field("name", "string")])]


def _ds(name: str, **kw: Any) -> dict[str, Any]:
    return dataset("file", f"/data/{name}", format="parquet", fields=COLS, **kw)


def column_lineage(out: str, src: str) -> list[dict[str, Any]]:
    t = {"type": "DIRECT", "subtype": "AGGREGATION", "description": "sum(amount)", "masking": False}
    j = {"type": "INDIRECT", "subtype": "GROUP_BY", "description": "", "masking": False}
    return [{"namespace": "file", "name": f"/data/{out}", "field": "amount",
             "inputs": [{"namespace": "file", "name": f"/data/{src}", "field": "amount", "transformations": [t]},
                        {"namespace": "file", "name": f"/data/{src}", "field": "id", "transformations": [j]}]}]


def app_run(job: str = "daily_orders", *, namespace: str = "spark", actions: int = 2, fail: bool = False,
            run_id: str | None = None, schedule: dict[str, Any] | None = None,
            parent: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """JobCreated, RUNNING, ``actions`` ActionLineage events, then FINISHED (or FAILED)."""
    run_id = run_id or str(uuid.uuid4())
    t0 = dt.datetime(2026, 11, 1, 3, 0, tzinfo=dt.UTC)
    seq = iter(range(1000))

    def hdr(kind: str, i: int, parent_run: dict[str, Any] | None = parent) -> dict[str, Any]:
        return header(kind, job_namespace=namespace, job_name=job, run_id=run_id, sequence=next(seq),
                      parent_run=parent_run, schedule=schedule, event_time=t0 + dt.timedelta(seconds=i))

    src, dst = _ds("orders", symlinks=[{"namespace": "hive://metastore", "name": "sales.orders", "type": "TABLE"}]), \
        _ds(f"{job}_out", operation="OVERWRITE")
    lineage = {"sources": [src], "sinks": [dst], "relations": [], "column_lineage": column_lineage(f"{job}_out",
                                                                                                    "orders")}
    spec = job_spec(job, "4.0.0", master="local[2]", sql="INSERT OVERWRITE out SELECT ...")
    events: list[dict[str, Any]] = [job_created(hdr("JobCreatedEvent", 0), spec, lineage),
                                    job_status_changed(hdr("JobStatusChangedEvent", 1), "RUNNING", "CREATED")]
    app = {"job_namespace": namespace, "job_name": job, "run_id": run_id}
    for a in range(actions):
        events.append(action_lineage(hdr("ActionLineageEvent", 2 + a, parent_run=app), str(a),
                                     "InsertIntoHadoopFsRelationCommand", inputs=[src], outputs=[dst],
                                     column_lineage=column_lineage(f"{job}_out", "orders"), sql="SELECT ...",
                                     duration_ms=12))
    if fail:
        events.append(job_status_changed(hdr("JobStatusChangedEvent", 9), "FAILED", "RUNNING", error={
            "error_class": "org.apache.spark.SparkException", "message": "Job aborted", "stack_trace": "at ..."}))
    else:
        events.append(job_status_changed(hdr("JobStatusChangedEvent", 9), "FINISHED", "RUNNING", duration_ms=9000))
    return events


def refresh_run(table: str = "daily_orders") -> list[dict[str, Any]]:
    """The command the scheduler publishes, and the runner's run it starts (schedule + workflow parent)."""
    nominal = dt.datetime(2026, 11, 1, 0, 0, tzinfo=dt.UTC)
    wf = {"job_namespace": "lineagewire.scheduler", "job_name": f"refresh-{table}", "run_id": str(uuid.uuid4())}
    command_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"wf/{nominal.isoformat()}"))
    sched = {"workflow_id": "wf-1", "command_id": command_id, "nominal_time": nominal, "attempt": 1}
    cmd = refresh_command(header("RefreshCommand", job_namespace="lineagewire.scheduler", job_name=table,
                                 run_id=command_id, schedule=sched, parent_run=wf),
                          command_id=command_id, workflow_id="wf-1", table=table, nominal_time=nominal,
                          query="SELECT 1")
    return [cmd, *app_run(table, schedule=sched, parent=wf, actions=1)]


#: the statements of ``lifecycle_run``, in order: (action name, table, change, the table's columns after it)
LIFECYCLE_STEPS: list[tuple[str, str, str, int]] = [
    ("CreateTableCommand", "orders", "CREATE", 2),
    ("AlterTableAddColumnsCommand", "orders", "ALTER", 3),
    ("AlterTableRenameCommand", "orders_v2", "RENAME", 3),
    ("TruncateTableCommand", "orders_v2", "TRUNCATE", 3),
    ("DropTableCommand", "orders_v2", "DROP", 3),
    ("CreateTableCommand", "orders_v2", "CREATE", 1),
]


def table(name: str, columns: int, **kw: Any) -> dict[str, Any]:
    """A session-catalog table ``sales.<name>`` as the emitter names it: its location, the table as symlink."""
    return dataset("file", f"/warehouse/sales.db/{name}", format="parquet", fields=COLS[:columns],
                   symlinks=[{"namespace": "hive://metastore", "name": f"sales.{name}", "type": "TABLE"}], **kw)


def lifecycle_run(job: str = "ddl", run_id: str | None = None) -> list[dict[str, Any]]:
    """An application run of DDL, one action each (``LIFECYCLE_STEPS``): CREATE sales.orders, ALTER it (a column
    added), RENAME it to sales.orders_v2, TRUNCATE and DROP that, then CREATE it again with one column."""
    run_id = run_id or str(uuid.uuid4())
    t0 = dt.datetime(2026, 11, 2, 3, 0, tzinfo=dt.UTC)
    seq = iter(range(1000))

    def hdr(kind: str, i: int, parent_run: dict[str, Any] | None = None) -> dict[str, Any]:
        return header(kind, job_namespace="spark", job_name=job, run_id=run_id, sequence=next(seq),
                      parent_run=parent_run, event_time=t0 + dt.timedelta(seconds=i))

    lineage = {"sources": [], "sinks": [], "relations": [], "column_lineage": []}
    events: list[dict[str, Any]] = [job_created(hdr("JobCreatedEvent", 0), job_spec(job, "4.0.0"), lineage),
                                    job_status_changed(hdr("JobStatusChangedEvent", 1), "RUNNING", "CREATED")]
    app = {"job_namespace": "spark", "job_name": job, "run_id": run_id}
    for i, (action, name, change, columns) in enumerate(LIFECYCLE_STEPS):
        before = {"namespace": "file", "name": "/warehouse/sales.db/orders"} if change == "RENAME" else None
        out = table(name, columns, lifecycle_change=change, previous_identifier=before)
        events.append(action_lineage(hdr("ActionLineageEvent", 2 + i, parent_run=app), str(i), action,
                                     outputs=[out], sql=f"{change} TABLE sales.{name}", duration_ms=5))
    events.append(job_status_changed(hdr("JobStatusChangedEvent", 20), "FINISHED", "RUNNING", duration_ms=9000))
    return events
