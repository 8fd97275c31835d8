"""``lineagewire consume datahub``: the DataHub service on the shared consumer runtime."""

from __future__ import annotations

import pathlib
from typing import Any

import click

from lineagewire.cli import settings_from
from lineagewire.consumers.cli import run_service, runtime_options

__all__ = ["TOKEN_ENV", "datahub"]

#: the rest sink's token, as the service reads it from the environment (LINEAGEWIRE_DATAHUB__<KEY>)
TOKEN_ENV = "LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN"


@click.command("datahub")
@click.option("--file", "file_path", type=click.Path(dir_okay=False, path_type=pathlib.Path), default=None,
              help="Write proposals to this JSON file (what `datahub ingest` and `datahub check metadata-file` read).")
@click.option("--gms-url", default=None, help="Send proposals to DataHub GMS, e.g. http://127.0.0.1:8080.")
@click.option("--token", default=None, help=f"DataHub access token for --gms-url (env {TOKEN_ENV}, which also "
              "sets the token of a rest sink in --config).")
@click.option("--kafka-schema-registry", "schema_registry", default=None,
              help="Produce proposals to DataHub's MetadataChangeProposal_v1 topic (on lineagewire's cluster), "
                   "using this schema registry.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A YAML file with the model options and sinks (see docs/datahub.md).")
@click.option("--env", default=None, help="DataHub env (fabric) of datasets, flows and jobs [default: PROD].")
@click.option("--cluster", default=None, help="Cluster part of DataFlow URNs [default: prod].")
@click.option("--platform-instance", default=None, help="Platform instance of every dataset.")
@runtime_options
@click.pass_context
def datahub(ctx: click.Context, file_path: pathlib.Path | None, gms_url: str | None, token: str | None,
            schema_registry: str | None, config_path: str | None, env: str | None, cluster: str | None,
            platform_instance: str | None, **runtime: Any) -> None:
    """Translate events to DataHub metadata change proposals (DataFlow, DataJob, DataProcessInstance, datasets)."""
    from lineagewire.consumers.datahub.config import load_config
    from lineagewire.consumers.datahub.handler import DataHubHandler, make_sinks

    if token and not gms_url:
        raise click.BadParameter("--token needs --gms-url", param_hint="--token")
    config = load_config(
        config_path, env=env, cluster=cluster, platform_instance=platform_instance,
        file={"path": str(file_path)} if file_path else None,
        rest={"gms_url": gms_url, **({"token": token} if token else {})} if gms_url else None,
        kafka={"schema_registry_url": schema_registry} if schema_registry else None)
    settings = settings_from(ctx)
    handler = DataHubHandler(config, make_sinks(config, bootstrap_servers=settings.bootstrap_servers,
                                                producer_defaults=settings.as_librdkafka_dict()))
    handler.check()
    run_service(ctx, handler, **runtime)
