"""The emitter's settings and the one place that knows where they come from.

``EmitterConfig`` is a pydantic-settings model with the project's one
precedence rule (that of ``lineagewire.config.Settings``: explicit values, then
the environment, then the YAML file), where the explicit values of a Spark job
are its code and its Spark conf. Highest first:

1. arguments of ``install()`` / ``job_run()`` (``listeners=``, ``job_name=``, ``config={...}``);
2. Spark conf ``spark.lineagewire.<key>`` (usable with ``spark-submit --conf``);
3. environment ``LINEAGEWIRE_EMITTER__<KEY>`` (upper case; read by pydantic-settings), then the
   deprecated flat ``LINEAGEWIRE_<KEY>``, with a warning naming the new one (``lineagewire.config.renamed``);
4. the ``emitter:`` section of the YAML config file (``$LINEAGEWIRE_CONFIG``,
   else ``./lineagewire.yaml``; the file ``Settings`` reads);
5. the defaults below.

The order is ``lineagewire.config.SettingsBase``'s, as for every other service.

Kafka itself (bootstrap servers, security, schema registry, topic names) comes
from ``lineagewire.config.Settings`` (the ``kafka:`` section, ``LINEAGEWIRE_KAFKA__<KEY>``);
the keys ``bootstrap_servers`` and ``topic`` here override it, so a ``spark-submit``
line can carry them.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from lineagewire.config import SettingsBase
from lineagewire.exceptions import ConfigError
from lineagewire.redact import Redactor

from .exceptions import EmitterConfigError

if TYPE_CHECKING:
    from .lineage.dated import DatedFolders

__all__ = ["CONF_PREFIX", "ENV_PREFIX", "EmitterConfig", "conf_snapshot", "resolve_config"]

CONF_PREFIX = "spark.lineagewire."
#: Settings without a deprecated flat variable: bootstrap_servers, whose flat name was Kafka's own (an old name
#: of LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS, which the emitter falls back to), and those added after the rename.
_NO_FLAT_NAME = frozenset({"bootstrap_servers", "dated_folders", "dated_folder_patterns"})
ENV_PREFIX = "LINEAGEWIRE_EMITTER__"
#: the emitter's variables before they followed LINEAGEWIRE_<SECTION>__<KEY>, still read (with a warning)
OLD_ENV_PREFIX = "LINEAGEWIRE_"


class EmitterConfig(SettingsBase):
    """Typed emitter settings (see the module docstring for where each comes from)."""

    # Lists come as text from conf keys and variables ("kafka,log"): NoDecode hands it to the validators
    # below as it is, instead of pydantic-settings' JSON decoding.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", validate_default=True)
    config_section = "emitter"

    listeners: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["kafka"],
                                 description="listener names or dotted paths; empty starts none")
    enabled: bool = Field(False, description="configuration alone (this key, as Spark conf, variable or YAML) turns "
                          "the emitter on in any driver whose Python has lineagewire installed (spark-submit, the "
                          "pyspark shell, a notebook; _boot/lineagewire_activate.py); install() and lineagewire "
                          "instrument start it whatever this says")
    namespace: str = Field("spark", description="job namespace of every run")
    job_name: str | None = Field(None, description="job name of the application run (default: spark.app.name)")
    run_id: str | None = Field(None, description="run id of the application run (default: a new UUID)")
    bootstrap_servers: str | None = Field(None, description="overrides kafka.bootstrap_servers")
    topic: str | None = Field(None, description="overrides kafka.topics.jobs")
    flush_timeout: float = Field(10.0, ge=0, description="seconds close() and the exit flush may take: the first half "
                                 "for actions still being extracted, the rest for the listeners")
    time_budget_ms: float = Field(5000.0, gt=0, description="hard time budget of lineage extraction per action")
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
    redact_patterns: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="extra regexes whose matches (or their group named 'secret') are replaced "
        "by *** in every event; a JSON list, or one pattern per line")
    redact_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="extra key names whose values are secrets, in maps and in name=value text "
        "(comma-separated)")
    dated_folders: bool = Field(True, description="a file dataset whose last folders are a date, an hour or "
                                "key=value (…/orders/20261129, …/orders/ds=2026-11-29) is named by the folder above "
                                "them, with what was cut as its partition values, so a daily job writes one dataset")
    dated_folder_patterns: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="more regexes a whole trailing folder name may match to be cut as a "
        "date (e.g. batch_\\d+); a JSON list, or one pattern per line")

    @field_validator("listeners", "redact_keys", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [p.strip() for p in re.split(r"[,\s]+", v) if p.strip()]
        return v

    @field_validator("redact_patterns", "dated_folder_patterns", mode="before")
    @classmethod
    def _patterns(cls, v: Any) -> Any:
        # Regexes contain commas and spaces: a JSON list, or one per line, never split on commas.
        if isinstance(v, str):
            if v.lstrip().startswith("["):
                try:
                    return json.loads(v)
                except ValueError as exc:
                    raise ValueError(f"{v!r} is not a JSON list of regexes ({exc}); expected e.g. "
                                     '["ghp_[A-Za-z0-9]+"] or one regex per line') from None
            return [line for line in v.splitlines() if line.strip()]
        return v

    @field_validator("dated_folder_patterns")
    @classmethod
    def _dated(cls, v: list[str]) -> list[str]:
        cls.dated_rule(v)  # a pattern that does not compile says which, here, where the setting is read
        return v

    @staticmethod
    def dated_rule(patterns: list[str], enabled: bool = True) -> DatedFolders:
        # Imported here: the lineage package is not needed to read the settings (activation reads them at start-up).
        from .lineage.dated import DatedFolders

        return DatedFolders(enabled=enabled, extra=tuple(patterns))

    def dated(self) -> DatedFolders:
        """The dated-folder rule of every action's datasets (``dated_folders``, ``dated_folder_patterns``)."""
        return self.dated_rule(self.dated_folder_patterns, self.dated_folders)

    @field_validator("redact_patterns")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        for pattern in v:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regular expression ({exc}); expected a Python regex, "
                                 "optionally with a group named 'secret'") from None
        return v

    def redactor(self) -> Redactor:
        """The redactor of every event: the built-in patterns plus ``redact_patterns`` and ``redact_keys``."""
        return Redactor(self.redact_patterns, self.redact_keys)

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

    @classmethod
    def renamed_variables(cls) -> dict[str, str]:
        """The flat ``LINEAGEWIRE_<KEY>`` of every setting but ``bootstrap_servers``, whose flat name was Kafka's
        (``Settings``: now ``LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS``), which the emitter falls back to."""
        return {f"{OLD_ENV_PREFIX}{k.upper()}": f"{ENV_PREFIX}{k.upper()}" for k in cls.model_fields
                if k not in _NO_FLAT_NAME}

    def outbox_path(self, job_name: str) -> pathlib.Path:
        """The outbox folder for the application ``job_name``."""
        if self.outbox_dir:
            return pathlib.Path(self.outbox_dir).expanduser()
        from lineagewire.kafka.local import home

        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.namespace}.{job_name}")[:120]
        return home() / "outbox" / safe


def _strip(config: Mapping[str, Any]) -> dict[str, Any]:
    return {(k[len(CONF_PREFIX):] if k.startswith(CONF_PREFIX) else k): v for k, v in config.items()}


def resolve_config(*, spark_conf: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None,
                   **arguments: Any) -> EmitterConfig:
    """The emitter's settings from every source in precedence order (module docstring).

    ``spark_conf`` holds the session's ``spark.lineagewire.*`` entries; ``arguments``
    are install()'s keyword arguments (None means "not given"). Raises
    EmitterConfigError naming the key, the value and what was expected.
    """
    merged: dict[str, Any] = {}
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
    except EmitterConfigError:
        raise
    except ConfigError as exc:  # the config file (lineagewire.config.read_section)
        raise EmitterConfigError(str(exc)) from None
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


def conf_snapshot(conf: Mapping[str, str], redactor: Redactor | None = None) -> dict[str, str]:
    """The whitelisted, secret-free subset of a Spark conf for the JobSpec snapshot.

    Keys that name a secret are left out; the values kept are redacted too (a JAAS
    config or a URL with ``user:password@`` hides under an innocent key name).
    """
    r = redactor or Redactor()
    return {k: r.text(str(v)) for k, v in sorted(conf.items())
            if k.startswith(CONF_WHITELIST) and not r.is_secret_key(k)}
