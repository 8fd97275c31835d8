"""From a request body (or a topic's record) to the Kafka messages of its events, or the reason it is refused.

``Intake`` is the receiver's and ``--from-topic``'s shared path, in the order
that keeps a refused request from publishing anything: parse the JSON (one
event or an array), check every event against the spec (``SpecValidator``),
translate every event into contract events (``OpenLineageTranslator``),
encode each with the contract and check it fits in a Kafka message. Only when
all of that succeeded are the messages handed out, keyed by the job identity
as the emitter keys its own, in the translator's order.

Every refusal is an ``IngestRejected`` whose reason names the event by its
position in the request and the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import orjson

from lineagewire.config import Settings
from lineagewire.exceptions import LineagewireError
from lineagewire.kafka.publisher import Outgoing, producer_config
from lineagewire.schemas import Codec, job_key

from .http_errors import IngestRejected, InvalidEvent
from .validation import SpecValidator

__all__ = ["Intake", "Translator"]


class Translator(Protocol):
    """What turns one spec-valid OpenLineage event into contract events (``translate.OpenLineageTranslator``)."""

    def translate(self, event: dict[str, Any]) -> list[dict[str, Any]]: ...


def _default_translator() -> Translator:
    from .translate import OpenLineageTranslator

    translator: Translator = OpenLineageTranslator()
    return translator


class Intake:
    """Parses, validates, translates and encodes OpenLineage events; see the module docstring.

    ``topic``: where the messages go (default ``settings.topics.jobs``). ``translator`` and ``validator`` may be
    passed in (tests, a service with its own translation). Thread-safe as far as its translator is.
    """

    def __init__(self, settings: Settings, *, topic: str | None = None, translator: Translator | None = None,
                 validator: SpecValidator | None = None, codec: Codec | None = None) -> None:
        self.topic = topic or settings.topics.jobs
        self.translator = translator or _default_translator()
        self.validator = validator or SpecValidator()
        self.codec = codec or Codec(schema_registry_url=settings.schema_registry_url,
                                    registry_config=settings.registry_config())
        self.max_message_bytes = int(producer_config(settings).get("message.max.bytes", 1_000_000))

    @staticmethod
    def parse(body: bytes) -> list[Any]:
        """The events of a body: one JSON object, or a JSON array of them."""
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise InvalidEvent(f"the body is not JSON: {exc}; expected one OpenLineage event (an object) or an "
                               "array of them") from None
        if isinstance(doc, dict):
            return [doc]
        if isinstance(doc, list):
            if not doc:
                raise InvalidEvent("the body is an empty array; expected one OpenLineage event or more")
            return doc
        raise InvalidEvent(f"the body is a JSON {type(doc).__name__}; expected one OpenLineage event (an object) "
                           "or an array of them")

    def messages(self, events: Sequence[Any]) -> list[Outgoing]:
        """The Kafka messages of ``events``, all or none: IngestRejected naming the first event refused."""
        many = len(events) > 1
        for i, event in enumerate(events):
            problems = self.validator.errors(event)
            if problems:
                raise InvalidEvent(f"{_which(i, many)}is not a valid OpenLineage event: {'; '.join(problems)}")
        out: list[Outgoing] = []
        for i, event in enumerate(events):
            try:
                translated = self.translator.translate(event)
            except LineagewireError as exc:
                raise InvalidEvent(f"{_which(i, many)}cannot be translated: {exc}") from exc
            for ours in translated:
                value = self.codec.encode(ours, topic=self.topic)
                key = job_key(ours).encode()
                if len(value) + len(key) > self.max_message_bytes:
                    raise IngestRejected(413, f"{_which(i, many)}makes a {ours['header']['schema_name']} of "
                                         f"{len(value)} bytes; expected at most the producer's message.max.bytes "
                                         f"({self.max_message_bytes})")
                out.append(Outgoing(self.topic, value, key, label=f"event {ours['header']['event_id']}"))
        return out


def _which(i: int, many: bool) -> str:
    return f"event [{i}] " if many else "the event "
