"""Representative events of every kind, the same for every benchmark."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from lineagewire.schemas import (
    action_lineage,
    cancel_refresh,
    dataset,
    header,
    job_created,
    job_spec,
    job_status_changed,
    refresh_command,
    schema_field,
)


def _h(kind: str, seq: int = 0) -> Any:
    return header(kind, job_namespace="spark://bench", job_name="daily_orders", run_id=str(uuid.uuid4()),
                  sequence=seq)


def _fields(n: int) -> list:
    return [schema_field(f"col_{i}", "bigint" if i % 2 else "string") for i in range(n)]


def samples() -> dict[str, dict[str, Any]]:
    src = dataset("file", "/data/raw/orders", format="parquet", fields=_fields(12))
    out = dataset("file", "/warehouse/orders_daily", format="parquet", fields=_fields(8), operation="Overwrite")
    col = [{"namespace": "file", "name": "/warehouse/orders_daily", "field": f"col_{i}",
            "inputs": [{"namespace": "file", "name": "/data/raw/orders", "field": f"col_{i}",
                        "transformations": [{"type": "DIRECT", "subtype": "IDENTITY", "description": "",
                                             "masking": False}]}]} for i in range(8)]
    nominal = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    return {
        "JobStatusChangedEvent": job_status_changed(_h("JobStatusChangedEvent", 1), "RUNNING", "CREATED"),
        "JobCreatedEvent": job_created(
            _h("JobCreatedEvent"),
            job_spec("daily_orders", "4.0.0", master="local[2]", parallelism=2,
                     conf={"spark.sql.shuffle.partitions": "2", "spark.executor.memory": "2g"}),
            {"sources": [src], "sinks": [out], "relations": [], "column_lineage": []},
        ),
        "ActionLineageEvent": action_lineage(_h("ActionLineageEvent", 2), "3", "save", inputs=[src], outputs=[out],
                                             column_lineage=col, plan_node="InsertIntoHadoopFsRelationCommand",
                                             duration_ms=812),
        "RefreshCommand": refresh_command(_h("RefreshCommand"), command_id=str(uuid.uuid4()), workflow_id="wf-1",
                                          table="db.orders_daily", nominal_time=nominal,
                                          query="SELECT * FROM db.orders WHERE ds = '2026-11-22'",
                                          static_partitions={"ds": "2026-11-22"}),
        "CancelRefresh": cancel_refresh(_h("CancelRefresh"), command_id=str(uuid.uuid4()), workflow_id="wf-1",
                                        table="db.orders_daily", reason="operator"),
    }
