"""Hand-made contract events for the alerting tests (built with the contract's constructors)."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from typing import Any

from lineagewire.schemas import action_lineage, dataset, header, job_created, job_spec, job_status_changed, schema_field

T0 = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


class RunBuilder:
    """Events of one run, numbered in sequence."""

    def __init__(self, job: str = "nightly_orders", namespace: str = "prod", *, run_id: str | None = None,
                 tags: dict[str, str] | None = None, job_type: str = "BATCH",
                 schedule: dict[str, Any] | None = None) -> None:
        self.job, self.namespace = job, namespace
        self.run_id = run_id or str(uuid.uuid4())
        self.tags = tags or {}
        self.job_type = job_type
        self.schedule = schedule
        self._seq = itertools.count()

    def _h(self, kind: str, when: dt.datetime, seq: int | None = None) -> Any:
        return header(kind, job_namespace=self.namespace, job_name=self.job, run_id=self.run_id,
                      sequence=next(self._seq) if seq is None else seq, event_time=when, schedule=self.schedule)

    def created(self, when: dt.datetime = T0) -> dict[str, Any]:
        spec = job_spec(self.job, "4.0.0", tags=self.tags, job_type=self.job_type)
        return dict(job_created(self._h("JobCreatedEvent", when), spec))

    def status(self, new: str, old: str | None, when: dt.datetime, *, error: dict[str, Any] | None = None,
               restarts: int = 0, duration_ms: int | None = None, seq: int | None = None) -> dict[str, Any]:
        return dict(job_status_changed(self._h("JobStatusChangedEvent", when, seq), new, old,  # type: ignore[arg-type]
                                       error=error, restarts=restarts, duration_ms=duration_ms))

    def action(self, when: dt.datetime, *, outputs: list[Any] | None = None, complete: bool = True,
               reason: str | None = None) -> dict[str, Any]:
        return dict(action_lineage(self._h("ActionLineageEvent", when), "1", "save", outputs=outputs,
                                   lineage_complete=complete, incomplete_reason=reason))

    def life(self, start: dt.datetime, seconds: float, end: str = "FINISHED", **kw: Any) -> list[dict[str, Any]]:
        """created, CREATED->RUNNING, RUNNING->end after ``seconds``."""
        return [self.created(start), self.status("RUNNING", "CREATED", start),
                self.status(end, "RUNNING", start + dt.timedelta(seconds=seconds),
                            duration_ms=int(seconds * 1000) if end == "FINISHED" else None, **kw)]


def error(cls: str = "org.apache.spark.SparkException", message: str = "Job aborted: boom", lines: int = 10
          ) -> dict[str, Any]:
    stack = "\n".join(f"\tat frame{i}(X.java:{i})" for i in range(lines))
    return {"error_class": cls, "message": message, "stack_trace": f"{cls}: {message}\n{stack}"}


def table(name: str, cols: dict[str, str]) -> Any:
    return dataset("file", name, format="parquet", fields=[schema_field(c, t) for c, t in cols.items()])
