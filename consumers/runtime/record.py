"""``Record``: one consumed message, decoded, with where it came from.

What every ``Handler`` receives. The decoded ``event`` is what most services
need; ``value``, ``headers`` and ``timestamp_type`` keep the message as Kafka
stored it, for services that must keep it losslessly (the audit archive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lineagewire.schemas import kind_of, to_jsonable

__all__ = ["Record"]


@dataclass
class Record:
    """One decoded message and where it came from.

    ``event`` is None only for a handler that asked for undecodable messages too
    (``Handler.accepts_undecodable``); ``decode_error`` then says why.
    """

    topic: str
    partition: int
    offset: int
    key: str | None
    timestamp_ms: int
    event: dict[str, Any] | None
    #: the message's raw value bytes, as on the topic (None for a tombstone)
    value: bytes | None = field(default=None, repr=False)
    #: the message's headers in order (keys may repeat, values may be None)
    headers: list[tuple[str, bytes | None]] = field(default_factory=list, repr=False)
    #: confluent-kafka's timestamp type (0 none, 1 create time, 2 log-append time)
    timestamp_type: int = 0
    #: the raw key bytes (``key`` is their UTF-8 reading)
    key_bytes: bytes | None = field(default=None, repr=False)
    decode_error: str | None = None

    @classmethod
    def from_message(cls, msg: Any, event: dict[str, Any] | None, decode_error: str | None = None) -> Record:
        """The record of a confluent-kafka ``Message`` and its decoded event (None with ``decode_error``)."""
        key = msg.key()
        ts_type, ts = msg.timestamp()
        return cls(msg.topic(), msg.partition(), msg.offset(), key.decode("utf-8", "replace") if key is not None
                   else None, ts, event, value=msg.value(), headers=list(msg.headers() or ()),
                   timestamp_type=ts_type, key_bytes=key, decode_error=decode_error)

    def without_event(self) -> Record:
        """This record without its decoded event: what a dead letter needs (raw key, value, headers, timestamp),
        kept by ``InFlight`` while the record's outputs are in flight at a fraction of the decoded event's memory."""
        return Record(self.topic, self.partition, self.offset, self.key, self.timestamp_ms, None, value=self.value,
                      headers=self.headers, timestamp_type=self.timestamp_type, key_bytes=self.key_bytes,
                      decode_error=self.decode_error)

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"

    def as_json(self) -> dict[str, Any]:
        if self.event is None:
            return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "key": self.key,
                    "kind": None, "event": None, "decode_error": self.decode_error}
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "key": self.key,
                "kind": kind_of(self.event), "event": to_jsonable(self.event)}
