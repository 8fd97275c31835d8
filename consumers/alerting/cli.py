"""``lineagewire consume alerting`` (the service) and ``lineagewire alerts ...`` (list, show, silence).

The alert database comes from ``--database``, else ``LINEAGEWIRE_ALERTING__DATABASE``, else the rules
file's ``database:`` (``--rules``; without it the ``alerting:`` section of the YAML file), else
``sqlite:///lineagewire-alerting.db`` (``AlertingConfig``): the read commands (``alerts ...``) find it where
the service does.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
from typing import Any

import click

from lineagewire.consumers.cli import run_service, runtime_options, runtime_settings

__all__ = ["alerting", "alerts"]

#: the help of both ``--database`` options: where the database comes from without the flag
DATABASE_HELP = ("SQLAlchemy URL of the alert database [LINEAGEWIRE_ALERTING__DATABASE, else the rules file's "
                 "database, YAML alerting.database; default sqlite:///lineagewire-alerting.db].")


@click.command("alerting")
@click.option("--rules", "rules_path", required=True, type=click.Path(dir_okay=False),
              help="The rules file (YAML: route, channels, rules, inhibit_rules; see docs/alerting.md).")
@click.option("--database", default=None, help=DATABASE_HELP)
@click.option("--refresh-commands/--no-refresh-commands", default=True, show_default=True,
              help="Also consume the scheduler's refresh-commands topic (refresh deadlines) when no --topic is given.")
@click.option("--notify-since", "notify_since", default=None, metavar="TIME",
              help="For a new consumer group: alerts that began before TIME (ISO 8601, UTC unless it says; or a "
                   "duration ago such as 2h) are history, notified only if still open once the service has read "
                   "to the end of the topic (default: the service's first start). Ignored by an existing group.")
@runtime_options
@click.pass_context
def alerting(ctx: click.Context, rules_path: str, database: str | None, refresh_commands: bool,
             notify_since: str | None, **runtime: Any) -> None:
    """Turn job status, lineage and refresh outcomes into alerts (Slack, PagerDuty, webhook, email, Alertmanager)."""
    from lineagewire.cli import settings_from

    from .catchup import CatchUp
    from .config import load_config
    from .service import AlertingHandler

    since = _parse_since(notify_since) if notify_since is not None else None
    config = load_config(rules_path, database=database)
    settings = settings_from(ctx)
    options = runtime_settings(ctx, **runtime)
    topics = options.topics or ([settings.topics.jobs, settings.topics.refresh_commands] if refresh_commands
                                else [settings.topics.jobs])
    runtime["topics"] = tuple(topics)
    # the runtime's own default group name: the catch-up asks Kafka about the group the service will join
    group = options.group_id or f"lineagewire-{AlertingHandler.name}"
    handler = AlertingHandler(config, database=config.database,
                              catch_up=CatchUp(settings, group, topics, notify_since=since))
    run_service(ctx, handler, **runtime)


def _parse_since(text: str) -> dt.datetime:
    from .model import parse_duration

    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        try:
            return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=parse_duration(text, "--notify-since"))
        except ValueError:
            raise click.BadParameter(f"{text!r}: expected an ISO 8601 time such as 2026-11-20T08:00 or a "
                                     "duration ago such as 2h", param_hint="--notify-since") from None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when


def _store(ctx: click.Context, *, create: bool = False, read_only: bool = True) -> Any:
    """The alert database of ``alerts --database`` / ``--rules``. Only ``silence`` may create it (a silence can
    precede the service); the others need it to exist, and the read commands open it read-only."""
    from .store import DEFAULT_URL, AlertStore

    url = (ctx.find_object(dict) or {})["alerts_config"].database
    return AlertStore(url or DEFAULT_URL, create=create, read_only=read_only and not create)


def _parse_matchers(matches: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in matches:
        name, sep, value = m.partition("=")
        neg = name.endswith("!")
        name = name.rstrip("!").strip()
        if not sep or not name or not value:
            raise click.BadParameter(f"{m!r}: expected LABEL=GLOB or LABEL!=GLOB, e.g. job=nightly_*",
                                     param_hint="--match")
        out[name] = ("!" if neg else "") + value.strip()
    return out


@click.group("alerts")
@click.option("--database", default=None, help=DATABASE_HELP)
@click.option("--rules", "rules_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Take the database from this rules file.")
@click.pass_context
def alerts(ctx: click.Context, database: str | None, rules_path: str | None) -> None:
    """List, show and silence the alerting service's alerts."""
    root = ctx.find_root()
    if root.obj is None:
        root.obj = {}
    ctx.ensure_object(dict)
    from lineagewire.cli import settings_of

    from .config import AlertingConfig, load_config

    # Validated whole (channels and their secrets too), so a broken rules file is reported by every command.
    ctx.obj["alerts_config"] = (load_config(rules_path, database=database) if rules_path is not None
                                else settings_of(ctx, AlertingConfig, database=database))


@alerts.command("list")
@click.option("--all", "include_resolved", is_flag=True, help="Also resolved alerts.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
def list_alerts(ctx: click.Context, include_resolved: bool, as_json: bool) -> None:
    """Open alerts (fingerprint, state, since, alertname, job, summary)."""
    store = _store(ctx)
    now = dt.datetime.now(dt.UTC)
    silences = store.silences(now)
    for a in store.list_alerts(include_resolved=include_resolved):
        muted = [s.id[:8] for s in silences if s.mutes(a.labels, now)]
        state = a.state if not muted or a.state != "firing" else f"silenced({','.join(muted)})"
        if as_json:
            click.echo(json.dumps({"fingerprint": a.fingerprint, "state": state, "starts_at": a.starts_at.isoformat(),
                                   "labels": a.labels, "annotations": a.annotations}, sort_keys=True))
        else:
            click.echo(f"{a.fingerprint}  {state:<10} {a.starts_at:%Y-%m-%d %H:%M:%S}  {a.labels.get('alertname')}  "
                       f"{a.labels.get('namespace')}/{a.labels.get('job')}  {a.annotations.get('summary', '')[:100]}")


@alerts.command("show")
@click.argument("fingerprint")
@click.pass_context
def show(ctx: click.Context, fingerprint: str) -> None:
    """One alert (by fingerprint or a unique prefix of it): labels, annotations, times, channels."""
    found = _store(ctx).find_alert(fingerprint)
    if len(found) != 1:
        raise click.BadParameter(f"{fingerprint!r} matches {len(found)} alerts; expected exactly one "
                                 "(see `lineagewire alerts list --all`)", param_hint="FINGERPRINT")
    a = found[0]
    click.echo(json.dumps({"fingerprint": a.fingerprint, "rule": a.rule, "state": a.state,
                           "starts_at": a.starts_at.isoformat(),
                           "ends_at": a.ends_at.isoformat() if a.ends_at else None,
                           "notified": a.notified, "channels": list(a.channels), "labels": a.labels,
                           "annotations": a.annotations}, indent=2, sort_keys=True))


@alerts.command("silence")
@click.option("--match", "matches", multiple=True, required=True, metavar="LABEL=GLOB",
              help="Mute alerts whose label matches (repeatable, all must match; LABEL!=GLOB negates).")
@click.option("--for", "duration", required=True, help="How long, e.g. 30m, 2h, 1d.")
@click.option("--comment", required=True, help="Why (shown in `alerts silences`).")
@click.option("--author", default=None, help="Who (default: the current user).")
@click.pass_context
def silence(ctx: click.Context, matches: tuple[str, ...], duration: str, comment: str, author: str | None) -> None:
    """Silence matching alerts for a while; prints the silence id."""
    from .model import parse_duration

    matchers = _parse_matchers(matches)
    try:
        seconds = parse_duration(duration, "--for")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--for") from exc
    if seconds <= 0:
        raise click.BadParameter(f"--for={duration!r}: expected a duration > 0", param_hint="--for")
    now = dt.datetime.now(dt.UTC)
    s = _store(ctx, create=True).add_silence(matchers, now + dt.timedelta(seconds=seconds), comment=comment,
                                created_by=author or getpass.getuser(), starts_at=now)
    click.echo(s.id)


@alerts.command("silences")
@click.option("--all", "include_expired", is_flag=True, help="Also expired silences.")
@click.pass_context
def silences(ctx: click.Context, include_expired: bool) -> None:
    """Active silences (id, until, matchers, author, comment)."""
    now = dt.datetime.now(dt.UTC)
    for s in _store(ctx).silences(None if include_expired else now):
        m = " ".join(f"{k}{'!=' + v[1:] if v.startswith('!') else '=' + v}" for k, v in s.matchers.items())
        click.echo(f"{s.id}  until {s.ends_at:%Y-%m-%d %H:%M:%S}  {m}  {s.created_by}: {s.comment}")


@alerts.command("expire")
@click.argument("silence_id")
@click.pass_context
def expire(ctx: click.Context, silence_id: str) -> None:
    """End a silence now (by id or a unique prefix)."""
    ids = _store(ctx, read_only=False).expire_silence(silence_id, dt.datetime.now(dt.UTC))
    if len(ids) != 1:
        raise click.BadParameter(f"{silence_id!r} matches {len(ids)} active silences; expected exactly one",
                                 param_hint="SILENCE_ID")
    click.echo(f"expired {ids[0]}")


@alerts.command("outbox")
@click.option("--state", type=click.Choice(["pending", "delivered", "failed"]), default=None)
@click.pass_context
def outbox(ctx: click.Context, state: str | None) -> None:
    """Notifications in the outbox: channel, state, attempts, last error."""
    for r in _store(ctx).outbox(state):
        click.echo(f"{r.id}  {r.channel}  {r.state}  attempts={r.attempts}  {r.created_at:%Y-%m-%d %H:%M:%S}  "
                   f"{(r.last_error or '')[:120]}")
