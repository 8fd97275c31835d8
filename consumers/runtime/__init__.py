"""The shared at-least-once consumer runtime every lineagewire service runs on.

A service is a ``Handler`` (``base.py``: the plugin contract); ``ConsumerRuntime``
(``runtime.py``) runs it in its own consumer group with decoding, commits after
output, a dedup window, a dead-letter topic, retries with backoff, graceful
shutdown, Prometheus metrics and ``/healthz``.
"""

from .base import ENTRY_POINT_GROUP, HANDLERS, Handler, load_handler_class
from .deadletter import TRUNCATION_HEADERS, DeadLetterWriter
from .dedup import DedupWindow
from .exceptions import ConsumerError, DeadLetterError, GaveUpError, HandlerBugError, OutputError, PermanentError
from .gcsettings import tune_gc
from .inflight import InFlight, Rejected, blocking
from .metrics import HealthServer, Metrics
from .record import Record
from .retry import OUTAGE_ERRORS, RetryPolicy, is_outage
from .runtime import DLQ_HEADERS, ConsumerRuntime, RunStats

__all__ = [
    "DLQ_HEADERS", "ENTRY_POINT_GROUP", "HANDLERS", "OUTAGE_ERRORS", "TRUNCATION_HEADERS", "ConsumerError",
    "ConsumerRuntime", "DeadLetterError", "DeadLetterWriter", "DedupWindow", "GaveUpError", "Handler",
    "HandlerBugError", "HealthServer", "InFlight", "Metrics", "OutputError", "PermanentError", "Record", "Rejected",
    "RetryPolicy", "RunStats",
    "blocking", "is_outage", "load_handler_class", "tune_gc",
]
