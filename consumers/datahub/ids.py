"""Identities of DataHub entities derived from lineagewire events: instance URNs, DataJob ids, times."""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from typing import Any

from datahub.emitter.mce_builder import make_data_flow_urn, make_data_job_urn_with_flow, make_data_process_instance_urn

from lineagewire.schemas.naming import action_job_name

__all__ = ["ACTOR", "DPI_NAMESPACE", "action_job_id", "flow_urn", "instance_urn", "job_urn"]

#: URNs are pure functions of their ids, and acryl-datahub parses and validates what it builds (a DataJob
#: URN costs ~20 µs): each distinct one is built once. 4096 entries of a few hundred bytes each at most.
_URN_CACHE = 4096
flow_urn = functools.lru_cache(maxsize=_URN_CACHE)(make_data_flow_urn)
job_urn = functools.lru_cache(maxsize=_URN_CACHE)(make_data_job_urn_with_flow)

#: The actor of audit stamps: the DataHub system user, as ingestion sources use.
ACTOR = "urn:li:corpuser:datahub"

#: UUIDv5 namespace of DataProcessInstance ids (fixed forever: changing it changes every instance URN).
DPI_NAMESPACE = uuid.UUID("0b0f4a4e-6a53-5d0e-8c1b-3e7f2d9a5c11")


@functools.lru_cache(maxsize=_URN_CACHE)
def instance_urn(namespace: str, name: str, run_id: str, action_id: str | None = None) -> str:
    """The DataProcessInstance URN of a run (or of one action of it): a UUIDv5 of its identity."""
    key = f"{namespace}/{name}/{run_id}" + (f"/action/{action_id}" if action_id is not None else "")
    return make_data_process_instance_urn(str(uuid.uuid5(DPI_NAMESPACE, key)))


def action_job_id(job_name: str, action_name: str, plan_node: str | None = None, output: str | None = None) -> str:
    """The DataJob id of a Spark action: the same name the OpenLineage output gives its job (schemas/naming.py)."""
    return action_job_name(job_name, action_name, plan_node, output)


def _ms(value: dt.datetime) -> int:
    return int(value.timestamp() * 1000)


def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _unique(urns: Any) -> list[str]:
    return list(dict.fromkeys(urns))
