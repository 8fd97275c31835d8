"""Errors of the OpenLineage service.

    ConsumerError (lineagewire.consumers.runtime)
    ├── PermanentError
    │   ├── TranslationError      an event cannot be mapped to OpenLineage (dead-lettered)
    │   └── RefusedError          the backend refused an event for good, a 4xx answer (dead-lettered)
    └── OutputError
        └── EmitError             an OpenLineage transport failed to send (retried)
"""

from __future__ import annotations

from lineagewire.consumers.runtime.exceptions import OutputError, PermanentError

__all__ = ["EmitError", "RefusedError", "TranslationError"]


class TranslationError(PermanentError):
    """The event cannot be mapped to OpenLineage; the message names the field and value."""


class EmitError(OutputError):
    """The configured OpenLineage transport did not accept an event."""


class RefusedError(PermanentError):
    """The OpenLineage backend refused an event with a 4xx answer that no retry changes (``refused_for_good``)."""
