"""``lineagewire consume <service>``: run a consumer service on the shared runtime.

Each service is a subcommand; they share the runtime options below
(``runtime_options``). Each service's command lives in its own package (``SERVICES``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

import click

from lineagewire.cli import settings_from

log = logging.getLogger(__name__)

__all__ = ["consume", "run_service", "runtime_options"]


def runtime_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options every service has: topics, group, metrics port, retries, dedup window."""
    options = [
        click.option("--topic", "topics", multiple=True,
                     help="Topic to consume (repeatable; default: the jobs topic, lineage.jobs)."),
        click.option("--group", "group_id", default=None,
                     help="Consumer group (default: lineagewire-<service>)."),
        click.option("--metrics-port", type=int, default=None,
                     help="Serve /metrics and /healthz on 127.0.0.1:PORT (0 = any free port; default: off)."),
        click.option("--retry-initial", type=float, default=0.5, show_default=True,
                     help="First backoff (s) while an output is down; doubles up to --retry-max."),
        click.option("--retry-max", type=float, default=30.0, show_default=True, help="Longest backoff (s)."),
        click.option("--give-up-after", type=float, default=None,
                     help="Dead-letter an event whose output is still down after this many seconds "
                          "(default: retry until it is back)."),
        click.option("--max-handler-retries", type=click.IntRange(min=0), default=5, show_default=True,
                     help="Retries of an event whose handler raised an unexpected exception (a bug, not an output "
                          "that is down) before it is dead-lettered with the traceback in its headers."),
        click.option("--dedup-window", type=int, default=100_000, show_default=True,
                     help="How many recent event ids to remember to skip redelivered events."),
        click.option("--no-dlq", is_flag=True, help="Skip (log) bad events instead of writing a dead-letter topic."),
        click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
                     help="A librdkafka consumer property (repeatable), e.g. session.timeout.ms=6000."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def run_service(ctx: click.Context, handler: Any, *, topics: tuple[str, ...], group_id: str | None,
                metrics_port: int | None, retry_initial: float, retry_max: float, give_up_after: float | None,
                dedup_window: int, no_dlq: bool, consumer_properties: tuple[str, ...] = (),
                max_handler_retries: int = 5) -> None:
    """Run ``handler`` until SIGTERM/SIGINT, then print what was done to stderr."""
    from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy

    consumer_config = {}
    for prop in consumer_properties:
        key, sep, value = prop.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{prop!r}: expected KEY=VALUE", param_hint="--consumer-property")
        consumer_config[key.strip()] = value.strip()

    try:
        retry = RetryPolicy(initial=retry_initial, maximum=retry_max, give_up_after=give_up_after,
                            max_handler_retries=max_handler_retries)
    except ValueError as exc:
        raise click.UsageError(f"retry options: {exc}") from exc
    settings = settings_from(ctx)
    runtime = ConsumerRuntime(
        settings, handler, topics=list(topics) or None, group_id=group_id, retry=retry,
        dedup_window=dedup_window, dead_letters=not no_dlq, metrics_port=metrics_port,
        consumer_config=consumer_config)

    def started() -> None:  # once the settings were accepted, so a wrong one is the only line printed
        click.echo(f"{handler.name}: consuming {', '.join(runtime.topics)} as group {runtime.group_id} "
                   f"(Ctrl-C or SIGTERM to stop)", err=True)

    stats = runtime.run(install_signal_handlers=True, on_open=started)
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
