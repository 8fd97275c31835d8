"""``lineagewire scheduler`` (run the service) and ``lineagewire workflows`` (talk to it over HTTP)."""

from __future__ import annotations

import json
from typing import Any

import click
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from lineagewire.cli import setting, settings_from, settings_of
from lineagewire.config import SettingsBase

from .exceptions import SchedulerError

__all__ = ["SchedulerClientSettings", "scheduler", "workflows"]

DEFAULT_URL = "http://127.0.0.1:8765"


class SchedulerClientSettings(SettingsBase):
    """Where ``workflows`` and ``ui`` find the scheduler service (``scheduler:``, beside the service's own keys)."""

    # "ignore": the section's other keys are the service's (ServiceConfig), read and checked there
    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_SCHEDULER__", extra="ignore")
    config_section = "scheduler"
    title = "scheduler client settings"

    url: str | None = Field(None, description=f"the scheduler service's URL, for `workflows` (default {DEFAULT_URL}) "
                            "and `ui` (default: none)")
    token: str | None = Field(None, description="bearer token for changes, as the service reads it")


@click.group()
def scheduler() -> None:
    """Run the refresh scheduler service, or check a tables file."""


@scheduler.command("serve")
@click.option("--tables", "tables_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="YAML file of materialized tables (env LINEAGEWIRE_SCHEDULER__TABLES).")
@click.option("--db-url", default=None, help="SQLAlchemy URL (default sqlite:///lineagewire-scheduler.db).")
@click.option("--host", default=None, help="Bind address (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default 8765).")
@click.option("--token", default=None, help="Bearer token for changes (env LINEAGEWIRE_SCHEDULER__TOKEN).")
@click.option("--misfire-grace", type=float, default=None, help="Seconds late before a fire counts as missed.")
@click.option("--max-attempts", type=int, default=None, help="Attempts per refresh, retries included.")
@click.option("--retry-backoff", type=float, default=None, help="Seconds before the first retry (doubles).")
@click.option("--abandon-after", type=float, default=None, help="Seconds without status before ABANDONED.")
@click.option("--lead", type=float, default=None, help="Claim fires this many seconds ahead (default 2).")
@click.option("--metrics-port", type=int, default=None,
              help="Serve the status tracker's /metrics and /healthz on 127.0.0.1:PORT (0 = any free port).")
@click.pass_context
def serve(ctx: click.Context, tables_file: str | None, db_url: str | None, host: str | None, port: int | None,
          token: str | None, misfire_grace: float | None, max_attempts: int | None, retry_backoff: float | None,
          abandon_after: float | None, lead: float | None, metrics_port: int | None) -> None:
    """Serve the REST API (OpenAPI docs at /docs), fire workflows and track refresh status."""
    from .service import SchedulerService
    from .service import serve as run
    from .settings import ServiceConfig

    overrides = {"tables": tables_file, "db_url": db_url, "host": host, "port": port, "token": token,
                 "misfire_grace": misfire_grace, "max_attempts": max_attempts, "retry_backoff": retry_backoff,
                 "abandon_after": abandon_after, "lead": lead,
                 "status_metrics_port": metrics_port}
    config = ServiceConfig.load((ctx.find_root().obj or {}).get("config_file"), **overrides)
    service = SchedulerService(config, settings_from(ctx))
    click.echo(f"scheduler on http://{config.host}:{config.port} (docs at /docs), {len(service.catalog)} table(s), "
               f"db {config.safe_db_url()}", err=True)
    run(service, host=config.host, port=config.port)


@scheduler.command("validate")
@click.argument("tables_file", type=click.Path(dir_okay=False), required=False)
@click.pass_context
def validate(ctx: click.Context, tables_file: str | None) -> None:
    """Check a materialized-tables file (default: the service's, LINEAGEWIRE_SCHEDULER__TABLES or the config
    file's scheduler.tables) and list what it declares."""
    from .settings import ServiceConfig
    from .tables import load_tables

    if tables_file is None:
        tables_file = ServiceConfig.load((ctx.find_root().obj or {}).get("config_file")).tables
        if tables_file is None:
            raise click.UsageError("no tables file: expected TABLES_FILE, LINEAGEWIRE_SCHEDULER__TABLES or "
                                   "scheduler.tables in the config file")

    for t in load_tables(tables_file):
        parts = ", ".join(f"{k}={v}" for k, v in t.partition_fields.items()) or "-"
        up = f" trigger=upstream debounce={t.debounce:g}s" if t.upstream else ""
        click.echo(f"{t.identifier}: cron={t.cron or '-'}{up} tz={t.time_zone} partitions: {parts}")


# -- workflows ---------------------------------------------------------------------------------------------------------

def _client(ctx: click.Context) -> Any:
    from .client import SchedulerClient

    obj = ctx.obj
    return SchedulerClient(obj["url"], obj["token"])


def _out(ctx: click.Context, data: Any, text: str | None = None) -> None:
    if ctx.obj["json"] or text is None:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(text)


def _call(ctx: click.Context, fn: str, *args: Any, **kwargs: Any) -> Any:
    client = _client(ctx)
    try:
        return getattr(client, fn)(*args, **kwargs)
    except SchedulerError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        client.close()


def _wf_line(w: dict[str, Any]) -> str:
    what = w["cron"] or "once"
    return (f"{w['id']}  {w['status']:<9} {w['table']:<28} {what:<18} tz={w['time_zone']:<14} "
            f"next={w['next_fire'] or '-'} last={w['last_fire'] or '-'}")


def _refresh_line(r: dict[str, Any]) -> str:
    dur = f"{r['duration_ms']}ms" if r.get("duration_ms") is not None else "-"
    err = f"  error: {r['error']}" if r.get("error") else ""
    retry = f" retry at {r['next_retry_at']}" if r.get("next_retry_at") else ""
    run = r.get("trigger_run")
    by = f" by {run['job_name']} run {run['run_id']}" if run else ""
    held = "".join(f"\n      held: {_reason(x)}" for x in r.get("hold_reasons") or ())
    return (f"  {r['nominal_time']}  {r['status']:<9} attempt {r['attempt']} (retries {r['retry_count']}) "
            f"{dur:>8}  {r['trigger']:<9} {r['command_id']}{retry}{err}{by}{held}")


def _reason(x: dict[str, Any]) -> str:
    run = x.get("upstream_run")
    return (f"{x['condition']} {x['input']['name']}" + (f" (run {run['run_id']} of {run['job_name']})" if run else "")
            + (f": {x['detail']}" if x.get("detail") else ""))


def _input_line(i: dict[str, Any]) -> str:
    name = i.get("table") or i["dataset"]["name"]
    return (f"    {name:<32} {i.get('health', '?'):<13} last write {i.get('last_write_at') or '-'}  "
            f"{i.get('detail', '')}")


@click.group()
@setting(SchedulerClientSettings, "url", "--url", help=f"Scheduler service URL (default {DEFAULT_URL}).")
@setting(SchedulerClientSettings, "token", "--token", help="Bearer token for changes.")
@click.option("--json", "as_json", is_flag=True, help="Print the service's JSON answer.")
@click.pass_context
def workflows(ctx: click.Context, url: str | None, token: str | None, as_json: bool) -> None:
    """Create and manage materialized-table refresh workflows (talks to `lineagewire scheduler serve`)."""
    cfg = settings_of(ctx, SchedulerClientSettings, url=url, token=token)
    ctx.obj = {**(ctx.obj or {}), "url": cfg.url or DEFAULT_URL, "token": cfg.token, "json": as_json}


@workflows.command("create")
@click.argument("table")
@click.option("--cron", default=None, help="5 fields, or 6 with seconds first; default: the table's cron/freshness.")
@click.option("--name", default=None)
@click.option("--time-zone", default=None, help="IANA time zone; default: the table's.")
@click.option("--misfire-policy", type=click.Choice(["skip", "fire_once", "catch_up"]), default=None)
@click.option("--catchup-cap", type=int, default=None)
@click.option("--start", default=None, help="First nominal time at or after this ISO time (default now).")
@click.pass_context
def create(ctx: click.Context, table: str, cron: str | None, name: str | None, time_zone: str | None,
           misfire_policy: str | None, catchup_cap: int | None, start: str | None) -> None:
    """Create a periodic refresh workflow for TABLE."""
    w = _call(ctx, "create", table, cron=cron, name=name, time_zone=time_zone, misfire_policy=misfire_policy,
              catchup_cap=catchup_cap, start=start)
    _out(ctx, w, _wf_line(w))


@workflows.command("list")
@click.option("--table", default=None)
@click.pass_context
def list_(ctx: click.Context, table: str | None) -> None:
    """List workflows."""
    ws = _call(ctx, "list_workflows", table)
    _out(ctx, ws, "\n".join(_wf_line(w) for w in ws) or "no workflows")


@workflows.command("show")
@click.argument("workflow_id")
@click.option("--limit", type=int, default=20, show_default=True, help="Refreshes to show.")
@click.pass_context
def show(ctx: click.Context, workflow_id: str, limit: int) -> None:
    """A workflow, its recent refreshes and its table's health."""
    w = _call(ctx, "show", workflow_id, limit)
    ts = w["table_status"]
    inputs = _call(ctx, "table_inputs", w["table"])
    w["inputs"] = inputs  # the --json answer has them too
    lines = [_wf_line(w), f"  name={w['name']} kind={w['kind']} misfire={w['misfire_policy']} "
             f"cap={w['catchup_cap']} created={w['created']}",
             f"  table {ts['table']}: {'healthy' if ts['healthy'] else 'UNHEALTHY'} ({ts['reason']}); "
             f"last success {ts['last_success'] or '-'}",
             f"  inputs (hold on {', '.join(inputs['hold_on']) or 'nothing'}):"]
    lines += [_input_line(i) for i in inputs["inputs"]] or ["    (none known)"]
    lines += [f"  would hold now: {_reason(x)}" for x in inputs["hold_reasons"]]
    lines += ["  refreshes:"] + ([_refresh_line(r) for r in w["refreshes"]] or ["  (none yet)"])
    _out(ctx, w, "\n".join(lines))


@workflows.command("suspend")
@click.argument("workflow_id")
@click.pass_context
def suspend(ctx: click.Context, workflow_id: str) -> None:
    """Pause a workflow; nothing fires until it is resumed."""
    w = _call(ctx, "suspend", workflow_id)
    _out(ctx, w, _wf_line(w))


@workflows.command("resume")
@click.argument("workflow_id")
@click.option("--catch-up", is_flag=True, help="Also fire the paused past, through the misfire policy.")
@click.pass_context
def resume(ctx: click.Context, workflow_id: str, catch_up: bool) -> None:
    """Resume a paused workflow (nothing fires for the paused past unless --catch-up)."""
    w = _call(ctx, "resume", workflow_id, catch_up)
    _out(ctx, w, _wf_line(w))


@workflows.command("set-cron")
@click.argument("workflow_id")
@click.argument("cron")
@click.option("--time-zone", default=None)
@click.pass_context
def set_cron(ctx: click.Context, workflow_id: str, cron: str, time_zone: str | None) -> None:
    """Change a workflow's cron (and time zone)."""
    w = _call(ctx, "set_cron", workflow_id, cron, time_zone)
    _out(ctx, w, _wf_line(w))


@workflows.command("delete")
@click.argument("workflow_id")
@click.pass_context
def delete(ctx: click.Context, workflow_id: str) -> None:
    """Delete a workflow and its refresh history."""
    _call(ctx, "delete", workflow_id)
    _out(ctx, {"deleted": workflow_id}, f"deleted {workflow_id}")


@workflows.command("refresh")
@click.argument("table")
@click.option("--nominal-time", default=None, help="ISO time the refresh is for (default now).")
@click.option("--force", is_flag=True, help="Override holds: publish TABLE's held refreshes now, or a refresh that "
              "is never held.")
@click.pass_context
def refresh(ctx: click.Context, table: str, nominal_time: str | None, force: bool) -> None:
    """Refresh TABLE once now (a one-time workflow, trigger MANUAL)."""
    if not force:
        w = _call(ctx, "refresh", table, nominal_time)
        _out(ctx, w, _wf_line(w))
        return
    answer = _call(ctx, "refresh", table, nominal_time, True)
    lines = [f"released {r['command_id']} ({r['status']})" for r in answer["released"]]
    if answer["workflow"]:
        lines.append(_wf_line(answer["workflow"]))
    _out(ctx, answer, "\n".join(lines))


@workflows.command("cancel")
@click.argument("command_id")
@click.option("--reason", default="")
@click.pass_context
def cancel(ctx: click.Context, command_id: str, reason: str) -> None:
    """Cancel a queued or running refresh (publishes CancelRefresh)."""
    r = _call(ctx, "cancel", command_id, reason)
    _out(ctx, r, _refresh_line(r))


@workflows.command("backfill")
@click.argument("workflow_id")
@click.option("--start", required=True, help="ISO time, e.g. 2026-01-01T00:00:00Z")
@click.option("--end", required=True, help="ISO time (inclusive)")
@click.pass_context
def backfill(ctx: click.Context, workflow_id: str, start: str, end: str) -> None:
    """Fire every nominal time in [START, END] that was never fired."""
    rs = _call(ctx, "backfill", workflow_id, start, end)
    _out(ctx, rs, "\n".join(_refresh_line(r) for r in rs) or "nothing to backfill (all fired already)")
