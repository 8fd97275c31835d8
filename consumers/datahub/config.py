"""Configuration of the DataHub service: the model options and the sinks.

Precedence, highest first (lineagewire's one rule, docs/settings.md, ``SettingsBase``): command-line
flags (``--file``, ``--gms-url``...), then ``LINEAGEWIRE_DATAHUB__<KEY>`` environment variables
(nested with ``__``: ``LINEAGEWIRE_DATAHUB__SINKS__REST__GMS_URL``), then the YAML file given
with ``--config`` (the keys below), else the ``datahub:`` section of lineagewire's YAML file, then the
defaults. A sink given by a flag replaces the YAML's sink of that name whole (the YAML's token never goes to
the flag's server). The Kafka connection of the MCP sink defaults to lineagewire's own ``Settings``.

.. code-block:: yaml

    env: PROD                     # DataHub fabric of every dataset and the DataJobs
    cluster: prod                 # third part of the DataFlow URN (spark,<app>,<cluster>)
    orchestrator_cluster: prod    # DataHub's Airflow plugin's [datahub] cluster: (airflow,<dag_id>,<cluster>)
    orchestrator_platform_instance: null   # the plugin's [datahub] platform_instance, if it sets one
    platform_instance: null       # for every dataset, unless platform_instances names its platform
    platform_instances: {postgres: main-db}
    platform_aliases: {lakefs: s3}   # namespace scheme -> DataHub platform
    table_platform: hive          # platform of catalog tables (TABLE symlinks); null: keep the path
    iceberg_platform_instances: {lake: prod-lake}   # Spark catalog -> platform instance of its Iceberg tables
                                  # (platform iceberg, name db.table); a catalog not listed is its own instance
    strip_partitions: true        # /data/orders/date=2026-11-01 -> /data/orders
    path_specs:                   # per platform, DataHub agent style: the name ends at {table}
      s3: ["bucket/warehouse/*/{table}"]
    include_indirect: true        # keep INDIRECT column lineage (join keys, filters, group keys)
    dataset_lineage: true         # also write upstreamLineage on output datasets
    skip_unchanged: 100000        # (URN, aspect) remembered per sink to skip identical re-emits; 0: emit all
    sinks:
      file: {path: out.json, roll_bytes: 67108864, roll_seconds: 3600}   # or just: file: out.json
      rest: {gms_url: "http://127.0.0.1:8080", token: "...", lanes: 4, max_batch: 200, linger: 0.005}
      kafka: {bootstrap: "127.0.0.1:9092", schema_registry_url: "http://127.0.0.1:8081"}
"""

from __future__ import annotations

import pathlib
import re
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict

from lineagewire.config import SettingsBase, find_config_file
from lineagewire.exceptions import ConfigError

__all__ = ["DataHubConfig", "DeliveryConfig", "FileSinkConfig", "KafkaSinkConfig", "RestSinkConfig", "SinksConfig",
           "load_config"]

_PLATFORM = re.compile(r"[a-z0-9][a-z0-9_-]*")
_FABRICS = {"DEV", "TEST", "QA", "UAT", "EI", "PRE", "STG", "NON_PROD", "PROD", "CORP", "RVW", "PRD", "TST", "SIT",
            "SBX", "SANDBOX"}


class FileSinkConfig(BaseModel):
    """A JSON array of proposals, the file ``datahub ingest`` (source type ``file``) reads."""

    model_config = {"extra": "forbid"}

    path: pathlib.Path
    fsync_interval: float = Field(1.0, gt=0, description="Seconds between fsyncs; offsets are committed only up "
                                  "to what was fsynced")
    roll_bytes: int = Field(64 << 20, ge=1 << 10, description="The current file is closed and renamed "
                            "<stem>.<UTC time>.<nnnn><suffix> once it holds this many bytes")
    roll_seconds: float = Field(3600.0, gt=0, description="... or once it is this old (seconds) and not empty")
    tail_bytes: int = Field(4 << 20, ge=1 << 10, description="How much of the file's end a restart reads (to "
                            "repair a cut and skip redelivered events); more only when one event's records reach "
                            "further back")


class DeliveryConfig(BaseModel):
    """How a delivering sink (REST, Kafka) sends: batches of proposals, several in flight, in order per job."""

    model_config = {"extra": "forbid"}

    lanes: int = Field(4, ge=1, le=64, description="Batches in flight at once; one job's proposals always use "
                       "the same lane, which sends its batches one after the other")
    max_batch: int = Field(200, ge=1, description="Proposals per batch (GMS takes up to 200 by default)")
    max_batch_bytes: int = Field(4 << 20, ge=1 << 10, description="Bytes of proposals per batch")
    linger: float = Field(0.005, ge=0, le=5, description="Seconds a lane waits for a batch to fill")
    max_pending: int = Field(4000, ge=1, description="Proposals handed and not yet confirmed before the "
                             "consumer waits (memory bound)")


class RestSinkConfig(DeliveryConfig):
    """DataHub GMS through acryl-datahub's ``DatahubRestEmitter`` (``ingestProposalBatch``)."""

    gms_url: str = Field(description="DataHub GMS, e.g. http://127.0.0.1:8080 (`consume datahub --gms-url`)")
    token: SecretStr | None = Field(None, description="DataHub access token (`consume datahub --token`)")
    timeout_sec: float = Field(10.0, gt=0)

    @field_validator("gms_url")
    @classmethod
    def _url(cls, v: str) -> str:
        expected = "expected an http:// or https:// URL of DataHub GMS with a host (e.g. http://127.0.0.1:8080)"
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"gms_url={v!r}; {expected}")
        try:
            url = urlsplit(v)
            host, _ = url.hostname, url.port  # .port raises for a port that is not a number
        except ValueError as exc:
            raise ValueError(f"gms_url={v!r}: {exc}; {expected}") from exc
        if not host:
            raise ValueError(f"gms_url={v!r} has no host; {expected}")
        return v.rstrip("/")


class KafkaSinkConfig(DeliveryConfig):
    """DataHub's MCP topic through acryl-datahub's ``DatahubKafkaEmitter`` (needs a schema registry)."""

    # One lane: the producer batches on its own, and one flush per batch confirms every message of it.
    lanes: int = Field(1, ge=1, le=64)
    max_batch: int = Field(1000, ge=1)
    max_batch_bytes: int = Field(16 << 20, ge=1 << 10)

    bootstrap: str | None = Field(None, description="Kafka bootstrap servers; default: lineagewire's own")
    schema_registry_url: str
    topic: str = "MetadataChangeProposal_v1"
    producer_config: dict[str, Any] = Field(default_factory=dict)
    schema_registry_config: dict[str, Any] = Field(default_factory=dict)
    flush_timeout: float = Field(30.0, gt=0)


class SinksConfig(BaseModel):
    model_config = {"extra": "forbid"}

    file: FileSinkConfig | None = None
    rest: RestSinkConfig | None = None
    kafka: KafkaSinkConfig | None = None

    @field_validator("file", mode="before")
    @classmethod
    def _file(cls, v: Any) -> Any:
        return {"path": v} if isinstance(v, str | pathlib.Path) else v


class DataHubConfig(SettingsBase):
    """How events become DataHub entities (see the module docstring for the YAML form)."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_DATAHUB__", env_nested_delimiter="__", extra="forbid")
    config_section = "datahub"
    title = "DataHub options"

    env: str = "PROD"
    cluster: str = "prod"
    orchestrator_cluster: str = Field("prod", description="The cluster DataHub's Airflow plugin names Airflow's "
                                      "DataFlows with ([datahub] cluster, default prod): Spark runs started by an "
                                      "Airflow task link to urn:li:dataFlow:(airflow,<dag_id>,<this>)")
    orchestrator_platform_instance: str | None = Field(None, description="The plugin's [datahub] "
                                                        "platform_instance, if set")
    platform_instance: str | None = None
    platform_instances: dict[str, str] = Field(default_factory=dict)
    platform_aliases: dict[str, str] = Field(default_factory=dict)
    table_platform: str | None = "hive"
    iceberg_platform_instances: dict[str, str] = Field(
        default_factory=dict, description="Spark catalog name -> DataHub platform instance of its Iceberg tables, "
        "which are named as DataHub's Iceberg source names them (platform iceberg, name db.table); a catalog not "
        "listed is its own platform instance")
    strip_partitions: bool = True
    path_specs: dict[str, list[str]] = Field(default_factory=dict)
    include_indirect: bool = True
    dataset_lineage: bool = True
    skip_unchanged: int = Field(100_000, ge=0, description="Per sink, how many (URN, aspect) are remembered to "
                                "skip re-emitting an aspect identical to the last one emitted; 0 emits every one")
    sinks: SinksConfig = Field(default_factory=SinksConfig)

    @field_validator("env")
    @classmethod
    def _env(cls, v: str) -> str:
        if v.upper() not in _FABRICS:
            raise ValueError(f"env={v!r}; expected a DataHub fabric type: {', '.join(sorted(_FABRICS))}")
        return v.upper()

    @field_validator("cluster", "orchestrator_cluster", "orchestrator_platform_instance")
    @classmethod
    def _cluster(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None and info.field_name == "orchestrator_platform_instance":
            return v
        if not v or any(c in v for c in ",()"):
            raise ValueError(f"{info.field_name}={v!r}; expected a non-empty name without commas or parentheses "
                             "(it is part of a URN)")
        return v

    @field_validator("platform_aliases", "platform_instances")
    @classmethod
    def _platforms(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not _PLATFORM.fullmatch(key.lower()):
                raise ValueError(f"platform {key!r}; expected a lower-case platform or scheme name")
        return {k.lower(): val for k, val in v.items()}

    @field_validator("iceberg_platform_instances")
    @classmethod
    def _iceberg_instances(cls, v: dict[str, str]) -> dict[str, str]:
        for catalog, instance in v.items():
            if not catalog or not instance or any(c in instance for c in ",()"):
                raise ValueError(f"iceberg_platform_instances[{catalog!r}]={instance!r}; expected a Spark catalog "
                                 "name mapped to a non-empty platform instance without commas or parentheses (it is "
                                 "part of a URN)")
        return v

    @field_validator("table_platform")
    @classmethod
    def _table_platform(cls, v: str | None) -> str | None:
        if v is not None and not _PLATFORM.fullmatch(v):
            raise ValueError(f"table_platform={v!r}; expected a DataHub platform such as hive or glue, or null")
        return v

    @field_validator("path_specs")
    @classmethod
    def _specs(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for platform, specs in v.items():
            for spec in specs:
                if "{table}" not in spec.split("/"):
                    raise ValueError(f"path_specs[{platform!r}] entry {spec!r}; expected a path with a "
                                     "'{table}' segment, e.g. 'bucket/warehouse/*/{table}'")
        return v


def load_config(path: str | pathlib.Path | None = None, **overrides: Any) -> DataHubConfig:
    """The configuration (``SettingsBase.load``): ``overrides`` (flags; None values ignored), then
    ``LINEAGEWIRE_DATAHUB__*`` variables (``LINEAGEWIRE_DATAHUB__ENV=DEV``,
    ``LINEAGEWIRE_DATAHUB__SINKS__REST__GMS_URL=...``), then the YAML file ``path`` (else the ``datahub:``
    section of lineagewire's YAML file), then the defaults. ``file``, ``rest`` and ``kafka`` in ``overrides``
    each replace the YAML's sink of that name whole; the variables still add to them (``--gms-url`` takes the
    token of ``LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN``, never the YAML's)."""
    data: dict[str, Any] | None = None
    if path is not None:
        p = pathlib.Path(path)
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"DataHub config {str(p)!r}: cannot read it ({exc}); expected a YAML mapping") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"DataHub config {str(p)!r}: expected a YAML mapping, got {type(data).__name__}")
        if not isinstance(data.get("sinks") or {}, dict):
            raise ConfigError(f"DataHub config {str(p)!r}: 'sinks' is a {type(data['sinks']).__name__}; expected "
                              "a mapping with file, rest and/or kafka")
    source = f"DataHub config {str(path)!r}" if path is not None else None
    sinks = {k: overrides.pop(k) for k in ("file", "rest", "kafka") if overrides.get(k) is not None}
    if sinks:
        # A flag's sink replaces the file's sink of that name whole: merged key by key, the file's token would go
        # to the flag's server. The environment still merges in (its token goes with --gms-url, as it always has).
        if data is None:
            found = find_config_file()
            data = DataHubConfig.yaml_layers(found)[0]
            source = f"config file {str(found)!r}" if found is not None else None
        if isinstance(data.get("sinks"), dict):
            data = {**data, "sinks": {k: v for k, v in data["sinks"].items() if k not in sinks}}
    config: DataHubConfig = DataHubConfig.load(document=data, source=source, sinks=sinks or None, **overrides)
    return config
