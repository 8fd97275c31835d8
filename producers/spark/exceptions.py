"""Errors of the Spark emitter.

    LineagewireError
    ├── KafkaError
    │   └── OutboxError              the local outbox folder cannot be used (lineagewire.kafka.outbox)
    └── EmitterError                 the emitter could not start or was misused
        ├── EmitterConfigError       a ``spark.lineagewire.*`` / ``LINEAGEWIRE_EMITTER__*`` value is wrong
        ├── UnknownListenerError     a configured listener name is not registered
        ├── UnsupportedSparkError    the driver runs a Spark outside the supported lines (versions.py)
        └── JvmClassesError          the emitter's Java classes could not be compiled or loaded

Only ``install()`` / ``job_run()`` raise them, at start (``JvmClassesError`` never
reaches the job: the emitter logs it and uses its Python SparkListener instead). Once running, the
emitter never raises into the job: failures are logged and counted.
"""

from __future__ import annotations

from lineagewire.exceptions import ConfigError, LineagewireError, OutboxError

__all__ = ["EmitterConfigError", "EmitterError", "JvmClassesError", "OutboxError", "UnknownListenerError",
           "UnsupportedSparkError"]


class EmitterError(LineagewireError):
    """The Spark emitter could not start, or was used the wrong way."""


class EmitterConfigError(EmitterError, ConfigError):
    """An emitter setting has a wrong value; the message names the key, the value and what was expected."""


class UnknownListenerError(EmitterConfigError):
    """A configured listener is neither a registered name nor an importable dotted path."""

    def __init__(self, name: str, available: list[str], detail: str = "") -> None:
        super().__init__(
            f"unknown listener {name!r} in spark.lineagewire.listeners / LINEAGEWIRE_EMITTER__LISTENERS; expected one "
            f"of {', '.join(sorted(available)) or '(none registered)'} or a dotted path 'package.module:Factory'"
            + (f" ({detail})" if detail else "")
        )
        self.name = name
        self.available = sorted(available)


class UnsupportedSparkError(EmitterError):
    """The driver runs a Spark the emitter does not support; the message names the versions it does."""


class JvmClassesError(EmitterError):
    """The emitter's Java classes could not be compiled or loaded; the message carries javac's own words."""
