"""The Spark-side emitter: job status and lineage of PySpark jobs, published without hurting the job.

    from lineagewire.producers.spark import install, job_run

    emitter = install(spark)                      # the application run, every action's lineage
    with job_run(spark, "daily orders") as run:   # a named run of its own
        ...
    emitter.close()                               # or spark.stop() / interpreter exit

Zero-code: ``lineagewire instrument -- python job.py [args]``. Settings:
``spark.lineagewire.*`` conf keys or ``LINEAGEWIRE_EMITTER__*`` variables (``config.py``).
Listener plugins: ``listeners/base.py``. User guide: docs/emitter.md.
"""

from .callbacks import SparkCallbacks
from .config import EmitterConfig
from .emitter import Emitter, install, job_run, running
from .exceptions import EmitterConfigError, EmitterError, OutboxError, UnknownListenerError, UnsupportedSparkError
from .internals import release_thread_connection
from .listeners.base import JobStatusListener, JobStatusListenerFactory, ListenerContext
from .runs import Run

__all__ = [
    "Emitter",
    "EmitterConfig",
    "EmitterConfigError",
    "EmitterError",
    "JobStatusListener",
    "JobStatusListenerFactory",
    "ListenerContext",
    "OutboxError",
    "Run",
    "SparkCallbacks",
    "UnknownListenerError",
    "UnsupportedSparkError",
    "install",
    "job_run",
    "release_thread_connection",
    "running",
]
