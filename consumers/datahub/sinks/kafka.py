"""DataHub's ``MetadataChangeProposal_v1`` topic through acryl-datahub's ``DatahubKafkaEmitter``."""

from __future__ import annotations

from typing import Any, ClassVar

from lineagewire.exceptions import ConfigError

from ..config import KafkaSinkConfig
from ..exceptions import EmitError
from ..proposals import Proposal
from .delivery import DeliveringSink, for_emitter

__all__ = ["KafkaSink"]


class KafkaSink(DeliveringSink):
    """The emitter serialises with Confluent's Avro serializer, so it needs a schema registry
    (``schema_registry_url``). A batch is produced, then flushed, and every message's delivery report
    checked: only then are its events confirmed (and their offsets committable). One lane by default: the
    producer batches on its own, and a flush waits for every message in it."""

    name: ClassVar[str] = "kafka"

    def __init__(self, config: KafkaSinkConfig, default_bootstrap: str, producer_defaults: dict[str, Any] | None = None,
                 emitter: Any = None) -> None:
        super().__init__(config)
        self.config = config
        self.bootstrap = config.bootstrap or default_bootstrap
        self.output = f"DataHub Kafka topic {config.topic}"
        self._defaults = producer_defaults or {}
        self._emitter = emitter

    def open(self) -> None:
        if self._emitter is None:
            from datahub.emitter.kafka_emitter import MCP_KEY, DatahubKafkaEmitter, KafkaEmitterConfig

            try:
                cfg = KafkaEmitterConfig.model_validate({"connection": {
                    "bootstrap": self.bootstrap, "schema_registry_url": self.config.schema_registry_url,
                    "schema_registry_config": self.config.schema_registry_config,
                    "producer_config": {**self._defaults, **self.config.producer_config}},
                    "topic_routes": {MCP_KEY: self.config.topic}})
                self._emitter = DatahubKafkaEmitter(cfg)
            except Exception as exc:  # noqa: BLE001 - pydantic or librdkafka refusing the settings
                raise ConfigError(f"DataHub Kafka sink settings are invalid: {exc}; expected bootstrap servers, a "
                                  "schema registry URL and librdkafka producer properties") from exc
        super().open()

    def send(self, batch: list[Proposal]) -> None:
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                where = f"{msg.topic()}[{msg.partition()}]" if msg is not None and hasattr(msg, "topic") else \
                    self.config.topic
                errors.append(f"{where}: {err}")

        for p in for_emitter(batch):
            self._emitter.emit(p, callback=delivered)
        left = sum(producer.flush(self.config.flush_timeout) for producer in self._emitter.producers.values())
        if errors or left:
            raise EmitError(f"{self.output}: {len(batch)} proposals not delivered: "
                            f"{'; '.join(errors[:3]) or f'{left} still queued after {self.config.flush_timeout}s'}")

    def close(self) -> None:
        super().close()
        if self._emitter is not None:
            self._emitter.flush()
