"""``lineagewire replay``: replay a time or offset range of a topic for audit.

Reads with ``read_events`` (``TopicReader``: assigned partitions, a throwaway
group id, nothing committed), so no live consumer group's offsets move. The
range is ``--from`` (inclusive) to ``--to`` (exclusive), each ``beginning``,
``end``, an offset (the same for every partition) or an ISO-8601 time.

Outputs (``--into``):

* ``stdout`` / ``file``: JSON lines, either the decoded events
  (``--format events``, as ``lineagewire subscribe`` prints them) or the
  OpenLineage events they translate to (``--format openlineage``);
* ``openlineage``: the OpenLineage events sent through the OpenLineage
  transport configured as for ``lineagewire consume openlineage``.

``--output F`` is written to a temporary file beside F that replaces F
(``--force``) or is appended to it (``--append``) only when the replay ends,
so a replay that fails leaves F as it was; an existing F without either flag
is refused. ``--to`` before ``--from`` is refused too (exit 2).

With ``--archive DIR_OR_URL`` (or ``LINEAGEWIRE_AUDIT__ARCHIVE``) the part of the
range older than the topic's earliest offset is read from the audit archive
and the rest from the topic, each (partition, offset) once
(``archive_read.read_across``); every target and filter works the same.

The translation is deterministic (run ids derived from the events, times
from the events), so replaying the same range twice gives identical
OpenLineage events, and a backend that already has them sees the same runs.
A progress bar with rate and ETA is drawn on stderr when it is a terminal;
a summary (events, per kind, outputs, errors) ends the run.
"""

from __future__ import annotations

import collections
import datetime as dt
import io
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import click

from lineagewire.cli import setting, settings_from, settings_of
from lineagewire.config import Settings
from lineagewire.consumers.runtime import OutputError, load_handler_class
from lineagewire.consumers.runtime.record import Record
from lineagewire.exceptions import ConfigError, LineagewireError
from lineagewire.kafka.reader import Position, TopicReader, parse_position
from lineagewire.schemas import kind_of

from ..openlineage.cli import OpenLineageSettings, ol_options
from .cli import AuditSettings
from .exceptions import ArchiveError
from .subscribe import read_events

if TYPE_CHECKING:
    from .storage import Storage

__all__ = ["ReplaySummary", "replay", "replay_range"]


@dataclass
class ReplaySummary:
    """What a replay read and wrote."""

    topic: str
    events: int = 0
    outputs: int = 0
    errors: int = 0
    per_kind: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))
    error_samples: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 20:
            self.error_samples.append(text)

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "events": self.events, "per_kind": dict(sorted(self.per_kind.items())),
                "outputs": self.outputs, "errors": self.errors, "seconds": round(self.seconds, 3),
                "events_per_s": round(self.events / self.seconds) if self.seconds else None}


class _ErrorLines(io.TextIOBase):
    """The ``errors`` stream of read_events: counts each reported line and forwards it."""

    def __init__(self, summary: ReplaySummary, echo: Callable[[str], None]) -> None:
        self._summary = summary
        self._echo = echo

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                self._summary.error(line)
                self._echo(line)
        return len(text)


Sink = Callable[[Record], int]


def replay_range(settings: Settings, topic: str, *, start: Position, end: Position, sink: Sink,
                 job: str | None = None, progress: bool = False, echo: Callable[[str], None] | None = None,
                 archive: Storage | None = None) -> ReplaySummary:
    """Feed every decoded event of the range (filtered by ``job``) to ``sink``; errors are counted, not raised.

    ``sink(record)`` returns how many outputs it wrote and raises ``LineagewireError`` for an event it
    cannot take (counted as an error naming ``topic[partition]@offset``). With ``archive``, the part of
    the range older than the topic's earliest offset comes from the archive (``archive_read.read_across``).
    """
    echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
    summary = ReplaySummary(topic)
    # Resolve the range once up front for the progress bar (same inputs, same offsets as read_events).
    with TopicReader(settings, topic, start=start, end=end) as probe:
        starts, total = dict(probe.start_offsets), probe.total() or 0
    if archive is not None:
        from .archive_read import archived_count, read_across  # pyarrow only when an archive is read

        starts = {}  # offsets now start in the archive; the bar counts from 0 (an estimate over the archive)
        total += archived_count(archive, topic)
    bar = _Progress(total, enabled=progress)
    echo = bar.wrap_echo(echo)
    errors = _ErrorLines(summary, echo)
    reached: dict[int, int] = {}
    t0 = time.perf_counter()
    try:
        records = (read_across(settings, archive, topic, start=start, end=end, job=job, errors=errors)  # type: ignore[arg-type]
                   if archive is not None else
                   read_events(settings, topic, start=start, end=end, job=job, errors=errors))  # type: ignore[arg-type]
        for rec in records:
            summary.events += 1
            assert rec.event is not None  # both readers yield decoded records only
            summary.per_kind[kind_of(rec.event)] += 1
            try:
                summary.outputs += sink(rec)
            except LineagewireError as exc:
                echo(f"{rec.where}: {type(exc).__name__}: {exc}")
                summary.error(f"{rec.where}: {exc}")
            reached[rec.partition] = rec.offset + 1 - starts.get(rec.partition, 0)
            bar.update(sum(reached.values()))
        bar.update(total)
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - t0
    return summary


class _Progress:
    """A rich progress bar (count, rate, ETA) on stderr, or nothing."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self._bar: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        console = Console(stderr=True)
        if not console.is_terminal:
            return
        self._bar = Progress(TextColumn("replay"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("[progress.percentage]{task.percentage:>3.0f}%"),
                             _RateColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console)
        self._task = self._bar.add_task("replay", total=total or None)
        self._bar.start()

    def wrap_echo(self, echo: Callable[[str], None]) -> Callable[[str], None]:
        if self._bar is None:
            return echo
        return lambda line: self._bar.console.print(line, markup=False, highlight=False)

    def update(self, completed: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=completed)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _RateColumn() -> Any:  # noqa: N802 - a rich column, built lazily so rich loads only with a terminal
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} msg/s" if speed else "-- msg/s")

    return RateColumn()


# -- sinks ---------------------------------------------------------------------------------------


def _service(name: str, **options: Any) -> Any:
    """The service's handler, in a process set up as the service's own command sets it up."""
    cls = load_handler_class(name)
    cls.prepare_process()
    return cls.from_options(**options)


def _json_lines_sink(out: IO[str], fmt: str) -> Sink:
    if fmt == "events":
        def write_event(rec: Record) -> int:
            out.write(json.dumps(rec.as_json(), separators=(",", ":"), sort_keys=True) + "\n")
            return 1
        return write_event
    handler = _service(fmt)  # the service's own rendering, through the handler registry

    def write_rendered(rec: Record) -> int:
        texts = handler.render(rec)
        for text in texts:
            out.write(text + "\n")
        return len(texts)
    return write_rendered


def _openlineage_sink(cfg: OpenLineageSettings) -> tuple[Sink, Callable[[], None]]:
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

    handler = _service("openlineage", url=cfg.url, openlineage_config=cfg.openlineage_config)
    handler.open()

    def send(rec: Record) -> int:
        # A short retry for a blip; a backend that stays down is reported per event in the summary.
        for attempt in Retrying(retry=retry_if_exception_type((OutputError, *handler.retryable_errors)),
                                stop=stop_after_attempt(4), wait=wait_exponential(multiplier=0.5, max=5),
                                reraise=True):
            with attempt:
                return handler.handle(rec)
        return 0
    return send, handler.close


@click.command()
@click.option("--topic", default=None, help="Topic to replay (default: the jobs topic, lineage.jobs).")
@click.option("--from", "from_", default="beginning", show_default=True, metavar="TIME|OFFSET",
              help="Start (inclusive): beginning, an offset, or an ISO-8601 time such as 2026-01-31T12:00:00Z.")
@click.option("--to", "to", default="end", show_default=True, metavar="TIME|OFFSET",
              help="Stop (exclusive): end (the end when the replay starts), an offset, or an ISO-8601 time.")
@click.option("--job", default=None, help="Only events of this job (name, or namespace/name).")
@click.option("--into", type=click.Choice(["stdout", "file", "openlineage"]), default="stdout", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["events", "openlineage"]), default="events", show_default=True,
              help="For stdout and file: the decoded events, or the OpenLineage events they translate to.")
@click.option("--output", "output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="The file for --into file (JSON lines), written in full or not at all.")
@click.option("--force", is_flag=True, help="For --into file: replace an existing --output file.")
@click.option("--append", is_flag=True, help="For --into file: add to an existing --output file.")
@setting(AuditSettings, "archive", "--archive", metavar="DIR_OR_URL", help="The audit archive: the range older "
         "than the topic's earliest offset is read from it, the rest from the topic, each record once.")
@ol_options
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress bar on stderr (only drawn when stderr is a terminal).")
@click.pass_context
def replay(ctx: click.Context, topic: str | None, from_: str, to: str, job: str | None, into: str, fmt: str,
           output: str | None, force: bool, append: bool, archive: str | None, url: str | None,
           openlineage_config: str | None, progress: bool) -> None:
    """Replay a time or offset range for audit, without moving any consumer group's offsets.

    --url and --openlineage-config are for --into openlineage."""
    settings = settings_from(ctx)
    topic = topic or settings.topics.jobs
    start, end = parse_position(from_), parse_position(to)
    if start is None or end is None:
        raise ConfigError("--from and --to need a value")
    _check_range(start, end, from_, to)
    _check_output(into, output, force, append)
    storage = _storage(settings_of(ctx, AuditSettings, archive=archive).archive)
    out = _FileOutput(pathlib.Path(output), append=append) if into == "file" and output else None
    close: Callable[[], None] = lambda: None  # noqa: E731
    if into == "openlineage":
        sink, close = _openlineage_sink(settings_of(ctx, OpenLineageSettings, url=url,
                                                    openlineage_config=openlineage_config))
    else:
        sink = _json_lines_sink(out.stream if out is not None else sys.stdout, fmt)
    try:
        summary = _replay_or_discard(out, lambda: replay_range(
            settings, topic, start=start, end=end, sink=sink, job=job, progress=progress, archive=storage,
            echo=lambda line: click.echo(line, err=True)))
    finally:
        close()
    _print_summary(summary)
    if summary.errors:
        ctx.exit(1)


def _replay_or_discard(out: _FileOutput | None, run: Callable[[], ReplaySummary]) -> ReplaySummary:
    """``run()``, then the ``--output`` file in place; when it fails, an existing ``--output`` stays as it was."""
    try:
        summary = run()
    except BaseException as exc:
        if out is not None:
            out.discard()
        if not isinstance(exc, ArchiveError):
            raise
        # A damaged archive file (flipped byte, truncated, deleted, garbage): one line naming it and exit 1, as
        # ``audit verify`` exits on a finding.
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None
    if out is not None:
        out.commit()
    return summary


def _check_output(into: str, output: str | None, force: bool, append: bool) -> None:
    """``--output``, ``--force`` and ``--append`` go with ``--into file``, one of the two flags for an existing file."""
    if into == "file" and not output:
        raise click.UsageError("--into file needs --output PATH")
    if into != "file" and any((output, force, append)):
        raise click.UsageError("--output, --force and --append go with --into file")
    if force and append:
        raise click.UsageError("--force (replace) and --append (add) exclude each other")
    _check_existing(output, force, append)


def _check_existing(output: str | None, force: bool, append: bool) -> None:
    if output and not (force or append) and os.path.exists(output):
        raise click.UsageError(f"--output {output} exists; pass --force to replace it or --append to add to it")


def _storage(archive: str | None) -> Storage | None:
    if not archive:
        return None
    from .storage import Storage

    return Storage(archive)


def _check_range(start: Position, end: Position, from_: str, to: str) -> None:
    """An end before the start is a mistake, not an empty replay: say so (exit 2)."""
    backwards = ((isinstance(start, dt.datetime) and isinstance(end, dt.datetime) and end < start)
                 or (type(start) is int and type(end) is int and end < start)
                 or (start == "end" and end == "beginning"))
    if backwards:
        raise click.BadParameter(f"{to!r} is before --from {from_!r}, so the range is empty; expected --to at or "
                                 "after --from (--to is exclusive)", param_hint="--to")


class _FileOutput:
    """``--into file``: lines go to a temporary file next to the output, which replaces (or is appended to)
    the output only when the replay finished, so a failed replay leaves an existing file untouched."""

    def __init__(self, path: pathlib.Path, *, append: bool) -> None:
        self.path = path
        self.append = append
        self._fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
        self.tmp = pathlib.Path(tmp)
        self.stream: IO[str] = os.fdopen(self._fd, "w", encoding="utf-8")

    def commit(self) -> None:
        self.stream.flush()
        os.fsync(self.stream.fileno())
        self.stream.close()
        if self.append and self.path.exists():
            with open(self.path, "ab") as dst, open(self.tmp, "rb") as src:
                shutil.copyfileobj(src, dst)
                dst.flush()
                os.fsync(dst.fileno())
            self.tmp.unlink()
        else:
            os.replace(self.tmp, self.path)

    def discard(self) -> None:
        self.stream.close()
        self.tmp.unlink(missing_ok=True)


def _print_summary(s: ReplaySummary) -> None:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(s.per_kind.items())) or "none"
    rate = f"{s.events / s.seconds:,.0f}/s" if s.seconds and s.events else "-"
    click.echo(f"replayed {s.events} events from {s.topic} in {s.seconds:.1f}s ({rate}): {kinds}; "
               f"{s.outputs} outputs, {s.errors} errors", err=True)
