"""``lineagewire refresh-runner``: run the Spark refresh runner until SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import threading

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
@click.pass_context
def refresh_runner(ctx: click.Context, group_id: str, state_path: str, master: str | None, confs: tuple[str, ...],
                   table_format: str, hive: bool) -> None:
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
    runner = RefreshRunner(spark, settings, group_id=group_id, state=state, table_format=table_format)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: runner.stop())
    click.echo(f"refresh runner: {settings.topics.refresh_commands} -> Spark {spark.version}, group {group_id}",
               err=True)
    try:
        runner.run()
    except KeyboardInterrupt:
        runner.stop()
    finally:
        state.close()
        spark.stop()
