"""``lineagewire ingest openlineage``: OpenLineage events from other tools into lineage.jobs.

Two inputs, one translation: the HTTP receiver (``POST /api/v1/lineage``, the
default), or ``--from-topic TOPIC``, a topic an OpenLineage Kafka transport
writes JSON to, read on the shared consumer runtime (its options are the
``consumer:`` section's and ``LINEAGEWIRE_CONSUMER__*``, as for every service).
The options are ``IngestSettings``: flags, ``LINEAGEWIRE_INGEST__<KEY>``, the
``ingest:`` section of the YAML file, defaults.
"""

from __future__ import annotations

from typing import Any

import click

from lineagewire.cli import setting, settings_from, settings_of

from .settings import IngestSettings

__all__ = ["ingest", "openlineage"]


@click.group()
def ingest() -> None:
    """Take lineage from other tools: OpenLineage over HTTP (as Marquez serves it) or from a Kafka topic."""


@ingest.command("openlineage")
@setting(IngestSettings, "host", "--host", help="Address to listen on.")
@setting(IngestSettings, "port", "--port", type=click.IntRange(0, 65535), help="Port to listen on (0: any free one).")
@setting(IngestSettings, "token", "--token", help="Bearer token every request must carry (the transport's api_key).")
@setting(IngestSettings, "max_body_bytes", "--max-body-bytes", type=click.IntRange(min=1024),
         help="Largest request body taken, after gunzip (413 above).")
@setting(IngestSettings, "topic", "--topic", help="Topic the translated events go to.")
@setting(IngestSettings, "ack_timeout", "--ack-timeout", type=float,
         help="Seconds to wait for Kafka's confirmation before a request's events go to the outbox.")
@setting(IngestSettings, "outbox_dir", "--outbox-dir", type=click.Path(file_okay=False),
         help="Outbox folder for events Kafka cannot take now.")
@setting(IngestSettings, "outbox_max_mb", "--outbox-max-mb", type=float,
         help="Outbox size limit (MiB); when full, requests are answered 503.")
@setting(IngestSettings, "workers", "--workers", type=click.IntRange(1, 64),
         help="Receiver processes sharing the port (one Python process uses one core).")
@setting(IngestSettings, "from_topic", "--from-topic", metavar="TOPIC",
         help="Read OpenLineage JSON from this topic (OpenLineage's Kafka transport) instead of serving HTTP.")
@setting(IngestSettings, "group_id", "--group", help="Consumer group of --from-topic.")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="warning",
              show_default=True, help="uvicorn's log level.")
@click.pass_context
def openlineage(ctx: click.Context, log_level: str, **flags: Any) -> None:
    """Receive OpenLineage events (POST /api/v1/lineage, one event or an array, gzip, bearer token), validate them
    against the spec, translate them and publish them to lineage.jobs; answered 201 once they are on Kafka or in
    the outbox."""
    cfg: IngestSettings = settings_of(ctx, IngestSettings, **flags)
    settings = settings_from(ctx)
    if cfg.from_topic:
        from lineagewire.consumers.cli import run_service

        from .topic import OpenLineageTopicHandler

        handler = OpenLineageTopicHandler(settings, topic=cfg.topic)
        run_service(ctx, handler, topics=(cfg.from_topic,), group_id=cfg.group_id)
        return
    from .server import run

    click.echo(f"OpenLineage receiver on http://{cfg.host}:{cfg.port}/api/v1/lineage ({cfg.workers} process(es)) -> "
               f"{cfg.topic or settings.topics.jobs} on {settings.bootstrap_servers} "
               f"({'token required' if cfg.token else 'no token'}; outbox {cfg.outbox_path()})", err=True)
    root = ctx.find_root().obj or {}
    sources = {"config_file": root.get("config_file"),
               "ingest": {k: v for k, v in flags.items() if v is not None},
               "kafka": {k: root[k] for k in ("bootstrap_servers", "schema_registry_url", "connect_timeout")
                         if root.get(k) is not None}}
    app = run(cfg, settings, log_level=log_level, sources=sources)
    if app is not None:
        click.echo(f"stopped; {app.accepted} request(s) taken, {app.rejected} refused; {app.sink.stats()}", err=True)
