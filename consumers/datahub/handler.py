"""The DataHub service: translate each event to proposals and write them to the configured sinks."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

from lineagewire.consumers.runtime.base import Handler
from lineagewire.exceptions import ConfigError
from lineagewire.schemas import job_key

from .config import DataHubConfig
from .render import Renderer, Unchanged
from .sinks import FileSink, KafkaSink, RestSink, Sink
from .translate import Translator

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

    With the file sink the handler buffers in the OS: it fsyncs the file every ``fsync_interval``
    seconds (``tick``) and reports only fsynced offsets as durable, so a commit never runs ahead of
    the disk. The other sinks deliver synchronously.
    """

    name: ClassVar[str] = "datahub"
    tick_interval: ClassVar[float | None] = 1.0

    def __init__(self, config: DataHubConfig | None = None, sinks: list[Sink] | None = None, *,
                 translator: Translator | None = None) -> None:
        self.config = config or DataHubConfig()
        self.sinks = sinks if sinks is not None else make_sinks(self.config)
        self.translator = translator or Translator(self.config)
        self._buffering = any(isinstance(s, FileSink) for s in self.sinks)
        if self.config.skip_unchanged:
            # One memory per sink: each skips only what it took itself. Renderings are shared.
            renderer = next((s.renderer for s in self.sinks if isinstance(s, FileSink)), None) or Renderer()
            for sink in self.sinks:
                sink.unchanged = Unchanged(renderer, self.config.skip_unchanged)
        if self.config.sinks.file is not None:
            self.tick_interval = self.config.sinks.file.fsync_interval  # type: ignore[misc]
        self._handled: dict[tuple[str, int], int] = {}
        self._durable: dict[tuple[str, int], int] = {}

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
        emitted = 0
        pending = [s for s in self.sinks if not s.written(event_id)]
        if pending:
            proposals = self.translator.translate(record.event)
            scope = job_key(record.event)  # a job's events are in order: see render.Unchanged
            emitted = max(sink.emit(event_id, proposals, scope) for sink in pending)
        self._handled[(record.topic, record.partition)] = record.offset + 1
        return emitted

    def tick(self, now: float) -> int:
        self._sync()
        return 0

    def _sync(self) -> None:
        handled = dict(self._handled)
        for sink in self.sinks:
            sink.sync()
        self._durable.update(handled)

    def durable_offsets(self) -> dict[tuple[str, int], int] | None:
        return dict(self._durable) if self._buffering else None

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        if self._buffering:
            self._sync()

    def close(self) -> None:
        if self._buffering:
            self._sync()
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001 - closing one sink must not hide the shutdown of the others
                log.warning("closing the DataHub %s sink failed: %s", sink.name, exc)
