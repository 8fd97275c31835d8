"""librdkafka's client-level errors (broker down, authentication), logged at a bearable rate.

With the broker unreachable, librdkafka reconnects many times a second and
reports each failure twice: to ``error_cb`` and as a ``FAIL`` log line. A
client made with ``ClientErrorLog`` logs one line per backoff step instead
(1 s, 2 s, 4 s... up to a minute, with the count of what it did not repeat),
says when the cluster is reachable again, and answers ``unreachable`` for a
health check. ``QUIET_LOGGER`` is the librdkafka logger for such clients: it
drops the ``FAIL`` lines that ``error_cb`` already reports.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from confluent_kafka import KafkaError

__all__ = ["QUIET_LOGGER", "UNREACHABLE_CODES", "ClientErrorLog"]

#: error_cb codes that mean "no connection to the cluster" (one broker down in a cluster is not that)
UNREACHABLE_CODES = frozenset({KafkaError._ALL_BROKERS_DOWN})


class _DropConnectFailures(logging.Filter):
    """Drops librdkafka's ``FAIL`` facility lines, which ``error_cb`` reports too (rate-limited there)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.args, tuple) and record.args and record.args[0] == "FAIL")


#: librdkafka's log for clients whose ``error_cb`` is a ``ClientErrorLog``
QUIET_LOGGER = logging.getLogger("lineagewire.kafka.librdkafka.client")
QUIET_LOGGER.addFilter(_DropConnectFailures())


class ClientErrorLog:
    """Receives a client's ``error_cb`` and ``stats_cb``; logs one line per backoff step.

    ``what`` names the client in the lines (``consumer of group g``). Thread-safe: librdkafka
    calls back from ``poll``, a health check reads ``unreachable`` from another thread.
    """

    def __init__(self, logger: logging.Logger, what: str, *, first: float = 1.0, maximum: float = 60.0) -> None:
        self._log = logger
        self.what = what
        self._first = first
        self._maximum = maximum
        self._step = first
        self._next_line = 0.0
        self._suppressed = 0
        self._lock = threading.Lock()
        self.down_since: float | None = None
        self.last_error: str | None = None

    @property
    def unreachable(self) -> bool:
        """No broker answered since the last connection failure."""
        return self.down_since is not None

    def error(self, err: KafkaError) -> None:
        """``error_cb``: count the error, log it if this backoff step has not logged yet."""
        now = time.monotonic()
        with self._lock:
            self.last_error = err.str()
            if err.code() in UNREACHABLE_CODES and self.down_since is None:
                self.down_since = now
            if not err.fatal() and now < self._next_line:
                self._suppressed += 1
                return
            suppressed, self._suppressed = self._suppressed, 0
            self._next_line = now + self._step
            self._step = min(self._step * 2, self._maximum)
        more = f" ({suppressed} more client errors since the last line)" if suppressed else ""
        level = logging.ERROR if err.fatal() else logging.WARNING
        self._log.log(level, "kafka %s: %s: %s%s; librdkafka keeps reconnecting", self.what, err.name(), err.str(),
                      more)

    def reachable(self) -> None:
        """A broker answered: reset the backoff of the log lines and say so once."""
        with self._lock:
            since, self.down_since = self.down_since, None
            self._step, self._next_line, self._suppressed = self._first, 0.0, 0
        if since is not None:
            self._log.warning("kafka %s: cluster reachable again after %.1fs", self.what, time.monotonic() - since)

    def stats(self, stats_json: str) -> None:
        """``stats_cb``: a broker in state UP means the cluster answers again."""
        if self.down_since is None:
            return
        try:
            brokers = json.loads(stats_json).get("brokers", {})
        except ValueError:
            return
        if any(b.get("state") == "UP" for b in brokers.values()):
            self.reachable()
