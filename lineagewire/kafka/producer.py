"""The one place a Kafka producer is configured.

Every lineagewire producer (the emitter's ``kafka`` listener, ``Publisher``,
the scheduler's command publisher, the runtime's dead-letter writer) is made
by ``new_producer``, so they share the same defaults: idempotent, ``acks=all``,
lz4, the connection and security settings of ``Settings`` (one conversion,
``Settings.as_librdkafka_dict``), librdkafka's log routed to Python logging.
Callers pass only what differs for them (``overrides``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from lineagewire.config import Settings
from lineagewire.exceptions import ConfigError

from .errors import QUIET_LOGGER

__all__ = ["DEFAULT_PRODUCER_CONFIG", "new_producer", "producer_config"]

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 5,
    "message.timeout.ms": 120_000,
}


def producer_config(settings: Settings, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka properties: the connection settings, the defaults above, then ``overrides``."""
    conf: dict[str, Any] = {**settings.as_librdkafka_dict(), **DEFAULT_PRODUCER_CONFIG,
                            "logger": logging.getLogger("lineagewire.kafka.librdkafka")}
    conf.update(overrides or {})
    return conf


def new_producer(settings: Settings, overrides: dict[str, Any] | None = None, *,
                 error_cb: Callable[[KafkaError], None] | None = None) -> Producer:
    """A confluent-kafka ``Producer`` with ``producer_config``; ``error_cb`` gets client-level errors
    (broker down, authentication), which librdkafka otherwise only logs.

    With an ``error_cb`` (e.g. a ``lineagewire.kafka.errors.ClientErrorLog``) librdkafka's own
    connection-failure lines are dropped: the callback reports them, at its own rate.
    Raises ``ConfigError`` naming a property librdkafka does not take.
    """
    conf = producer_config(settings, overrides)
    if error_cb is not None:
        conf["error_cb"] = error_cb
        if "logger" not in (overrides or {}):
            conf["logger"] = QUIET_LOGGER
    try:
        return Producer(conf)
    except KafkaException as exc:
        raise ConfigError(f"producer configuration rejected by librdkafka: {exc.args[0].str()}; expected "
                          "properties from librdkafka's CONFIGURATION.md") from exc
