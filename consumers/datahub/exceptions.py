"""Errors of the DataHub service.

    ConsumerError (lineagewire.consumers.runtime)
    ├── PermanentError
    │   └── TranslationError      an event cannot be mapped to DataHub proposals (dead-lettered)
    └── OutputError
        └── EmitError             a DataHub sink (file, REST, Kafka) did not take a proposal (retried)
"""

from __future__ import annotations

from lineagewire.consumers.runtime.exceptions import OutputError, PermanentError

__all__ = ["EmitError", "TranslationError"]


class TranslationError(PermanentError):
    """The event cannot be mapped to DataHub; the message names the field and value."""


class EmitError(OutputError):
    """A DataHub sink did not accept a proposal; the runtime retries the event."""
