"""Settings of ``lineagewire ingest openlineage``, under lineagewire's one rule (``lineagewire.config``).

Highest first: the command's flags; the variables ``LINEAGEWIRE_INGEST__<KEY>``
(e.g. ``LINEAGEWIRE_INGEST__TOKEN``, ``LINEAGEWIRE_INGEST__PORT``); the ``ingest:``
section of the YAML config file; the defaults below. The Kafka connection is
the ``kafka:`` section's, as for every service.
"""

from __future__ import annotations

import pathlib
import re

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from lineagewire.config import SettingsBase

__all__ = ["ENV_PREFIX", "IngestSettings"]

ENV_PREFIX = "LINEAGEWIRE_INGEST__"


class IngestSettings(SettingsBase):
    """The OpenLineage receiver: where it listens, who may post, how much, and where the events go."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")
    config_section = "ingest"
    title = "ingest settings"

    host: str = Field("127.0.0.1", description="address to listen on (0.0.0.0: every interface)")
    port: int = Field(5055, ge=0, le=65535, description="port to listen on (0 = any free port; not Marquez's "
                      "5000, so both can run on one host)")
    token: SecretStr | None = Field(None, description="bearer token every request must carry (an OpenLineage "
                                    "transport's api_key); default: none required")
    max_body_bytes: int = Field(16 << 20, ge=1024, description="largest request body taken, after gunzip; a "
                                "larger one is answered 413")
    topic: str | None = Field(None, description="topic the translated events go to (default: the kafka section's "
                              "topics.jobs, lineage.jobs)")
    ack_timeout: float = Field(2.0, gt=0, le=120, description="seconds to wait for Kafka to confirm a request's "
                               "events before they are put in the outbox and the request is answered")
    outbox_dir: str | None = Field(None, description="outbox folder for events Kafka cannot take now (default: "
                                   "$LINEAGEWIRE_HOME/outbox/ingest-openlineage-<port>)")
    outbox_max_mb: float = Field(256.0, gt=0, description="outbox size limit (MiB); when full, requests are "
                                 "answered 503 and the producer retries")
    workers: int = Field(1, ge=1, le=64, description="receiver processes sharing the port, each with its own Kafka "
                         "producer and outbox subfolder (one Python process uses one core)")
    from_topic: str | None = Field(None, description="read OpenLineage JSON events from this topic (OpenLineage's "
                                   "Kafka transport) instead of serving HTTP")
    group_id: str = Field("lineagewire-ingest-openlineage", min_length=1,
                          description="consumer group of --from-topic")

    def outbox_path(self) -> pathlib.Path:
        """The outbox folder: ``outbox_dir``, else one per port under lineagewire's home."""
        if self.outbox_dir:
            return pathlib.Path(self.outbox_dir).expanduser()
        from lineagewire.kafka.local import home

        where = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.from_topic or str(self.port))[:100]
        return home() / "outbox" / f"ingest-openlineage-{where}"
