"""Settings of the scheduler service, with lineagewire's one precedence rule.

Highest first (the same rule as ``lineagewire.config.Settings``):

1. values passed in code or as ``lineagewire scheduler serve`` flags;
2. environment variables ``LINEAGEWIRE_SCHEDULER__<FIELD>`` (nested with ``__``), e.g.
   ``LINEAGEWIRE_SCHEDULER__DB_URL``, ``LINEAGEWIRE_SCHEDULER__MISFIRE_GRACE``; the token's, which the
   ``workflows`` CLI reads too, also under its deprecated name ``LINEAGEWIRE_SCHEDULER_TOKEN``;
3. the ``scheduler:`` section of the YAML config file (``config_file``; the CLI passes ``--config``, else
   ``$LINEAGEWIRE_CONFIG``, else ``./lineagewire.yaml`` when it exists), whose ``url`` is the ``workflows``
   client's, left to it;
4. the defaults below.

``ServiceConfig`` extends ``SchedulerOptions``, so every scheduling option is a
setting too, with the same checks. Bad values raise ``ConfigError`` naming the
setting, the value and what was expected (``load``).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import sqlalchemy as sa
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from lineagewire.config import SettingsBase, find_config_file
from lineagewire.exceptions import ConfigError

from .options import SchedulerOptions

__all__ = ["ENV_PREFIX", "ServiceConfig"]

ENV_PREFIX = "LINEAGEWIRE_SCHEDULER__"


class ServiceConfig(SettingsBase, SchedulerOptions):
    """Settings of ``lineagewire scheduler serve``; see the module docstring for where they come from."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid",
                                      validate_default=True)
    config_section = "scheduler"
    #: the scheduler client's (``SchedulerClientSettings``: ``workflows``, ``ui``), which reads this section too;
    #: ``token`` the two share
    shared_section_keys = frozenset({"url"})

    config_file: pathlib.Path | None = Field(None, exclude=True,
                                             description="YAML file whose 'scheduler:' section is read")
    db_url: str = Field("sqlite:///lineagewire-scheduler.db", description="Any SQLAlchemy URL")
    tables: str | None = Field(None, description="YAML file declaring the materialized tables")
    token: SecretStr | None = Field(None, description="Bearer token required for changes")
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    lead: float = Field(2.0, ge=0, le=60,
                        description="Claim fires this many seconds ahead and hold them, so they go out on time")
    status_group: str = Field("lineagewire-scheduler-status", min_length=1, max_length=200)
    status_metrics_port: int | None = Field(None, ge=0, le=65535,
                                            description="/metrics and /healthz of the status tracker on 127.0.0.1 "
                                            "(0 = any free port; default off)")
    inputs_group: str = Field("lineagewire-scheduler-inputs", min_length=1, max_length=200,
                              description="consumer group of the inputs tracker (writes to the tables' inputs)")
    status_retry_initial: float = Field(0.5, gt=0, le=3600,
                                        description="First backoff (s) while the database is unavailable")
    status_retry_max: float = Field(30.0, gt=0, le=3600,
                                    description="Longest backoff (s) while the database is unavailable")

    @field_validator("db_url")
    @classmethod
    def _url(cls, v: str) -> str:
        try:
            url = sa.make_url(v)
            url.get_dialect()  # the driver must be known, not only the syntax
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises several kinds; all mean "not usable"
            raise ValueError(f"{_hide(v)!r} is not a database URL SQLAlchemy can use ({type(exc).__name__}: "
                             f"{exc}); expected e.g. sqlite:///scheduler.db or "
                             "postgresql+psycopg://user@host:5432/db") from None
        return v

    @classmethod
    def load(cls, config_file: str | os.PathLike[str] | None = None, **flags: Any) -> ServiceConfig:
        """Settings from ``flags`` (None values ignored), the environment and the config file's ``scheduler:``
        section; ConfigError naming each bad setting."""
        path = find_config_file(config_file)
        try:
            return cls(config_file=path, **{k: v for k, v in flags.items() if v is not None})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'scheduler'}: {e['msg']}"
                                 f"{_got(e)}" for e in exc.errors())
            raise ConfigError(f"invalid scheduler settings: {problems}") from None

    def options(self) -> SchedulerOptions:
        """The scheduling options of this configuration."""
        return SchedulerOptions(**{k: getattr(self, k) for k in SchedulerOptions.model_fields})

    def safe_db_url(self) -> str:
        """``db_url`` with its password hidden, for logs and messages."""
        return _hide(self.db_url)


def _hide(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL at all: nothing to hide but keep it short
        return url[:200]


def _got(err: Any) -> str:
    if any("token" in str(p) for p in err.get("loc", ())):
        return " (got <secret>)"
    if "input" not in err or isinstance(err["input"], dict):
        return ""
    return f" (got {repr(err['input'])[:80]})"
