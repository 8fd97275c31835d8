"""Errors of the OpenLineage intake's translation.

    LineagewireError
    └── TranslationError     a spec-valid OpenLineage event that has no place in the contract

The receiver answers 400 with the message, and ``--from-topic`` dead-letters the record with it: the message
names the field (a JSON path into the OpenLineage event), the value and what was expected.
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = ["TranslationError"]


class TranslationError(LineagewireError):
    """A valid OpenLineage event cannot be translated; ``field`` is the JSON path of the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
