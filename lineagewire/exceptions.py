"""The lineagewire exception hierarchy.

Every error the product raises on purpose is a ``LineagewireError``; library
errors are wrapped with ``raise ... from exc`` so the cause stays visible.
A message names what was wrong, the value, and what was expected.

    LineagewireError
    ├── ConfigError              wrong or missing settings
    ├── MissingExtraError        an optional dependency is not installed
    ├── SchemaError              the contract itself is broken (bad .avsc, unknown event kind)
    ├── DecodeError              bytes that are not a lineagewire event (lineagewire.schemas)
    ├── KafkaError               talking to the cluster
    │   ├── BrokerUnavailableError   no broker answered in time
    │   ├── PublishError             a message was not delivered (``.code``: librdkafka's error code)
    │   │   ├── MessageTooLargeError     the message is over the producer's or the topic's size limit
    │   │   └── QueueFullError           the producer's local queue stayed full past the bound
    │   └── OutboxError              the on-disk outbox folder cannot be created, locked or read
    └── LocalKafkaError          fetching, starting or stopping the local broker

Subsystems (emitter, consumers, scheduler) derive their own errors from
``LineagewireError`` in their own ``exceptions`` module.
"""

from __future__ import annotations

__all__ = [
    "BrokerUnavailableError",
    "ConfigError",
    "DecodeError",
    "KafkaError",
    "LineagewireError",
    "LocalKafkaError",
    "MessageTooLargeError",
    "MissingExtraError",
    "OutboxError",
    "PublishError",
    "QueueFullError",
    "SchemaError",
]


class LineagewireError(Exception):
    """Base class of every error lineagewire raises on purpose."""


class ConfigError(LineagewireError):
    """A setting is missing, has the wrong type or an impossible value."""


class MissingExtraError(LineagewireError, ImportError):
    """An optional dependency is missing; the message has the pip line that fixes it."""

    def __init__(self, module: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the Python package {module!r}, which is not installed. "
            f"Install it with: pip install 'lineagewire[{extra}]'"
        )
        self.module = module
        self.extra = extra


class SchemaError(LineagewireError):
    """The event contract is inconsistent, or an event names an unknown schema."""


class DecodeError(LineagewireError):
    """Bytes could not be decoded into a lineagewire event.

    ``reason`` is a short machine-readable word (``empty``, ``bad-magic``,
    ``truncated``, ``unknown-fingerprint``, ``unknown-schema-id``, ``bad-body``,
    ``trailing-bytes``, ``registry``); the message says what was found and what was expected.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class KafkaError(LineagewireError):
    """Talking to Kafka failed."""


class BrokerUnavailableError(KafkaError):
    """No broker answered at the configured bootstrap servers in time.

    ``servers`` are the bootstrap servers asked; ``reason`` is librdkafka's (connection refused, name not
    resolved, a TLS or SASL failure) when it gave one, else None.
    """

    def __init__(self, message: str, *, servers: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.servers = servers
        self.reason = reason


class PublishError(KafkaError):
    """A message could not be delivered; ``topic[partition]`` in the message when known.

    ``code`` is librdkafka's error code (``confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE``...) when one
    error explains the failure, else None; ``topic`` the topic when known.
    """

    def __init__(self, message: str, *, code: int | None = None, topic: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.topic = topic


class MessageTooLargeError(PublishError):
    """The message is larger than the producer's ``message.max.bytes`` or the topic's ``max.message.bytes``."""


class QueueFullError(PublishError):
    """The producer's local queue stayed full (broker slow or unreachable) for longer than the bound."""


class OutboxError(KafkaError):
    """The outbox folder (``lineagewire.kafka.outbox``) cannot be created, locked, written or read."""


class LocalKafkaError(LineagewireError):
    """The local single-node broker could not be fetched, started or stopped."""


def require(module: str, extra: str, feature: str):  # noqa: ANN201 - returns a module
    """Import an optional dependency or raise MissingExtraError with the fix."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra, feature) from exc
