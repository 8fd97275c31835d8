"""``lineagewire subscribe``: tail decoded events from a topic.

Reads with ``TopicReader`` (assigned partitions, nothing committed), so it
never disturbs a consumer group. An undecodable message is reported on
stderr as ``topic[partition]@offset: why`` and skipped; it never stops the
command.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import IO, Any

import click

from lineagewire.cli import settings_from
from lineagewire.config import Settings
from lineagewire.consumers.runtime.record import Record
from lineagewire.exceptions import DecodeError
from lineagewire.kafka.reader import Position, TopicReader, offset_of, parse_position, partition_of
from lineagewire.schemas import Codec, kind_of, summary

__all__ = ["Record", "read_events", "subscribe"]


def matches(event: dict[str, Any], job: str | None, status: str | None) -> bool:
    h = event["header"]
    if job is not None and job not in (h["job_name"], f"{h['job_namespace']}/{h['job_name']}"):
        return False
    if status is not None:
        return event.get("new_status") == status or event.get("status") == status
    return True


def read_events(settings: Settings, topic: str, *, start: Position, end: Position | None,
                job: str | None = None, status: str | None = None, codec: Codec | None = None,
                errors: IO[str] | None = None, idle_timeout: float | None = None,
                skip_through: dict[int, int] | None = None) -> Iterator[Record]:
    """Decoded, filtered records of a topic range; bad messages reported to ``errors`` and skipped.

    ``skip_through``: per partition, the last offset already served elsewhere (the archive); those and
    the ones before them are skipped without decoding.
    """
    codec = codec or Codec(schema_registry_url=settings.schema_registry_url, registry_config=settings.registry_config())
    errors = errors or sys.stderr
    with TopicReader(settings, topic, start=start, end=end) as reader:
        for msg in reader.messages(idle_timeout=idle_timeout):
            if skip_through and offset_of(msg) <= skip_through.get(partition_of(msg), -1):
                continue
            where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
            try:
                event = codec.decode(msg.value())
            except DecodeError as exc:
                print(f"{where}: skipped undecodable message ({exc.reason}): {exc}", file=errors, flush=True)
                continue
            if not matches(event, job, status):
                continue
            yield Record.from_message(msg, event)


def format_table_row(rec: Record) -> str:
    assert rec.event is not None  # read_events yields decoded records only
    h = rec.event["header"]
    t = h["event_time"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return (f"{t}  {rec.partition:>3}:{rec.offset:<7} {kind_of(rec.event)[:22]:<22} "
            f"{h['job_name'][:28]:<28} {h['run_id'][:8]}  {summary(rec.event)}")


TABLE_HEADER = (f"{'event time (UTC)':<23}  {'p:offset':<11} {'kind':<22} {'job':<28} {'run':<8}  what")


@click.command()
@click.option("--topic", default=None, help="Topic to read (default: the jobs topic, lineage.jobs).")
@click.option("--from-beginning", is_flag=True, help="Start at the oldest retained message.")
@click.option("--from", "from_", default=None, metavar="TIME|OFFSET",
              help="Start at an ISO-8601 time (2026-01-31T12:00:00Z) or an offset. Default: new messages only.")
@click.option("--job", default=None, help="Only events of this job (name, or namespace/name).")
@click.option("--status", default=None, help="Only status events with this new status (e.g. FAILED).")
@click.option("--format", "fmt", type=click.Choice(["json", "table"]), default="json", show_default=True)
@click.option("--count", type=int, default=None, help="Stop after N events.")
@click.option("--exit-at-end", is_flag=True, help="Stop at the end of the topic as it was when reading started.")
@click.pass_context
def subscribe(ctx: click.Context, topic: str | None, from_beginning: bool, from_: str | None, job: str | None,
              status: str | None, fmt: str, count: int | None, exit_at_end: bool) -> None:
    """Tail decoded events: JSON lines (with topic, partition, offset, key) or a table."""
    settings = settings_from(ctx)
    topic = topic or settings.topics.jobs
    if from_beginning and from_:
        raise click.UsageError("--from-beginning and --from exclude each other")
    start: Position = "beginning" if from_beginning else (parse_position(from_) or "end")
    end: Position | None = "end" if exit_at_end else None
    if fmt == "table":
        click.echo(TABLE_HEADER)
    n = 0
    out = sys.stdout
    for rec in read_events(settings, topic, start=start, end=end, job=job, status=status):
        line = json.dumps(rec.as_json(), separators=(",", ":")) if fmt == "json" else format_table_row(rec)
        out.write(line + "\n")
        out.flush()
        n += 1
        if count is not None and n >= count:
            break
