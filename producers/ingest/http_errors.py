"""Why the receiver turns a request or an event away, as the HTTP status a producer understands.

    LineagewireError
    └── IngestRejected          the request (or an event of it) is not taken; nothing of it is published
        ├── (400) InvalidEvent  malformed JSON, an event the spec rejects, one that cannot be translated
        └── NotStored (503)     the events could be put neither on Kafka nor in the outbox: retry later

OpenLineage producers give up on a 4xx and retry on a 5xx, so only a request
that can succeed when sent again gets a 5xx. ``reason`` is the answer's
``{"error": ...}``; it names the event (by position) and the field.
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = ["IngestRejected", "InvalidEvent", "NotStored"]


class IngestRejected(LineagewireError):
    """A request the receiver does not take; ``status`` is its HTTP answer, ``reason`` says why."""

    def __init__(self, status: int, reason: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or {}


class InvalidEvent(IngestRejected):
    """An event that is not JSON, that the OpenLineage spec rejects, or that cannot be translated (400)."""

    def __init__(self, reason: str) -> None:
        super().__init__(400, reason)


class NotStored(IngestRejected):
    """Kafka did not take the events and the outbox could not hold them (503: the producer retries)."""

    def __init__(self, reason: str) -> None:
        super().__init__(503, reason, headers={"retry-after": "5"})
