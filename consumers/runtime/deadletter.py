"""Writing dead letters: the original message plus why, in a form the dead-letter topic can take.

A dead letter is written to ``<topic>.dlq.<service>`` with the original key and
value and the headers in ``DLQ_HEADERS`` (plus ``lineagewire.error.traceback``
for a handler bug). A message larger than the dead-letter producer or topic
admits (``MSG_SIZE_TOO_LARGE``) must not stop the service, so it is written in
a smaller form, the first that fits of:

1. the whole value (when it fits ``max_bytes``);
2. the value cut to what fits ``max_bytes``;
3. the value cut to ``SMALL_FORM`` bytes (the topic's ``max.message.bytes`` is lower);
4. no value at all, only the headers.

A cut value carries ``lineagewire.original.size`` (bytes), ``lineagewire.original.sha256``
(hex digest of the whole value) and ``lineagewire.value.truncated`` (bytes kept), so the
original can be found again on the source topic (its offset is in the headers) and checked.
Any other failure raises ``DeadLetterError``; the runtime retries it until it succeeds.
"""

from __future__ import annotations

import hashlib
import logging

from lineagewire.config import Settings
from lineagewire.exceptions import MessageTooLargeError, PublishError
from lineagewire.kafka.publisher import Publisher

from .exceptions import DeadLetterError, HandlerBugError
from .record import Record

log = logging.getLogger(__name__)

__all__ = ["DLQ_HEADERS", "SMALL_FORM", "TRUNCATION_HEADERS", "DeadLetterWriter"]

#: Header names on every dead letter.
DLQ_HEADERS = (
    "lineagewire.error.class", "lineagewire.error.message", "lineagewire.error.reason",
    "lineagewire.original.topic", "lineagewire.original.partition", "lineagewire.original.offset",
    "lineagewire.original.timestamp", "lineagewire.service",
)
#: Headers added when the value was cut to fit.
TRUNCATION_HEADERS = ("lineagewire.original.size", "lineagewire.original.sha256", "lineagewire.value.truncated")
#: bytes of the value kept when the topic rejected the larger forms
SMALL_FORM = 16 * 1024
# What a record needs beyond key, value and headers (batch and record framing), with room to spare.
_OVERHEAD = 4 * 1024


class DeadLetterWriter:
    """Writes dead letters for ``service`` (see the module docstring); one per runtime.

    ``max_bytes``: the largest record the dead-letter producer sends as a whole
    (librdkafka's ``message.max.bytes``, 1,000,000 by default); ``publisher`` may be passed in.
    """

    def __init__(self, settings: Settings, service: str, *, max_bytes: int = 1_000_000,
                 publisher: Publisher | None = None, flush_timeout: float = 30.0) -> None:
        self.settings = settings
        self.service = service
        self.max_bytes = max_bytes
        self.flush_timeout = flush_timeout
        self._pub = publisher or Publisher(
            settings, producer_config={"linger.ms": 0, "message.timeout.ms": 30_000, "message.max.bytes": max_bytes},
            queue_full_timeout=flush_timeout)

    def headers(self, record: Record, exc: BaseException, reason: str) -> dict[str, str | bytes]:
        error = exc.error if isinstance(exc, HandlerBugError) else exc
        headers: dict[str, str | bytes] = dict(zip(DLQ_HEADERS, (
            f"{type(error).__module__}.{type(error).__qualname__}", str(exc)[:4000], reason, record.topic,
            str(record.partition), str(record.offset), str(record.timestamp_ms), self.service), strict=True))
        if isinstance(exc, HandlerBugError):
            headers["lineagewire.error.traceback"] = exc.traceback
        return headers

    def write(self, record: Record, exc: BaseException, reason: str) -> int:
        """Write ``record``'s dead letter (its raw key and value, as consumed) and wait for it; returns the bytes of
        the value kept.

        Raises ``DeadLetterError`` when no form could be written.
        """
        where = record.where
        topic = self.settings.topics.dlq(record.topic, self.service)
        value: bytes = record.value or b""
        key = record.key_bytes
        headers = self.headers(record, exc, reason)
        fixed = len(key or b"") + sum(len(k) + len(v) for k, v in headers.items()) + 200 + _OVERHEAD
        last: PublishError | None = None
        for keep in _forms(len(value), max(0, self.max_bytes - fixed)):
            out: dict[str, str | bytes] = dict(headers)
            if keep < len(value):
                out.update(zip(TRUNCATION_HEADERS, (str(len(value)), hashlib.sha256(value).hexdigest(),
                                                    str(keep)), strict=True))
            try:
                self._pub.produce_raw(topic, value[:keep], key=key, headers=out)
                # Waiting per dead letter is fine: they are rare, and the offset must not pass an unwritten one.
                self._pub.flush(self.flush_timeout)
            except MessageTooLargeError as e:
                last = e
                log.warning("%s: dead letter of %d bytes too large for %s (%s); trying a smaller form", where,
                            keep, topic, e)
                continue
            except PublishError as e:
                raise DeadLetterError(f"{where}: dead letter to {topic} failed: {e}") from e
            if keep < len(value):
                log.warning("%s dead-lettered to %s with its value cut from %d to %d bytes (sha256 in the headers)",
                            where, topic, len(value), keep)
            else:
                log.info("%s dead-lettered to %s", where, topic)
            return keep
        raise DeadLetterError(f"{where}: dead letter to {topic} rejected as too large even without its value "
                              f"(headers of {fixed - _OVERHEAD} bytes): {last}; expected the topic's "
                              "max.message.bytes to admit a few kilobytes")

    def flush(self, timeout: float) -> None:
        self._pub.flush(timeout)


def _forms(size: int, fits: int) -> list[int]:
    """The bytes of a value of ``size`` to keep in its dead letter, one try after the other: all of it if it
    fits in ``fits``, else what fits, then ``SMALL_FORM``, then none (each smaller than the one before)."""
    forms = [size] if size <= fits else []
    forms += [n for n in (fits, SMALL_FORM, 0) if n < size and (not forms or n < forms[-1])]
    return forms
