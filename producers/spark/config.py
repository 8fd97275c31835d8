"""The emitter's settings and the one place that knows where they come from.

Every key exists in two spellings: a Spark conf key ``spark.lineagewire.<key>``
(usable with ``spark-submit --conf`` or ``SparkSession.builder.config``) and an
environment variable ``LINEAGEWIRE_<KEY>`` (upper case). Precedence, highest first:

1. arguments of ``install()`` / ``job_run()`` (``listeners=``, ``job_name=``, ``config={...}``);
2. Spark conf ``spark.lineagewire.<key>``;
3. environment ``LINEAGEWIRE_<KEY>``;
4. the defaults below.

Kafka itself (bootstrap servers, security, schema registry, topic names) comes
from ``lineagewire.config.Settings``; the keys ``bootstrap_servers`` and
``topic`` here override it, so a ``spark-submit`` line can carry them.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from .exceptions import EmitterConfigError

__all__ = ["CONF_PREFIX", "ENV_PREFIX", "EmitterConfig", "conf_snapshot", "resolve_config"]

CONF_PREFIX = "spark.lineagewire."
ENV_PREFIX = "LINEAGEWIRE_"


class EmitterConfig(BaseModel):
    """Typed emitter settings (see the module docstring for where each comes from)."""

    model_config = {"extra": "forbid"}

    listeners: list[str] = Field(default_factory=lambda: ["kafka"],
                                 description="listener names or dotted paths; empty starts none")
    namespace: str = Field("spark", description="job namespace of every run")
    job_name: str | None = Field(None, description="job name of the application run (default: spark.app.name)")
    run_id: str | None = Field(None, description="run id of the application run (default: a new UUID)")
    bootstrap_servers: str | None = Field(None, description="overrides Settings.bootstrap_servers")
    topic: str | None = Field(None, description="overrides Settings.topics.jobs")
    flush_timeout: float = Field(5.0, ge=0, description="seconds the exit flush may take, all listeners together")
    time_budget_ms: float = Field(1000.0, gt=0, description="hard time budget of lineage extraction per action")
    queue_size: int = Field(1000, ge=1, description="events each listener may have queued before new ones drop")
    action_queue_size: int = Field(64, ge=1, description="Spark actions awaiting extraction before they are "
                                   "sent without lineage")
    max_event_bytes: int = Field(900_000, ge=10_000, description="encoded size above which an action's lineage "
                                 "is split over several events")
    outbox_dir: str | None = Field(None, description="spool folder while Kafka is unreachable "
                                   "(default: $LINEAGEWIRE_HOME/outbox/<namespace>.<job_name>)")
    outbox_max_mb: float = Field(64.0, gt=0, description="the outbox never grows beyond this")
    delivery_timeout: float = Field(10.0, gt=0, description="seconds Kafka may take to acknowledge an event "
                                    "before it waits in the outbox instead")
    spark_listener: bool = Field(True, description="register a SparkListener for job and application events")
    javac: str | None = Field(None, description="javac that compiles the emitter's JVM SparkListener once per "
                              "machine (default: the driver JDK's own, then javac on PATH)")
    streaming_listener: bool = Field(True, description="register a StreamingQueryListener")
    heartbeat: float = Field(30.0, ge=0, description="at most one streaming progress event per query per this "
                             "many seconds (0: every progress)")
    file_path: str = Field("lineagewire-events.jsonl", description="JSON-lines file of the 'file' listener")
    log_level: str = Field("INFO", description="level of the 'log' listener")

    @field_validator("listeners", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [p.strip() for p in re.split(r"[,\s]+", v) if p.strip()]
        return v

    @field_validator("javac")
    @classmethod
    def _javac(cls, v: str | None) -> str | None:
        if v and not (os.path.isfile(v) and os.access(v, os.X_OK)):
            raise ValueError(f"javac={v!r} is not an executable file; expected the path of a JDK's javac")
        return v or None

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        if v.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError(f"log_level={v!r}; expected DEBUG, INFO, WARNING or ERROR")
        return v.upper()

    def outbox_path(self, job_name: str) -> pathlib.Path:
        """The outbox folder for the application ``job_name``."""
        if self.outbox_dir:
            return pathlib.Path(self.outbox_dir).expanduser()
        from lineagewire.kafka.local import home

        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.namespace}.{job_name}")[:120]
        return home() / "outbox" / safe


def _from_env(environ: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name in EmitterConfig.model_fields:
        value = environ.get(ENV_PREFIX + name.upper())
        if value is not None:
            out[name] = value
    return out


def _strip(config: Mapping[str, Any]) -> dict[str, Any]:
    return {(k[len(CONF_PREFIX):] if k.startswith(CONF_PREFIX) else k): v for k, v in config.items()}


def resolve_config(*, spark_conf: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None,
                   config: Mapping[str, Any] | None = None, **arguments: Any) -> EmitterConfig:
    """Merge the sources in precedence order; raise EmitterConfigError naming key, value and expectation.

    ``spark_conf`` holds the session's ``spark.lineagewire.*`` entries; ``arguments``
    are install()'s keyword arguments (None means "not given").
    """
    env = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    merged.update(_from_env(env))
    # Keys with a dot after the prefix (spark.lineagewire.<listener>.<key>) belong to plugins, not to us.
    merged.update({k: v for k, v in _strip(spark_conf or {}).items() if "." not in k})
    merged.update(_strip(config or {}))
    merged.update({k: v for k, v in arguments.items() if v is not None})
    unknown = sorted(set(merged) - set(EmitterConfig.model_fields))
    if unknown:
        raise EmitterConfigError(
            f"unknown emitter setting(s) {', '.join(CONF_PREFIX + u for u in unknown)}; expected one of "
            f"{', '.join(CONF_PREFIX + k for k in EmitterConfig.model_fields)}")
    try:
        return EmitterConfig(**merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{CONF_PREFIX}{'.'.join(str(p) for p in err['loc'])}={err.get('input')!r}: {err['msg']}"
            for err in exc.errors())
        raise EmitterConfigError(f"invalid emitter settings: {problems}") from None


#: Spark conf keys worth keeping in a run's spec snapshot (prefixes); everything else is left out.
CONF_WHITELIST: tuple[str, ...] = (
    "spark.app.name", "spark.master", "spark.submit.deployMode", "spark.default.parallelism",
    "spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled", "spark.sql.catalogImplementation",
    "spark.serializer", "spark.driver.memory", "spark.driver.cores", "spark.executor.memory",
    "spark.executor.cores", "spark.executor.instances", "spark.dynamicAllocation.", "spark.jars.packages",
    "spark.sql.warehouse.dir", "spark.sql.sources.partitionOverwriteMode", "spark.lineagewire.",
)
_SECRET = re.compile(r"pass|secret|token|credential|auth|key", re.IGNORECASE)


def conf_snapshot(conf: Mapping[str, str]) -> dict[str, str]:
    """The whitelisted, secret-free subset of a Spark conf for the JobSpec snapshot."""
    return {k: str(v) for k, v in sorted(conf.items())
            if k.startswith(CONF_WHITELIST) and not _SECRET.search(k)}
