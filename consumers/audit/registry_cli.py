"""Commands of the job registry: ``consume registry``, ``jobs``, ``runs``, ``datasets``, ``lineage``,
``registry serve``.

Every command takes ``--db-url`` (``RegistrySettings``: else ``LINEAGEWIRE_REGISTRY__DB_URL``, else
``registry.db_url`` in the YAML file, else the local SQLite file ``lineagewire-registry.db``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
from collections.abc import Callable
from typing import Any

import click
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from lineagewire.cli import setting, settings_of
from lineagewire.config import SettingsBase
from lineagewire.consumers.cli import run_service, runtime_options
from lineagewire.exceptions import ConfigError
from lineagewire.kafka.reader import parse_position

log = logging.getLogger(__name__)

__all__ = ["RegistrySettings", "datasets", "db_url_option", "jobs", "lineage", "registry", "registry_group", "runs"]


class RegistrySettings(SettingsBase):
    """The job registry's settings (``registry:``), read by its service and by every command that reads it."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_REGISTRY__", extra="forbid")
    config_section = "registry"
    title = "registry settings"

    db_url: str = Field("sqlite:///lineagewire-registry.db", description="SQLAlchemy URL of the registry "
                        "(`consume registry`, `jobs`, `runs`, `lineage`, `registry serve`, `ui`)")
    token: str | None = Field(None, description="bearer token for changes through `registry serve` (default: a "
                              "generated one, logged once)")


def _db_url(ctx: click.Context, _param: click.Parameter, value: str | None) -> str:
    return settings_of(ctx, RegistrySettings, db_url=value).db_url


db_url_option = setting(RegistrySettings, "db_url", "--db-url", callback=_db_url,
                        help="SQLAlchemy URL of the registry.")
format_option = click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
                             show_default=True)


def _read(db_url: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(conn, ...)`` on a read-only connection: a read command never creates the database or its tables."""
    from .registry_store import open_read_only

    engine = open_read_only(db_url)
    try:
        with engine.connect() as conn:
            return fn(conn, *args, **kwargs)
    finally:
        engine.dispose()


def _producer_text(producer: dict[str, Any]) -> str:
    """``dbt (https://github.com/OpenLineage/...)`` for an OpenLineage producer, ``lineagewire 0.1.0`` for ours."""
    if producer["name"] != producer["label"]:
        return f"{producer['label']} ({producer['name']})"
    return f"{producer['label']} {producer['version'] or ''}".rstrip()


def _labelled(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs with their producer as its short name (``openlineage-spark``), for a table."""
    return [{**r, "producer": r["producer"]["label"] if r["producer"] else None} for r in runs]


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    cells = [["" if r.get(c) is None else str(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(x[i]) for x in cells)]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for x in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(x, widths, strict=True)).rstrip())


@click.command("registry")
@db_url_option
@runtime_options
@click.pass_context
def registry(ctx: click.Context, db_url: str, **runtime: Any) -> None:
    """Keep every job, run, spec, transition, dataset and lineage edge in a SQL database (docs/audit.md)."""
    from .registry import RegistryHandler
    from .registry_store import engine_for

    engine_for(db_url).dispose()  # a bad URL fails here, in one line, before the consumer starts
    run_service(ctx, RegistryHandler(db_url), **runtime)


@click.group("jobs")
def jobs() -> None:
    """Jobs and their runs, from the job registry."""


@jobs.command("list")
@db_url_option
@format_option
def jobs_list(db_url: str, fmt: str) -> None:
    """Every job with its number of runs and last status."""
    from .registry_query import list_jobs

    rows = _read(db_url, list_jobs)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
    else:
        _table(rows, ["job", "runs", "last_status", "last_run", "last_seen", "last_producer"])


@jobs.command("show")
@click.argument("job")
@db_url_option
@format_option
def jobs_show(job: str, db_url: str, fmt: str) -> None:
    """JOB's runs (name or namespace/name): times, duration, outcome, error."""
    from .registry_query import job_runs

    info = _read(db_url, job_runs, job)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(info["job"])
    _table(_labelled(info["runs"]), ["run_id", "status", "created_at", "ended_at", "duration_ms", "producer",
                                     "error_class"])


@jobs.command("history")
@click.argument("job")
@db_url_option
@format_option
def jobs_history(job: str, db_url: str, fmt: str) -> None:
    """JOB's runs, and how its spec changed between runs (a unified diff)."""
    from .registry_query import job_history

    info = _read(db_url, job_history, job)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(info["job"])
    for run in info["runs"]:
        click.echo(f"{run['created_at'] or '-'}  {run['run_id']}  {run['status'] or '-'}  "
                   f"{run['duration_ms'] if run['duration_ms'] is not None else '-'} ms  spec {run['spec_id']}")
        if run["spec_diff"]:
            for line in run["spec_diff"].splitlines():
                click.echo(f"    {line}")


@click.group("runs")
def runs() -> None:
    """One run's transitions, inputs, outputs and error, from the job registry."""


@runs.command("children")
@click.argument("run_id", metavar="RUN")
@db_url_option
@format_option
def runs_children(run_id: str, db_url: str, fmt: str) -> None:
    """The Spark runs started under RUN: an Airflow task's or DAG run's id (its parent or root), or a run's."""
    from .registry_query import child_runs

    info = _read(db_url, child_runs, run_id)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    _table(_labelled(info["runs"]), ["job", "run_id", "status", "created_at", "duration_ms", "producer",
                                     "parent_job", "root_parent_job"])


@runs.command("show")
@click.argument("run_id", metavar="RUN")
@db_url_option
@format_option
def runs_show(run_id: str, db_url: str, fmt: str) -> None:
    """RUN's status transitions with times, inputs, outputs and error."""
    from .registry_query import run_detail

    info = _read(db_url, run_detail, run_id)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"run {info['run_id']} of {info['job']}: {info['status']} "
               f"({info['created_at']} .. {info['ended_at'] or 'not ended'}, {info['duration_ms']} ms)")
    if info["producer"]:
        click.echo(f"producer: {_producer_text(info['producer'])}")
    if info["error_class"]:
        click.echo(f"error: {info['error_class']}: {info['error_message']}")
    click.echo("transitions:")
    for t in info["transitions"]:
        click.echo(f"  {t['time']}  {t['old_status'] or '-'} -> {t['new_status']} ({t['lifecycle_state']})")
    for label in ("inputs", "outputs"):
        click.echo(f"{label}:")
        for d in info[label]:
            click.echo(f"  {d['namespace']} {d['name']}")


@runs.command("diff")
@click.argument("run_id", metavar="RUN")
@click.option("--against", default=None, metavar="RUN",
              help="Compare with this run of the same job instead of its previous successful run.")
@db_url_option
@format_option
def runs_diff(run_id: str, against: str | None, db_url: str, fmt: str) -> None:
    """What changed in RUN since its job's previous successful run: inputs, outputs, schemas, column lineage,
    spec, lifecycle changes and duration (docs/audit.md)."""
    from .registry_query import run_diff
    from .run_diff import render_text

    info = _read(db_url, run_diff, run_id, against)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    for line in render_text(info):
        click.echo(line)


def _lineage_command(direction: str) -> click.Command:
    @click.command(direction)
    @click.argument("dataset")
    @click.option("--namespace", default=None, help="The OpenLineage namespace; DATASET is then its name.")
    @click.option("--column", default=None, help="Follow this column of DATASET (column lineage).")
    @click.option("--depth", default=None, metavar="N|all",
                  help="At most N hops (default: 3), or all for no limit.")
    @click.option("--since", default=None, metavar="TIME", help="Only edges seen at or after this ISO-8601 time.")
    @click.option("--format", "fmt", type=click.Choice(["tree", "json"]), default="tree", show_default=True)
    @db_url_option
    def command(dataset: str, namespace: str | None, column: str | None, depth: str | None, since: str | None,
                fmt: str, db_url: str) -> None:
        from .registry_query import DEFAULT_DEPTH, render_tree
        from .registry_query import lineage as run_lineage

        hops: int | None = DEFAULT_DEPTH
        if depth == "all":
            hops = None
        elif depth is not None:
            if not depth.isdigit() or int(depth) < 1:
                raise click.BadParameter(f"{depth!r}; expected a number of hops (1 or more) or all",
                                         param_hint="--depth")
            hops = int(depth)

        when = parse_position(since) if since else None
        if since and not isinstance(when, dt.datetime):
            raise click.BadParameter(f"{since!r}; expected an ISO-8601 time such as 2026-01-31T00:00:00Z",
                                     param_hint="--since")
        result = _read(db_url, run_lineage, dataset, direction=direction, namespace=namespace, column=column,
                       depth=hops, since=when)
        if fmt == "json":
            click.echo(json.dumps(result, indent=2))
        else:
            for line in render_tree(result):
                click.echo(line)

    command.help = (f"Datasets {'fed by' if direction == 'downstream' else 'feeding'} DATASET, across jobs "
                    "(a path, a URI, a table name, or --namespace NS NAME).")
    return command


@click.group("lineage")
def lineage() -> None:
    """Upstream and downstream of a dataset, from the job registry."""


lineage.add_command(_lineage_command("upstream"))
lineage.add_command(_lineage_command("downstream"))


@click.group("datasets")
def datasets() -> None:
    """A dataset's lifecycle, from the job registry."""


@datasets.command("show")
@click.argument("dataset")
@click.option("--namespace", default=None, help="The OpenLineage namespace; DATASET is then its name.")
@db_url_option
@format_option
def datasets_show(dataset: str, namespace: str | None, db_url: str, fmt: str) -> None:
    """DATASET's lifecycle changes (CREATE, ALTER, RENAME, TRUNCATE, DROP, OVERWRITE), whether it is dropped or
    renamed, and its previous names (a path, a URI, a table name, or --namespace NS NAME)."""
    from .registry_query import dataset_detail

    info = _read(db_url, dataset_detail, dataset, namespace)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"{info['namespace']} {info['name']}: {_dataset_state(info)}")
    for p in info["previous_names"]:
        click.echo(f"previously named {p['namespace']} {p['name']} (renamed {p['renamed_at']} by run "
                   f"{p['renamed_by']})")
    click.echo("changes:")
    if not info["changes"]:
        click.echo("  none known")
    for c in info["changes"]:
        was = f" from {c['previous']['namespace']} {c['previous']['name']}" if c["previous"] else ""
        under = f" as {c['dataset']['name']}" if c["dataset"]["id"] != info["id"] else ""
        click.echo(f"  {c['at']}  {c['change']}{was}{under}  run {c['run_id']}"
                   f"{' action ' + c['action_id'] if c['action_id'] else ''}  {c['job'] or '-'}")


def _dataset_state(info: dict[str, Any]) -> str:
    if info["state"] == "dropped":
        by = info["dropped_by"]
        return f"dropped by run {by['run_id']} of {by['job'] or '-'} at {by['at']}"
    if info["state"] == "renamed":
        to = info["renamed_to"]
        return f"renamed to {to['namespace']} {to['name']} by run {to['run_id']} at {to['at']}"
    return info["state"] or "no lifecycle change known"


@click.group("registry")
def registry_group() -> None:
    """Serve the job registry over REST."""


@registry_group.command("serve")
@db_url_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True)
@setting(RegistrySettings, "token", "--token", help="Bearer token for changes.")
@click.pass_context
def serve(ctx: click.Context, db_url: str, host: str, port: int, token: str | None) -> None:
    """REST API over the registry (OpenAPI docs at /docs); reads are open, changes need the token."""
    import uvicorn

    from .registry_api import create_app
    from .registry_store import RegistryStore

    token = settings_of(ctx, RegistrySettings, token=token).token
    if token is not None and len(token) < 16:
        raise ConfigError(f"--token is {len(token)} characters; expected at least 16")
    if token is None:
        token = secrets.token_urlsafe(24)
        click.echo(f"no LINEAGEWIRE_REGISTRY__TOKEN set; changes need this generated token: {token}", err=True)
    app = create_app(RegistryStore(db_url), token)
    uvicorn.run(app, host=host, port=port, log_level="warning")
