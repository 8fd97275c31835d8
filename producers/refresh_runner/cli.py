"""``lineagewire refresh-runner``: run the Spark refresh runner until SIGTERM or Ctrl-C."""

from __future__ import annotations

import click

from lineagewire.cli import settings_from

__all__ = ["refresh_runner"]


@click.command("refresh-runner")
@click.option("--group-id", default="lineagewire-refresh-runner", show_default=True, help="Kafka consumer group.")
@click.option("--state", "state_path", default="refresh-runner-state.db", show_default=True,
              help="SQLite file of completed command ids (duplicates are skipped).")
@click.option("--master", default=None, help="Spark master (default: spark-submit's, else local[*]).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Spark conf, repeatable.")
@click.option("--format", "table_format", default="parquet", show_default=True,
              help="Format of tables the runner creates.")
@click.option("--hive", is_flag=True, help="Enable Hive support (a Hive metastore for the tables).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve /metrics and /healthz on 127.0.0.1 at this port (0: any free port).")
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=None,
              help="On SIGTERM, wait at most this many seconds for the running refresh (default: until it ends).")
@click.pass_context
def refresh_runner(ctx: click.Context, group_id: str, state_path: str, master: str | None, confs: tuple[str, ...],
                   table_format: str, hive: bool, metrics_port: int | None, drain_timeout: float | None) -> None:
    """Consume refresh commands and refresh materialized tables with Spark (INSERT OVERWRITE)."""
    from lineagewire.exceptions import require

    require("pyspark", "spark", "The refresh runner")
    from pyspark.sql import SparkSession

    from .runner import RefreshRunner
    from .state import CompletedStore

    settings = settings_from(ctx)
    builder = SparkSession.builder.appName("lineagewire-refresh-runner")
    if master:
        builder = builder.master(master)
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}; expected KEY=VALUE", param_hint="--conf")
        builder = builder.config(key, value)
    if hive:
        builder = builder.enableHiveSupport()
    spark = builder.getOrCreate()
    state = CompletedStore(state_path)
    runner = RefreshRunner(spark, settings, group_id=group_id, state=state, table_format=table_format,
                           metrics_port=metrics_port, drain_timeout=drain_timeout)
    click.echo(f"refresh runner: {settings.topics.refresh_commands} -> Spark {spark.version}, group {group_id}",
               err=True)
    try:
        # SIGTERM and Ctrl-C: the running refresh finishes, offsets are committed, then the runner stops.
        runner.run(install_signal_handlers=True)
    finally:
        state.close()
        spark.stop()
