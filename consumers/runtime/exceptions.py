"""Errors of the consumer runtime and the contract between handlers and the runtime.

    LineagewireError
    └── ConsumerError                 the consumer runtime
        ├── PermanentError            this event can never be handled: dead-lettered, the service goes on
        │   └── (per service, e.g. openlineage.TranslationError)
        ├── OutputError               an output is down: the runtime retries the same event with backoff
        └── DeadLetterError           the dead-letter topic could not be written (retried like an output)
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = ["ConsumerError", "DeadLetterError", "OutputError", "PermanentError"]


class ConsumerError(LineagewireError):
    """Something in a consumer service went wrong."""


class PermanentError(ConsumerError):
    """The event can never be handled (not translatable, invalid): it goes to the dead-letter topic."""


class OutputError(ConsumerError):
    """An output (HTTP backend, file, Kafka...) failed; the same event is retried with backoff."""


class DeadLetterError(ConsumerError):
    """A dead letter could not be written to its topic."""
