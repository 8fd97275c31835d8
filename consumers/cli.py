"""``lineagewire consume <service>``: run a consumer service on the shared runtime.

Each service is a subcommand; they share the runtime options below
(``runtime_options``, the settings ``ConsumerSettings``: flags, ``LINEAGEWIRE_CONSUMER__<KEY>``, the
``consumer:`` section of the YAML file, defaults). Each service's command lives in its own package (``SERVICES``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

import click
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from lineagewire.cli import setting, settings_from, settings_of
from lineagewire.config import SettingsBase

log = logging.getLogger(__name__)

__all__ = ["ConsumerSettings", "consume", "run_service", "runtime_options", "runtime_settings"]


class ConsumerSettings(SettingsBase):
    """What every service shares: its topics, group, metrics port, retries and dead letters (``consumer:``)."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_CONSUMER__", extra="forbid")
    config_section = "consumer"
    title = "consumer settings"

    topics: list[str] = Field(default_factory=list, description="topics to consume (default: the service's own, "
                              "lineage.jobs for most)")
    group_id: str | None = Field(None, description="consumer group (default: lineagewire-<service>)")
    metrics_port: int | None = Field(None, ge=0, le=65535, description="serve /metrics and /healthz on "
                                     "127.0.0.1:PORT (0 = any free port; default: off)")
    retry_initial: float = Field(0.5, gt=0, description="first backoff (s) while an output is down; doubles up to "
                                 "retry_max")
    retry_max: float = Field(30.0, gt=0, description="longest backoff (s)")
    give_up_after: float | None = Field(None, gt=0, description="dead-letter an event whose output is still down "
                                        "after this many seconds (default: retry until it is back)")
    max_handler_retries: int = Field(5, ge=0, description="retries of an event whose handler raised an unexpected "
                                     "exception (a bug, not an output that is down) before it is dead-lettered "
                                     "with the traceback in its headers")
    dedup_window: int = Field(100_000, ge=0, description="how many recent event ids to remember to skip "
                              "redelivered events")
    dead_letters: bool = Field(True, description="write bad events to a dead-letter topic (false: skip and log them)")
    consumer_properties: dict[str, str] = Field(default_factory=dict, description="librdkafka consumer properties, "
                                                "e.g. {session.timeout.ms: '6000'}")


def runtime_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options every service has (``ConsumerSettings``)."""
    options = [
        setting(ConsumerSettings, "topics", "--topic", multiple=True, help="Topic to consume (repeatable)."),
        setting(ConsumerSettings, "group_id", "--group", help="Consumer group."),
        setting(ConsumerSettings, "metrics_port", "--metrics-port", type=int, help="Serve /metrics and /healthz on "
                "127.0.0.1:PORT (0 = any free port)."),
        setting(ConsumerSettings, "retry_initial", "--retry-initial", type=float,
                help="First backoff (s) while an output is down; doubles up to --retry-max."),
        setting(ConsumerSettings, "retry_max", "--retry-max", type=float, help="Longest backoff (s)."),
        setting(ConsumerSettings, "give_up_after", "--give-up-after", type=float,
                help="Dead-letter an event whose output is still down after this many seconds."),
        setting(ConsumerSettings, "max_handler_retries", "--max-handler-retries", type=click.IntRange(min=0),
                help="Retries of an event whose handler raised an unexpected exception (a bug, not an output that "
                     "is down) before it is dead-lettered with the traceback in its headers."),
        setting(ConsumerSettings, "dedup_window", "--dedup-window", type=int,
                help="How many recent event ids to remember to skip redelivered events."),
        setting(ConsumerSettings, "dead_letters", "--dlq/--no-dlq",
                help="Write bad events to a dead-letter topic, or skip (log) them."),
        setting(ConsumerSettings, "consumer_properties", "--consumer-property", multiple=True, metavar="KEY=VALUE",
                help="A librdkafka consumer property (repeatable), e.g. session.timeout.ms=6000."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def runtime_settings(ctx: click.Context, **runtime: Any) -> ConsumerSettings:
    """The runtime options of a service: its flags (``runtime_options``), then the rule's other sources."""
    props = runtime.pop("consumer_properties", None)
    if props is not None:
        runtime["consumer_properties"] = {}
        for prop in props:
            key, sep, value = prop.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"{prop!r}: expected KEY=VALUE", param_hint="--consumer-property")
            runtime["consumer_properties"][key.strip()] = value.strip()
    return settings_of(ctx, ConsumerSettings, **runtime)


def run_service(ctx: click.Context, handler: Any, **runtime: Any) -> None:
    """Run ``handler`` until SIGTERM/SIGINT, then print what was done to stderr; ``runtime``: the flags of
    ``runtime_options`` (None: not given)."""
    from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy

    cfg = runtime_settings(ctx, **runtime)
    try:
        retry = RetryPolicy(initial=cfg.retry_initial, maximum=cfg.retry_max, give_up_after=cfg.give_up_after,
                            max_handler_retries=cfg.max_handler_retries)
    except ValueError as exc:
        raise click.UsageError(f"retry options: {exc}") from exc
    settings = settings_from(ctx)
    service = ConsumerRuntime(
        settings, handler, topics=cfg.topics or None, group_id=cfg.group_id, retry=retry,
        dedup_window=cfg.dedup_window, dead_letters=cfg.dead_letters, metrics_port=cfg.metrics_port,
        consumer_config=cfg.consumer_properties)

    def started() -> None:  # once the settings were accepted, so a wrong one is the only line printed
        click.echo(f"{handler.name}: consuming {', '.join(service.topics)} as group {service.group_id} "
                   f"(Ctrl-C or SIGTERM to stop)", err=True)

    stats = service.run(install_signal_handlers=True, on_open=started)
    click.echo(f"{handler.name}: stopped; consumed {stats.consumed}, emitted {stats.emitted}, "
               f"dead-lettered {stats.dead_lettered}, duplicates skipped {stats.duplicates}, "
               f"retries {stats.retries}", err=True)


#: services that live in their own package: name -> "module:click command" (imported when run)
SERVICES: dict[str, str] = {
    "openlineage": "lineagewire.consumers.openlineage.cli:openlineage",
    "datahub": "lineagewire.consumers.datahub.cli:datahub",
    "alerting": "lineagewire.consumers.alerting.cli:alerting",
    "archive": "lineagewire.consumers.audit.cli:archive",
    "registry": "lineagewire.consumers.audit.cli:registry",
}


class _ServiceGroup(click.Group):
    """The commands defined here plus ``SERVICES``, each imported only when it is run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *SERVICES})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SERVICES:
            return super().get_command(ctx, name)
        module, _, attr = SERVICES[name].partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                return None  # that service is not built yet
            raise click.ClickException(str(exc)) from exc
        except ImportError as exc:  # a missing optional extra: the error carries the pip line
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_ServiceGroup)
def consume() -> None:
    """Run a consumer service in its own consumer group (at-least-once; see docs/consumers.md)."""


@consume.command("plugin")
@click.argument("name")
@runtime_options
@click.pass_context
def plugin(ctx: click.Context, name: str, **runtime: Any) -> None:
    """Run a handler registered as NAME (entry point group lineagewire.handlers, or module:Class)."""
    from lineagewire.consumers.runtime import load_handler_class

    handler = load_handler_class(name)()
    run_service(ctx, handler, **runtime)
