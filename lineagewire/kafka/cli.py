"""``lineagewire kafka`` and ``lineagewire topics``."""

from __future__ import annotations

import json

import click

from lineagewire.cli import settings_from
from lineagewire.kafka import local


def _broker(port: int) -> local.LocalKafka:
    return local.LocalKafka(port=port)


port_option = click.option("--port", type=int, default=9092, show_default=True,
                           help="Port of the local broker on 127.0.0.1 (the controller uses port+1).")


@click.group()
def kafka() -> None:
    """The local single-node Kafka (KRaft) on 127.0.0.1.

    Jars are fetched from Maven Central on first use into ~/.lineagewire/kafka
    (LINEAGEWIRE_HOME); data and logs live in ~/.lineagewire/kafka/default/.
    """


@kafka.command()
def fetch() -> None:
    """Download Kafka's jars into the cache (done by start when needed)."""
    click.echo(local.fetch(progress=click.echo))


@kafka.command()
@port_option
@click.option("--no-topics", is_flag=True, help="Do not create lineagewire's topics after starting.")
@click.option("--timeout", type=float, default=90, show_default=True, help="Seconds to wait for the broker.")
@click.pass_context
def start(ctx: click.Context, port: int, no_topics: bool, timeout: float) -> None:
    """Start the broker (idempotent) and create lineagewire's topics."""
    broker = _broker(port).start(timeout=timeout, progress=lambda m: click.echo(m, err=True))
    click.echo(f"Kafka is up on {broker.bootstrap_servers} (data: {broker.data_dir}, logs: {broker.logs_dir})")
    if not no_topics:
        from lineagewire.kafka.topics import create_topics

        settings = settings_from(ctx, bootstrap_servers=broker.bootstrap_servers)
        for name, state in create_topics(settings).items():
            click.echo(f"topic {name}: {state}")


@kafka.command()
@port_option
def stop(port: int) -> None:
    """Stop the broker (SIGTERM, then SIGKILL after 30 s)."""
    click.echo("stopped" if _broker(port).stop() else "not running")


@kafka.command()
@port_option
def status(port: int) -> None:
    """Print the broker's state as JSON; exit 1 when it is not running."""
    st = _broker(port).status()
    click.echo(json.dumps(st, indent=2))
    raise SystemExit(0 if st["running"] else 1)


@kafka.command()
@port_option
@click.confirmation_option(prompt="Delete the local broker's data and logs?")
def wipe(port: int) -> None:
    """Stop the broker and delete its data and logs (the jar cache stays)."""
    _broker(port).wipe()
    click.echo("wiped")


@click.group()
def topics() -> None:
    """lineagewire's topics on the configured cluster."""


@topics.command("create")
@click.option("--dlq", "dlq_services", multiple=True, help="Also create <jobs topic>.dlq.<SERVICE> (repeatable).")
@click.pass_context
def create(ctx: click.Context, dlq_services: tuple[str, ...]) -> None:
    """Create lineage.jobs and lineage.refresh-commands (and DLQs) if missing."""
    from lineagewire.kafka.topics import create_topics, dlq_topic, standard_topics

    settings = settings_from(ctx)
    specs = standard_topics(settings) + [dlq_topic(settings, settings.topics.jobs, s) for s in dlq_services]
    # A one-shot command: an unreachable cluster is one line within the connect timeout.
    for name, state in create_topics(settings, specs, connect_timeout=settings.connect_timeout).items():
        click.echo(f"topic {name}: {state}")


@topics.command("list")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
              help="Seconds to wait for a broker to answer (default: the connect timeout, 10).")
@click.pass_context
def list_(ctx: click.Context, timeout: float | None) -> None:
    """List topics with their partition counts."""
    from lineagewire.kafka.topics import list_topics

    for name, partitions in sorted(list_topics(settings_from(ctx), timeout=timeout).items()):
        click.echo(f"{name}\t{partitions}")
