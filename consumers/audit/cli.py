"""Commands of the audit tools: ``consume archive``, ``audit verify|query``; the registry's from ``registry_cli``.

Registered lazily by ``lineagewire.cli.COMMANDS`` (``audit``) and
``lineagewire.consumers.cli.SERVICES`` (``archive``).
"""

from __future__ import annotations

import logging
from typing import Any

import click
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from lineagewire.cli import setting, settings_from, settings_of
from lineagewire.config import SettingsBase
from lineagewire.consumers.cli import run_service, runtime_options, runtime_settings

# The registry's commands live in registry_cli; lineagewire.cli.COMMANDS and consumers.cli.SERVICES name them here.
from .registry_cli import jobs, lineage, registry, registry_group, runs

log = logging.getLogger(__name__)

__all__ = ["AuditSettings", "archive", "archive_location", "audit", "jobs", "lineage", "registry", "registry_group",
           "runs"]


class AuditSettings(SettingsBase):
    """The audit archive's settings (``audit:``), read by ``consume archive`` and by ``audit`` and ``replay``."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_AUDIT__", extra="forbid")
    config_section = "audit"
    title = "audit settings"

    archive: str | None = Field(None, description="the archive's folder or fsspec URL (s3://, gs://, abfs://): "
                                "`consume archive --to`, `audit verify`, `audit query --archive`, `replay --archive`")
    roll_mb: float = Field(64.0, ge=0.001, description="close a file when its records reach this many MiB")
    roll_records: int = Field(1_000_000, ge=1, description="close a file at this many records")
    roll_seconds: float = Field(600.0, ge=0.001, description="close a file open this long (a file also closes "
                                "when its UTC hour is over)")


def archive_location(ctx: click.Context, location: str | None, param: str) -> str:
    """The archive: ``location`` (the parameter named ``param``), else ``AuditSettings.archive``; click's missing
    parameter error, naming the variable too, without."""
    found = settings_of(ctx, AuditSettings, archive=location).archive
    if found is None:
        raise click.MissingParameter(ctx=ctx, param=next(p for p in ctx.command.params if p.name == param),
                                     message="Expected it, LINEAGEWIRE_AUDIT__ARCHIVE or YAML audit.archive.")
    return found


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint=option)
        out[key.strip()] = value.strip()
    return out


def _storage(location: str, storage_options: tuple[str, ...] = ()) -> Any:
    from .storage import Storage

    return Storage(location, _pairs(storage_options, "--storage-option"))


storage_option = click.option(
    "--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
    help="An fsspec option for a remote archive (repeatable), e.g. endpoint_url=http://127.0.0.1:9000.")


@click.command("archive")
@setting(AuditSettings, "archive", "--to", metavar="DIR_OR_URL", help="Archive folder or fsspec URL.")
@setting(AuditSettings, "roll_mb", "--roll-mb", type=click.FloatRange(min=0.001),
         help="Close a file when its records reach this many MiB.")
@setting(AuditSettings, "roll_records", "--roll-records", type=click.IntRange(min=1),
         help="Close a file at this many records.")
@setting(AuditSettings, "roll_seconds", "--roll-seconds", type=click.FloatRange(min=0.001),
         help="Close a file open this long (a file also closes when its UTC hour is over).")
@storage_option
@runtime_options
@click.pass_context
def archive(ctx: click.Context, archive: str | None, roll_mb: float | None, roll_records: int | None,
            roll_seconds: float | None, storage_options: tuple[str, ...], **runtime: Any) -> None:
    """Archive every record of the jobs and refresh-command topics to hash-chained Parquet (docs/audit.md)."""
    from .archive import ArchiveHandler

    cfg = settings_of(ctx, AuditSettings, archive=archive, roll_mb=roll_mb, roll_records=roll_records,
                      roll_seconds=roll_seconds)
    location = archive_location(ctx, cfg.archive, "archive")
    settings = settings_from(ctx)
    # The default only when no flag, variable or YAML key names topics: the raw flag is None for the last two.
    if not runtime_settings(ctx, **runtime).topics:
        runtime["topics"] = (settings.topics.jobs, settings.topics.refresh_commands)
    # Two records with one event id are two records at two offsets: the archive keeps both.
    runtime["dedup_window"] = 0
    ArchiveHandler.prepare_process()
    handler = ArchiveHandler(_storage(location, storage_options), roll_bytes=int(cfg.roll_mb * (1 << 20)),
                             roll_records=cfg.roll_records, roll_seconds=cfg.roll_seconds)
    run_service(ctx, handler, **runtime)


@click.group("audit")
def audit() -> None:
    """Verify and query the audit archive."""


@audit.command("verify")
@click.argument("location", metavar="DIR_OR_URL", required=False)
@storage_option
@click.pass_context
def verify(ctx: click.Context, location: str | None, storage_options: tuple[str, ...]) -> None:
    """Re-read every archived file and check it against the hash-chained manifests; exit 1 on any finding, 2 when
    DIR_OR_URL holds no archive. DIR_OR_URL: else LINEAGEWIRE_AUDIT__ARCHIVE, else audit.archive in the YAML file."""
    from .manifest import verify as run_verify

    report = run_verify(_storage(archive_location(ctx, location, "location"), storage_options))
    for problem in report.problems:
        click.echo(str(problem))
    for where, head in sorted(report.heads.items()):
        click.echo(f"head {where}: {head}", err=True)
    if report.format1_lines:
        click.echo(f"note: {report.format1_lines} manifest lines are of format 1 (written before lineagewire chained "
                   "every field): their chain covers the file's hash and path, and their other fields were checked "
                   "against their files (docs/audit.md)", err=True)
    verdict = "FAILED" if report.problems else "ok"
    empty = "; the archive holds nothing yet (its service has closed no file)" if not report.files and report.ok else ""
    click.echo(f"verify {verdict}: {report.files} files, {report.records} records, {report.bytes} bytes, "
               f"{len(report.heads)} partitions, {len(report.problems)} problems{empty}", err=True)
    if report.problems:
        raise SystemExit(1)


@audit.command("query")
@setting(AuditSettings, "archive", "--archive", metavar="DIR_OR_URL", help="The archive.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True,
              help="table: aligned text; json: one object per line; csv. Bytes are base64.")
@storage_option
@click.argument("sql")
@click.pass_context
def query(ctx: click.Context, archive: str | None, fmt: str, storage_options: tuple[str, ...], sql: str) -> None:
    """Run SQL (DuckDB) over the archive's view ``events``; quote "offset"."""
    from .query import format_result, run_query

    result = run_query(_storage(archive_location(ctx, archive, "archive"), storage_options), sql)
    for line in format_result(result, fmt):
        click.echo(line)
