"""The shared at-least-once consumer runtime every lineagewire service runs on.

A service is a ``Handler`` (``base.py``: the plugin contract); ``ConsumerRuntime``
(``runtime.py``) runs it in its own consumer group with decoding, commits after
output, a dedup window, a dead-letter topic, retries with backoff, graceful
shutdown, Prometheus metrics and ``/healthz``.
"""

from .base import ENTRY_POINT_GROUP, HANDLERS, Handler, load_handler_class
from .dedup import DedupWindow
from .exceptions import ConsumerError, DeadLetterError, OutputError, PermanentError
from .metrics import HealthServer, Metrics
from .runtime import DLQ_HEADERS, ConsumerRuntime, RetryPolicy, RunStats

__all__ = [
    "DLQ_HEADERS", "ENTRY_POINT_GROUP", "HANDLERS", "ConsumerError", "ConsumerRuntime", "DeadLetterError",
    "DedupWindow", "Handler", "HealthServer", "Metrics", "OutputError", "PermanentError", "RetryPolicy", "RunStats",
    "load_handler_class",
]
