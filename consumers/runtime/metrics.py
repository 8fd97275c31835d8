"""Prometheus metrics of a consumer service, and its ``/metrics`` + ``/healthz`` endpoint.

Each runtime has its own ``CollectorRegistry`` so several can live in one
process (tests, benchmarks). Metric names:

==============================================  =========  =========================================
name                                            type       labels
==============================================  =========  =========================================
lineagewire_consumer_consumed_total             counter    service, topic
lineagewire_consumer_emitted_total              counter    service
lineagewire_consumer_failed_total               counter    service, stage (output, tick, dead_letter, commit)
lineagewire_consumer_dead_lettered_total        counter    service, topic, reason
lineagewire_consumer_duplicates_skipped_total   counter    service
lineagewire_consumer_lag                        gauge      service, topic, partition
lineagewire_consumer_handler_latency_seconds    histogram  service
==============================================  =========  =========================================
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lineagewire.exceptions import MissingExtraError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

__all__ = ["HealthServer", "Metrics"]


def _prometheus() -> ModuleType:
    """prometheus_client, imported when a service counts (``Metrics``), not when the runtime's package is: the
    read commands (``subscribe``, ``replay``) import the package and need only the base install."""
    try:
        import prometheus_client
    except ImportError as exc:  # depends on the installed extras
        raise MissingExtraError("prometheus_client", "consumers", "The consumer runtime's metrics") from exc
    return prometheus_client


class Metrics:
    """The runtime's metrics, bound to one service name."""

    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        prom = _prometheus()
        Counter, Gauge, Histogram = prom.Counter, prom.Gauge, prom.Histogram  # noqa: N806 - their own names
        self._text = prom.generate_latest
        self.content_type: str = prom.CONTENT_TYPE_LATEST
        self.registry = registry or prom.CollectorRegistry()
        self.service = service
        r = self.registry
        p = "lineagewire_consumer_"
        self._consumed = Counter(p + "consumed", "Messages read from Kafka.", ["service", "topic"], registry=r)
        self._emitted = Counter(p + "emitted", "Outputs the handler emitted.", ["service"], registry=r)
        self._failed = Counter(p + "failed", "Failed attempts (each retry counts).", ["service", "stage"],
                               registry=r)
        self._dead = Counter(p + "dead_lettered", "Messages sent to the dead-letter topic.",
                             ["service", "topic", "reason"], registry=r)
        self._dups = Counter(p + "duplicates_skipped", "Events skipped as already handled (dedup window).",
                             ["service"], registry=r)
        self._lag = Gauge(p + "lag", "High watermark minus the next offset to handle.",
                          ["service", "topic", "partition"], registry=r)
        self._latency = Histogram(p + "handler_latency_seconds", "Time to handle one event (retries included).",
                                  ["service"], registry=r,
                                  buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                                           5, 10, 30, 60))

        # The labelled children of the per-message metrics, looked up once: ``labels()`` takes a lock and
        # builds its key on every call, a few µs per message on the consumer's hot path.
        self._consumed_of: dict[str, Any] = {}
        # (made at first use: a series appears in /metrics once it has something to say, as before)
        self._emitted_child: Any = None
        self._latency_child: Any = None

    def consumed(self, topic: str) -> None:
        child = self._consumed_of.get(topic)
        if child is None:
            child = self._consumed_of[topic] = self._consumed.labels(self.service, topic)
        child.inc()

    def emitted(self, n: int) -> None:
        if n:
            if self._emitted_child is None:
                self._emitted_child = self._emitted.labels(self.service)
            self._emitted_child.inc(n)

    def failed(self, stage: str) -> None:
        self._failed.labels(self.service, stage).inc()

    def dead_lettered(self, topic: str, reason: str) -> None:
        self._dead.labels(self.service, topic, reason).inc()

    def duplicate(self) -> None:
        self._dups.labels(self.service).inc()

    def lag(self, topic: str, partition: int, value: int) -> None:
        self._lag.labels(self.service, topic, str(partition)).set(max(0, value))

    def latency(self, seconds: float) -> None:
        if self._latency_child is None:
            self._latency_child = self._latency.labels(self.service)
        self._latency_child.observe(seconds)

    def value(self, name: str, **labels: str) -> float:
        """Current value of a sample (tests, summaries); 0 when absent."""
        v = self.registry.get_sample_value(name, {"service": self.service, **labels})
        return v or 0.0

    def text(self) -> bytes:
        text: bytes = self._text(self.registry)
        return text


class HealthServer:
    """Serves ``/metrics`` (Prometheus text) and ``/healthz`` (JSON) on 127.0.0.1.

    ``health()`` returns (ok, details); /healthz answers 200 when ok, else 503.
    ``port=0`` picks a free port (see ``.port``).
    """

    def __init__(self, metrics: Metrics, health: Callable[[], tuple[bool, dict[str, Any]]], *,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.metrics = metrics
        self.health = health
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?")[0] == "/metrics":
                    body, ctype, code = outer.metrics.text(), outer.metrics.content_type, 200
                elif self.path.split("?")[0] == "/healthz":
                    ok, details = outer.health()
                    body = json.dumps({"status": "ok" if ok else "unhealthy", **details}).encode()
                    ctype, code = "application/json", 200 if ok else 503
                else:
                    body, ctype, code = b"not found; try /metrics or /healthz\n", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                log.debug("healthz %s", format % args)

        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._server.daemon_threads = True
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, name="lineagewire-metrics", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        log.info("metrics and health on http://%s:%s/metrics and /healthz", self.host, self.port)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

