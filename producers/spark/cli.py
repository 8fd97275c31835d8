"""``lineagewire instrument -- python job.py [args]``: run an unchanged PySpark script with the emitter on."""

from __future__ import annotations

import os
import shutil
from typing import Any

import click

from lineagewire.cli import settings_from

from .config import CONF_PREFIX, EmitterConfig, resolve_config
from .exceptions import EmitterConfigError
from .instrument import child_environment
from .listeners.registry import load_factory

__all__ = ["connect_server", "instrument"]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--listeners", default=None, help="Listener names or dotted paths, comma-separated "
              "(default: $LINEAGEWIRE_EMITTER__LISTENERS, else kafka). '' starts none.")
@click.option("--namespace", default=None, help="Job namespace of the runs (default: spark).")
@click.option("--job-name", default=None, help="Job name of the application run (default: spark.app.name).")
@click.option("--topic", default=None, help="Topic for the events (default: the jobs topic).")
@click.option("--set", "extra", multiple=True, metavar="KEY=VALUE",
              help="Any other emitter setting, e.g. --set flush_timeout=10 (see docs/emitter.md).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def instrument(ctx: click.Context, listeners: str | None, namespace: str | None, job_name: str | None,
               topic: str | None, extra: tuple[str, ...], command: tuple[str, ...]) -> None:
    """Run COMMAND (e.g. `python job.py args` or `spark-submit job.py`) with lineagewire's emitter active.

    The script is not changed: every SparkSession it builds publishes its run's status and each
    action's lineage. The exit code is the script's.
    """
    settings_vars: dict[str, Any] = {"listeners": listeners, "namespace": namespace, "job_name": job_name,
                                            "topic": topic}
    for item in extra:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix(CONF_PREFIX)
        if not sep or key not in EmitterConfig.model_fields:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE with KEY one of "
                                     f"{', '.join(EmitterConfig.model_fields)}", param_hint="--set")
        settings_vars[key] = value
    try:
        # Check now, in the parent, so a typo fails here with the list of names, not silently in the job.
        cfg = resolve_config(**{k: v for k, v in settings_vars.items() if v is not None})
        for name in cfg.listeners:
            load_factory(name)
        settings = settings_from(ctx)
    except EmitterConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    settings_vars["bootstrap_servers"] = settings.bootstrap_servers
    obj = ctx.find_root().obj or {}
    env = child_environment(**settings_vars)
    if obj.get("config_file"):
        env["LINEAGEWIRE_CONFIG"] = os.path.abspath(obj["config_file"])
    if obj.get("schema_registry_url"):
        env["LINEAGEWIRE_KAFKA__SCHEMA_REGISTRY_URL"] = obj["schema_registry_url"]
    program = shutil.which(command[0], path=env.get("PATH")) or command[0]
    try:
        os.execvpe(program, list(command), env)  # noqa: S606 - running the user's command is the point
    except OSError as exc:
        raise click.ClickException(f"cannot run {command[0]!r}: {exc}") from exc


@click.command("connect-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the Connect server binds to.")
@click.option("--port", default=15002, show_default=True, type=click.IntRange(1, 65535),
              help="Port of the Connect server (clients: sc://HOST:PORT).")
@click.option("--master", default=None, help="Spark master of the server (default: spark.master, else local[*]).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark conf of the server, e.g. --conf spark.jars.packages=... or emitter settings "
                   "--conf spark.lineagewire.namespace=prod (docs/emitter.md).")
@click.pass_context
def connect_server(ctx: click.Context, host: str, port: int, master: str | None, confs: tuple[str, ...]) -> None:
    """Run a shared Spark Connect server whose every client session is reported as a run of its own.

    Spark's start-connect-server.sh with lineagewire's emitter: thin clients connect with
    SparkSession.builder.remote("sc://HOST:PORT"). SIGTERM or Ctrl-C stops it.
    """
    conf: dict[str, str] = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE, e.g. spark.executor.memory=2g",
                                     param_hint="--conf")
        conf[key.strip()] = value
    if master:
        conf["spark.master"] = master
    conf.setdefault("spark.master", "local[*]")
    try:
        cfg = resolve_config(spark_conf={k: v for k, v in conf.items() if k.startswith(CONF_PREFIX)})
        for name in cfg.listeners:
            load_factory(name)
        settings = settings_from(ctx)
    except EmitterConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    conf.setdefault(CONF_PREFIX + "bootstrap_servers", settings.bootstrap_servers)
    from .connect_server import serve

    serve(conf, host=host, port=port)
