"""The DataHub service: translate each event to proposals and write them to the configured sinks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from lineagewire.consumers.runtime.base import Handler
from lineagewire.consumers.runtime.inflight import HeldBack, Rejected
from lineagewire.exceptions import ConfigError
from lineagewire.schemas import job_key

from .config import DataHubConfig
from .exceptions import TranslationError
from .proposals import Proposal
from .sinks import Sink
from .sinks.file import FileSink
from .sinks.kafka import KafkaSink
from .sinks.rest import RestSink
from .translate import Translator
from .unchanged import Unchanged

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["DataHubHandler", "make_sinks"]


def make_sinks(config: DataHubConfig, *, bootstrap_servers: str | None = None,
               producer_defaults: dict[str, Any] | None = None) -> list[Sink]:
    """The sinks the configuration selects (file, rest, kafka); at least one is required."""
    sinks: list[Sink] = []
    if config.sinks.file is not None:
        sinks.append(FileSink(config.sinks.file))
    if config.sinks.rest is not None:
        sinks.append(RestSink(config.sinks.rest))
    if config.sinks.kafka is not None:
        if not (config.sinks.kafka.bootstrap or bootstrap_servers):
            raise ConfigError("DataHub Kafka sink: no bootstrap servers; expected sinks.kafka.bootstrap or "
                              "lineagewire's --bootstrap-servers")
        sinks.append(KafkaSink(config.sinks.kafka, bootstrap_servers or "", producer_defaults))
    if not sinks:
        raise ConfigError("no DataHub sink selected; expected --file PATH, --gms-url URL, --kafka-schema-registry URL "
                          "or a 'sinks' section in --config")
    return sinks


class DataHubHandler(Handler):
    """Writes each lineagewire event to DataHub as metadata change proposals (see ``translate``).

    ``handle`` translates the event and hands the proposals to every sink (``sinks``): the file sink writes
    them at once and fsyncs every ``fsync_interval`` s (``tick``); the REST and Kafka sinks send them in
    batches, several at once, in order per job, and confirm them later. ``durable_offsets`` answers, per
    partition, the lowest offset not yet durable in every sink (fsynced, or confirmed by the backend): the
    runtime never commits past it. A batch that failed is sent again from ``batch_done``/``tick``, which
    raise ``EmitError`` while it fails, so the runtime's retry loop owns the backoff.
    """

    name: ClassVar[str] = "datahub"
    tick_interval: ClassVar[float | None] = 1.0

    def __init__(self, config: DataHubConfig | None = None, sinks: list[Sink] | None = None, *,
                 translator: Translator | None = None) -> None:
        self.config = config or DataHubConfig()
        self.sinks = sinks if sinks is not None else make_sinks(self.config)
        self.translator = translator or Translator(self.config)
        if self.config.skip_unchanged:
            # One memory per sink: each skips only what it took itself.
            for sink in self.sinks:
                sink.unchanged = Unchanged(self.config.skip_unchanged)
        if self.config.sinks.file is not None:
            self.tick_interval = min(1.0, self.config.sinks.file.fsync_interval)  # type: ignore[misc]
        self._last_sync = float("-inf")
        # records whose dead letter was handed to the runtime (oldest first): one dead letter per record
        self._dead_lettered: dict[tuple[str, int, int], None] = {}

    def check(self) -> None:
        """Refuse sink settings that can never work before consuming anything (``ConfigError``)."""
        for sink in self.sinks:
            sink.check()

    def open(self) -> None:
        for sink in self.sinks:
            sink.open()
        log.info("DataHub sinks: %s", ", ".join(s.name for s in self.sinks))

    def handle(self, record: Record) -> int:
        assert record.event is not None
        event_id = record.event["header"]["event_id"]
        pending = [s for s in self.sinks if not s.written(event_id)]
        proposals: list[Proposal] = []
        scope = ""
        if pending:
            try:
                proposals = self.translator.translate(record.event)
            except TranslationError:
                # Dead-lettered by the runtime: its offset is done for every sink (none waits for it).
                for sink in self.sinks:
                    sink.write(record, event_id, [], "")
                raise
            scope = job_key(record.event)  # a job's events are in order: see unchanged.Unchanged
        emitted = 0
        for sink in self.sinks:
            if sink in pending:
                emitted = max(emitted, sink.emit(record, event_id, proposals, scope))
            else:
                sink.write(record, event_id, [], scope)  # already there: only its offset moves
        return emitted

    def batch_done(self) -> int:
        return self._poll()

    def tick(self, now: float) -> int:
        fsync = self.config.sinks.file.fsync_interval if self.config.sinks.file is not None else 0.0
        if now - self._last_sync >= fsync:  # first: a delivering sink that is down must not hold the file back
            self._last_sync = now
            for sink in self.sinks:
                sink.sync()
        return self._poll()

    def _poll(self) -> int:
        return max((sink.poll() for sink in self.sinks), default=0)

    def durable_offsets(self) -> dict[tuple[str, int], int] | None:
        answers = [d for d in (s.durable_offsets() for s in self.sinks) if d is not None]
        if not answers:
            return None
        # Below every sink's answer. A delivering sink answers a HeldBack (a partition it does not list is durable
        # to its end); the file sink lists what it fsynced (a partition it does not list is not durable at all).
        out: dict[tuple[str, int], int] = HeldBack() if all(isinstance(a, HeldBack) for a in answers) else {}
        for tp in {tp for a in answers for tp in a.keys()}:
            if all(tp in a for a in answers):
                out[tp] = min(a[tp] for a in answers)
        return out

    def rejected(self) -> list[Rejected]:
        """Records a delivering sink's output refused for good (``RefusedError``), for the dead-letter topic: one
        dead letter per record, also when two sinks (REST and Kafka) rejected it, now or one after the other."""
        out: dict[tuple[str, int, int], Rejected] = {}
        for sink in self.sinks:
            for r in sink.rejected():
                pos = (r.record.topic, r.record.partition, r.record.offset)
                first = out.get(pos)
                if first is not None:
                    out[pos] = Rejected(first.record, first.error, _both(first.settle, r.settle))
                elif pos in self._dead_lettered:
                    r.settle()  # its dead letter was handed over for another sink's rejection
                else:
                    out[pos] = r
        for pos in out:
            self._dead_lettered[pos] = None
        while len(self._dead_lettered) > 10_000:
            del self._dead_lettered[next(iter(self._dead_lettered))]
        return list(out.values())

    def give_up(self, since: float) -> bool:
        return any([sink.give_up(since) for sink in self.sinks])  # every sink's, not the first's only

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        for sink in self.sinks:
            sink.on_revoke(partitions)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001 - closing one sink must not hide the shutdown of the others
                log.warning("closing the DataHub %s sink failed: %s", sink.name, exc)


def _both(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    def settle() -> None:
        first()
        second()

    return settle
