"""``--from-topic``: OpenLineage JSON from a user's topic, on the shared consumer runtime.

OpenLineage's Kafka transport writes one JSON event per message to a topic of
the user's. ``OpenLineageTopicHandler`` is a ``Handler`` of
``lineagewire.consumers.runtime``, so the runtime's consumer group, commits,
dead letters, retries, metrics and graceful shutdown apply as for every
service:

* the records are JSON, not contract events: the handler takes undecodable
  records (``accepts_undecodable``) and reads ``record.value``; a record that
  *is* a contract event is on the wrong topic and is dead-lettered as such;
* each record goes through the receiver's ``Intake`` (spec validation,
  translation, encoding); an invalid event raises ``PermanentError`` with the
  reason, so the runtime dead-letters it (``<topic>.dlq.ingest-openlineage``,
  the reason in its headers) and the partition goes on;
* the translated events are produced in ``batch_done``, once per poll's batch,
  and waited for (``Publisher.deliver``): at-least-once, and the runtime commits
  a partition only below its first record whose events Kafka has not confirmed
  (``durable_offsets``). While Kafka refuses them, ``batch_done`` raises
  ``OutputError`` and the runtime retries with backoff, consuming nothing more;
  an event Kafka refuses for good (over the topic's ``max.message.bytes``)
  dead-letters its record (``rejected``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from lineagewire.config import Settings
from lineagewire.consumers.runtime import Handler, OutputError, PermanentError, Record, Rejected
from lineagewire.kafka.publisher import Outgoing, Publisher, Undelivered

from .http_errors import IngestRejected
from .intake import Intake, Translator

log = logging.getLogger(__name__)

__all__ = ["InvalidOpenLineageRecord", "OpenLineageTopicHandler"]


class InvalidOpenLineageRecord(PermanentError):
    """A record of the input topic that is not a valid OpenLineage event (dead-lettered with this reason)."""


@dataclass(eq=False)
class _Held:
    """A handled record whose events Kafka has not confirmed yet."""

    partition: tuple[str, int]
    offset: int
    record: Record
    messages: list[Outgoing] = field(repr=False)


class OpenLineageTopicHandler(Handler):
    """OpenLineage JSON records in, contract events out to ``topic``; see the module docstring."""

    name = "ingest-openlineage"
    accepts_undecodable = True

    def __init__(self, settings: Settings, *, topic: str | None = None, translator: Translator | None = None,
                 delivery_timeout: float = 30.0, publisher: Publisher | None = None) -> None:
        self.settings = settings
        self.intake = Intake(settings, topic=topic, translator=translator)
        self.delivery_timeout = delivery_timeout
        self._publisher = publisher or Publisher(
            settings, producer_config={"message.timeout.ms": max(1000, int(delivery_timeout * 1000))})
        self._held: list[_Held] = []
        self._next: dict[tuple[str, int], int] = {}
        self._rejected: list[Rejected] = []

    def handle(self, record: Record) -> int:
        tp = (record.topic, record.partition)
        self._next[tp] = record.offset + 1
        if record.value is None:
            return 0  # a tombstone: no event
        if record.event is not None:
            raise InvalidOpenLineageRecord(
                f"{record.where}: a lineagewire contract event ({record.event['header']['schema_name']}), not "
                "OpenLineage JSON; expected the topic an OpenLineage Kafka transport writes")
        try:
            messages = self.intake.messages(self.intake.parse(record.value))
        except IngestRejected as exc:
            raise InvalidOpenLineageRecord(f"{record.where}: {exc.reason}") from exc
        if messages:
            self._held.append(_Held(tp, record.offset, record.without_event(), messages))
        return 0  # counted when Kafka confirms them (batch_done)

    def batch_done(self) -> int:
        todo = [h for h in self._held if not _rejected(h)]
        if not todo:
            return 0
        flat: list[Outgoing] = []
        owner: list[_Held] = []
        for h in todo:
            flat += h.messages
            owner += [h] * len(h.messages)
        failed = self._publisher.deliver(flat, self.delivery_timeout)
        broken: dict[int, Undelivered] = {}
        for i, undelivered in failed.items():
            broken.setdefault(id(owner[i]), undelivered)
        emitted = 0
        retry: list[str] = []
        for h in todo:
            why = broken.get(id(h))
            if why is None:
                self._held.remove(h)
                emitted += len(h.messages)
            elif why.permanent:
                self._reject(h, why.reason)
            else:
                retry.append(f"{h.record.where}: {why.reason}")
        if retry:
            raise OutputError(f"Kafka did not confirm the events of {len(retry)} record(s) ({retry[0]}); "
                              "sending them again")
        return emitted

    def _reject(self, h: _Held, reason: str) -> None:
        h.messages = []  # marks it rejected: never sent again, held until its dead letter is written

        def settle() -> None:
            if h in self._held:
                self._held.remove(h)

        self._rejected.append(Rejected(h.record, InvalidOpenLineageRecord(
            f"{h.record.where}: Kafka refused a translated event for good: {reason}"), settle))

    def rejected(self) -> list[Rejected]:
        out, self._rejected = self._rejected, []
        return out

    def durable_offsets(self) -> dict[tuple[str, int], int] | None:
        offsets = dict(self._next)
        for h in self._held:
            offsets[h.partition] = min(offsets.get(h.partition, h.offset), h.offset)
        return offsets

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        gone = set(partitions)
        for h in [h for h in self._held if h.partition in gone]:
            # not confirmed: the next owner reads it again from the last commit, which stays below it
            self._next[h.partition] = min(self._next.get(h.partition, h.offset), h.offset)
            self._held.remove(h)

    def on_assign(self, partitions: list[tuple[str, int]]) -> None:
        for tp in partitions:
            self._next.pop(tp, None)

    def close(self) -> None:
        try:
            self.batch_done()
        except OutputError as exc:
            log.warning("at shutdown: %s; their records stay uncommitted and are read again at the next start", exc)


def _rejected(h: _Held) -> bool:
    return not h.messages
