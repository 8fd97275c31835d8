"""Errors of the DataHub service.

    ConsumerError (lineagewire.consumers.runtime)
    ├── PermanentError
    │   ├── TranslationError      an event cannot be mapped to DataHub proposals (dead-lettered)
    │   └── RefusedError          GMS refused a record's proposals for good, a 4xx answer (dead-lettered)
    └── OutputError
        └── EmitError             a DataHub sink (file, REST, Kafka) did not take a proposal (retried)
"""

from __future__ import annotations

from lineagewire.consumers.runtime.exceptions import OutputError, PermanentError

__all__ = ["EmitError", "RefusedError", "TranslationError"]


class TranslationError(PermanentError):
    """The event cannot be mapped to DataHub; the message names the field and value."""


class RefusedError(PermanentError):
    """GMS refused proposals with a 4xx answer that no retry changes (``refused_for_good``): invalid proposals."""


class EmitError(OutputError):
    """A DataHub sink did not accept a proposal; the runtime retries the event."""
