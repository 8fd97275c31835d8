"""Refresh commands: deterministic ids, building the events, and where they are sent.

* ``command_id`` = uuid5(workflow id, nominal time in UTC ISO-8601): the same
  fire always has the same id, so a duplicate (a republish after a crash, two
  scheduler instances) is harmless: the runner skips an id it completed.
* ``run_id`` of attempt *n* = uuid5(command id, "attempt-n"): the runner
  passes it to ``job_run(run_id=...)``, and the job status events that come
  back carry it (and ``header.schedule``), which is how status is matched.

A ``CommandSink`` receives the events; ``KafkaCommandSink`` publishes them to
``settings.topics.refresh_commands`` keyed by table. Tests and the benchmark
pass their own sink.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import Any

from lineagewire.config import Settings
from lineagewire.exceptions import PublishError
from lineagewire.kafka.publisher import Outgoing, Publisher, Undelivered
from lineagewire.schemas import cancel_refresh, header, refresh_command, refresh_held
from lineagewire.schemas.events import HoldReason, RunRef, ScheduleRef

from .tables import MaterializedTable

log = logging.getLogger(__name__)

__all__ = ["CommandSink", "KafkaCommandSink", "ListSink", "Undelivered", "build_cancel", "build_command",
           "build_held", "command_id_for", "run_id_for", "workflow_run_ref"]

_NS = uuid.UUID("6f0b1f7e-5a1c-4c39-9d0e-0c6a1d2b7a11")


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat(timespec="microseconds")


def command_id_for(workflow_id: str, nominal_time: dt.datetime) -> str:
    """The id of the fire of ``workflow_id`` at ``nominal_time``."""
    return str(uuid.uuid5(_NS, f"{workflow_id}@{_iso(nominal_time)}"))


def run_id_for(command_id: str, attempt: int) -> str:
    """The run id the runner reports for ``attempt`` of a command."""
    return str(uuid.uuid5(uuid.UUID(command_id), f"attempt-{attempt}"))


def workflow_run_ref(namespace: str, workflow_name: str, workflow_id: str) -> RunRef:
    """The parent run of every refresh of a workflow: the workflow itself."""
    return {"job_namespace": namespace, "job_name": f"workflow {workflow_name}", "run_id": workflow_id}


def _schedule(workflow_id: str, cid: str, nominal_time: dt.datetime, attempt: int, trigger: str | None,
              trigger_run: RunRef | None) -> ScheduleRef:
    schedule: ScheduleRef = {"workflow_id": workflow_id, "command_id": cid, "nominal_time": nominal_time,
                             "attempt": attempt}
    if trigger is not None:
        schedule["trigger"] = trigger
        schedule["trigger_run"] = trigger_run
    return schedule


def build_command(table: MaterializedTable, *, workflow_id: str, workflow_name: str, nominal_time: dt.datetime,
                  attempt: int, time_zone: str | None = None, deadline: dt.datetime | None = None,
                  trigger: str | None = None, trigger_run: RunRef | None = None) -> dict[str, Any]:
    """The RefreshCommand of one attempt of one fire; ``trigger`` (CRON, FRESHNESS, ONE_TIME, MANUAL, UPSTREAM)
    and ``trigger_run`` (the upstream run of an UPSTREAM fire) go into ``header.schedule``."""
    cid = command_id_for(workflow_id, nominal_time)
    schedule = _schedule(workflow_id, cid, nominal_time, attempt, trigger, trigger_run)
    hdr = header("RefreshCommand", job_namespace=table.namespace, job_name=table.job_name,
                 run_id=run_id_for(cid, attempt), parent_run=workflow_run_ref(table.namespace, workflow_name,
                                                                               workflow_id),
                 schedule=schedule)
    return dict(refresh_command(
        hdr, command_id=cid, workflow_id=workflow_id, table=table.identifier, nominal_time=nominal_time,
        query=table.query, static_partitions=table.static_partitions(nominal_time, time_zone),
        dynamic_options=dict(table.dynamic_options), execution_config=dict(table.execution_config),
        attempt=attempt, deadline=deadline,
    ))


def build_held(table: MaterializedTable, *, workflow_id: str, workflow_name: str, command_id: str,
               nominal_time: dt.datetime, attempt: int, reasons: list[HoldReason], held_since: dt.datetime,
               trigger: str | None = None, trigger_run: RunRef | None = None) -> dict[str, Any]:
    """The RefreshHeld event of a refresh the scheduler holds instead of publishing it."""
    schedule = _schedule(workflow_id, command_id, nominal_time, attempt, trigger, trigger_run)
    hdr = header("RefreshHeld", job_namespace=table.namespace, job_name=table.job_name,
                 run_id=run_id_for(command_id, attempt),
                 parent_run=workflow_run_ref(table.namespace, workflow_name, workflow_id), schedule=schedule)
    return dict(refresh_held(hdr, command_id=command_id, workflow_id=workflow_id, table=table.identifier,
                             nominal_time=nominal_time, reasons=reasons, held_since=held_since))


def build_cancel(*, namespace: str, table: str, workflow_id: str, workflow_name: str, command_id: str,
                 nominal_time: dt.datetime, attempt: int, reason: str) -> dict[str, Any]:
    """The CancelRefresh for the current attempt of a command."""
    schedule: ScheduleRef = {"workflow_id": workflow_id, "command_id": command_id, "nominal_time": nominal_time,
                             "attempt": attempt}
    hdr = header("CancelRefresh", job_namespace=namespace, job_name=f"refresh {table}",
                 run_id=run_id_for(command_id, attempt),
                 parent_run=workflow_run_ref(namespace, workflow_name, workflow_id), schedule=schedule)
    return dict(cancel_refresh(hdr, command_id=command_id, workflow_id=workflow_id, table=table, reason=reason))


class CommandSink:
    """Where the scheduler sends commands. Contract:

    * ``deliver(events, timeout)`` sends the events and waits for their delivery; it returns, by position in
      ``events``, those that were not delivered and why (``Undelivered``). One event that cannot be sent never
      holds back the others. The default sends all with ``send`` and waits with ``flush``: all or nothing;
    * ``send(events)`` queues RefreshCommand / CancelRefresh events (dicts of the contract);
    * ``flush(timeout)`` returns once every queued event is durably delivered, or raises
      ``lineagewire.exceptions.PublishError``; the scheduler marks a fire published only then;
    * ``close()`` releases resources. Sending the same command twice must be harmless.
    """

    def deliver(self, events: list[dict[str, Any]], timeout: float = 30.0) -> dict[int, Undelivered]:
        try:
            self.send(events)
            self.flush(timeout)
        except Exception as exc:  # noqa: BLE001 - reported per event; they stay PENDING and are sent again
            return dict.fromkeys(range(len(events)), Undelivered(f"{type(exc).__name__}: {exc}"))
        return {}

    def send(self, events: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything sent is delivered."""

    def close(self) -> None:
        """Release resources."""


class KafkaCommandSink(CommandSink):
    """Publishes to ``settings.topics.refresh_commands`` keyed by table, through the product's one publisher
    (``lineagewire.kafka.publisher.Publisher.deliver``): a delivery report per command.

    ``producer_config`` overrides librdkafka producer properties (``lineagewire.kafka.publisher``).
    """

    def __init__(self, settings: Settings, *, producer_config: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.topic = settings.topics.refresh_commands
        self.publisher = Publisher(settings, producer_config={"linger.ms": 2, **(producer_config or {})})

    def deliver(self, events: list[dict[str, Any]], timeout: float = 30.0) -> dict[int, Undelivered]:
        failed: dict[int, Undelivered] = {}
        batch: list[Outgoing] = []
        positions: list[int] = []
        for i, event in enumerate(events):
            label = f"command {event.get('command_id')}"
            try:
                value = self.publisher.encode(event, topic=self.topic)
            except Exception as exc:  # noqa: BLE001 - this event only; the others go on
                failed[i] = Undelivered(f"{label} cannot be encoded: {exc}", permanent=True)
                continue
            batch.append(Outgoing(self.topic, value, key=event["table"], label=label))
            positions.append(i)
        for j, why in self.publisher.deliver(batch, timeout).items():
            failed[positions[j]] = why
        return failed

    def send(self, events: list[dict[str, Any]]) -> None:
        failed = self.deliver(events)
        if failed:
            raise PublishError("; ".join(u.reason for u in list(failed.values())[:5]))

    def close(self) -> None:
        try:
            self.publisher.flush(10)
        except PublishError as exc:
            log.warning("refresh commands not delivered at close: %s; their fires stay PENDING", exc)


class ListSink(CommandSink):
    """Keeps events in memory (tests, dry runs); ``fail`` makes the next flush raise."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.fail: Exception | None = None

    def send(self, events: list[dict[str, Any]]) -> None:
        self.events.extend(events)

    def flush(self, timeout: float = 30.0) -> None:
        if self.fail is not None:
            err, self.fail = self.fail, None
            raise err
