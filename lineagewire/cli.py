"""The ``lineagewire`` command.

Each subsystem owns its commands; this module only lists where they live
(``COMMANDS``) and imports a command's module when it is run, so
``lineagewire subscribe`` never imports PySpark or FastAPI. A new command is
one line here plus a click command in its own package.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from lineagewire import __version__
from lineagewire.exceptions import LineagewireError

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M")
F = TypeVar("F", bound=Callable[..., Any])
#: the prefix of the Kafka settings' variables and their YAML section (``lineagewire.config.Settings``'; not imported:
#: pydantic would load with every command, even --help; tests/core/test_settings_help.py holds them to the model's)
KAFKA_ENV_PREFIX = "LINEAGEWIRE_KAFKA__"
KAFKA_SECTION = "kafka"

#: command name -> "module:attribute" of a click command or group
COMMANDS: dict[str, str] = {
    "kafka": "lineagewire.kafka.cli:kafka",
    "topics": "lineagewire.kafka.cli:topics",
    "subscribe": "lineagewire.consumers.audit.subscribe:subscribe",
    "replay": "lineagewire.consumers.audit.replay:replay",
    "consume": "lineagewire.consumers.cli:consume",
    "instrument": "lineagewire.producers.spark.cli:instrument",
    "connect-server": "lineagewire.producers.spark.cli:connect_server",
    "scheduler": "lineagewire.producers.scheduler.cli:scheduler",
    "workflows": "lineagewire.producers.scheduler.cli:workflows",
    "refresh-runner": "lineagewire.producers.refresh_runner.cli:refresh_runner",
    "ingest": "lineagewire.producers.ingest.cli:ingest",
    "demo": "lineagewire.demo:demo",
    "alerts": "lineagewire.consumers.alerting.cli:alerts",
    "audit": "lineagewire.consumers.audit.cli:audit",
    "jobs": "lineagewire.consumers.audit.cli:jobs",
    "runs": "lineagewire.consumers.audit.cli:runs",
    "lineage": "lineagewire.consumers.audit.cli:lineage",
    "datasets": "lineagewire.consumers.audit.registry_cli:datasets",
    "impact": "lineagewire.consumers.audit.impact_cli:impact",
    "registry": "lineagewire.consumers.audit.cli:registry_group",
    "db": "lineagewire.db.cli:db",
    "ui": "lineagewire.consumers.audit.ui.cli:ui",
}

_HELP: dict[str, str] = {
    "kafka": "Fetch, start, stop and inspect the local single-node Kafka.",
    "topics": "Create and list lineagewire's topics.",
    "subscribe": "Tail decoded events from a topic.",
    "replay": "Replay a time or offset range of events for audit.",
    "consume": "Run a consumer service (openlineage, datahub, alerting, archive, registry, ...).",
    "instrument": "Run an unchanged PySpark script with the emitter active.",
    "connect-server": "Run a shared Spark Connect server that reports every client's runs.",
    "scheduler": "Run the refresh scheduler service.",
    "workflows": "Create and manage materialized-table refresh workflows.",
    "refresh-runner": "Run the Spark runner that executes refresh commands.",
    "ingest": "Take OpenLineage events from Airflow, dbt, openlineage-spark... over HTTP or from a topic.",
    "demo": "Run the main demo end to end.",
    "alerts": "List, show and silence alerts of the alerting service.",
    "audit": "Verify and query the audit archive.",
    "jobs": "Jobs and their runs, from the job registry.",
    "runs": "One run's transitions, inputs, outputs and error, from the job registry.",
    "lineage": "Upstream and downstream of a dataset, from the job registry.",
    "datasets": "A dataset's lifecycle: its changes, whether it is dropped, its earlier names (job registry).",
    "impact": "Everything downstream of a dataset or column: jobs, owners, datasets (job registry).",
    "registry": "Serve the job registry over REST.",
    "db": "Upgrade the registry, alerting and scheduler databases' schemas.",
    "ui": "Web UI: jobs, runs, datasets, the lineage graph and alerts (read-only).",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        try:
            cmd = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                return None  # the part that provides this command is not built yet
            raise click.ClickException(str(exc)) from exc
        except ImportError as exc:
            # A missing optional extra: the error already carries the pip line.
            raise click.ClickException(str(exc)) from exc
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lineagewire")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="YAML config file (default: $LINEAGEWIRE_CONFIG, else ./lineagewire.yaml).")
@click.option("--bootstrap-servers", default=None,
              help=f"Kafka bootstrap servers [{KAFKA_ENV_PREFIX}BOOTSTRAP_SERVERS, "
                   f"YAML {KAFKA_SECTION}.bootstrap_servers; default 127.0.0.1:9092].")
@click.option("--schema-registry-url", default=None, help="Schema registry URL; enables the Confluent wire format "
              f"[{KAFKA_ENV_PREFIX}SCHEMA_REGISTRY_URL, YAML {KAFKA_SECTION}.schema_registry_url].")
@click.option("--connect-timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="How long a command that ends by itself waits for a broker before it exits "
                   f"[{KAFKA_ENV_PREFIX}CONNECT_TIMEOUT, YAML {KAFKA_SECTION}.connect_timeout; default 10].")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.pass_context
def main_group(ctx: click.Context, config_file: str | None, bootstrap_servers: str | None,
               schema_registry_url: str | None, connect_timeout: float | None, verbose: int) -> None:
    """lineagewire: Spark job status and lineage as an event stream on Kafka."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    ctx.obj = {"config_file": config_file, "bootstrap_servers": bootstrap_servers,
               "schema_registry_url": schema_registry_url, "connect_timeout": connect_timeout}


def settings_from(ctx: click.Context, **more: Any):  # noqa: ANN201 - Settings
    """Settings for a command: the group's flags, then environment, then config file."""
    from lineagewire.config import load_settings

    obj = ctx.find_root().obj or {}
    flags = {name: obj.get(name) for name in ("bootstrap_servers", "schema_registry_url", "connect_timeout")}
    return load_settings(obj.get("config_file"), **{**flags, **more})


def settings_of(ctx: click.Context, model: type[M], **flags: Any) -> M:
    """A command's settings of ``model`` (a ``SettingsBase``): ``flags`` (None: not given), then its variables,
    then its section of the YAML file the group's ``--config`` names (``SettingsBase.load``)."""
    loaded: M = model.load((ctx.find_root().obj or {}).get("config_file"), **flags)  # type: ignore[attr-defined]
    return loaded


def setting(model: type[BaseModel], key: str, *decls: str, **kwargs: Any) -> Callable[[F], F]:
    """A click option for the setting ``key`` of ``model``, with no default of its own (``settings_of`` fills it
    in), whose help names the setting's variable and YAML key as the one rule names them, and its default."""
    prefix = str(model.model_config.get("env_prefix") or "")
    section = getattr(model, "config_section", None)
    field = model.model_fields[key]
    default = None if field.is_required() else field.get_default(call_default_factory=True)
    shown = f"; default {default}" if default not in (None, [], {}) else ""
    where = f"[{prefix}{key.upper()}, YAML {f'{section}.' if section else ''}{key}{shown}]"
    kwargs["help"] = f"{kwargs.get('help', '')} {where}".strip()
    if kwargs.get("multiple"):
        kwargs["callback"] = lambda _ctx, _param, value: value or None  # not given: None, as for the others
    return click.option(*decls, key, default=None, **kwargs)


def main(argv: list[str] | None = None) -> None:
    try:
        main_group.main(args=argv, prog_name="lineagewire", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except LineagewireError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
