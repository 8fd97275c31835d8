"""A dataset's lifecycle change (contract v2 ``lifecycle_change``) as DataHub models it.

DataHub has no rename and no drop of its own: an entity is soft-deleted (``status`` removed=true) and a new URN
is a new entity. What its own tools do, and so what this does:

* **DROP**: the dataset's ``status`` is removed=true, as DataHub's OpenLineage converter does for a
  ``lifecycleStateChange`` DROP (``OpenLineageDatasetMapper.getDatasetStatus``); its schema is left as it was.
  Any later event that reads or writes it (a CREATE after the DROP) upserts removed=false again.
* **RENAME**: the new URN is the dataset from now on (``status`` removed=false, the schema after the rename), and
  the old URN is soft-deleted, as ``datahub migrate`` leaves the source of a URN it moves (and as stateful
  ingestion leaves a table that is gone). DataHub has no aspect for "was called": the two are linked by custom
  properties, ``renamedFrom`` on the new and ``renamedTo`` on the old, written as PATCHes of
  ``datasetProperties`` so they add to what other writers put there. Not ``siblings`` (one asset on two
  platforms, which DataHub's UI merges into one page) and not ``upstreamLineage`` (an output's lineage is
  upserted whole by the next job writing it, which would drop the edge, and no data flowed between the names).
* **every change** gets an ``operation`` (timeseries, DataHub's record of what happened to a dataset when, which
  its warehouse sources fill from DDL logs): CREATE, ALTER and DROP by their own operation type, RENAME,
  TRUNCATE and OVERWRITE as CUSTOM with the change as ``customOperationType``; the run and action in its custom
  properties. The schema after CREATE/ALTER/... is the dataset's ``schemaMetadata`` like any output's.

The old name of a RENAME is ``previous_identifier`` (namespace, name), the dataset's name before it. A catalog
table's event is named by its location, with the table as a symlink, and DataHub names it by the table: the old
table is the new table's symlink with its last part replaced by the old location's last folder (a managed table
lives in ``<db>.db/<table>``), or the symlink itself when ``previous_identifier`` is in the symlink's namespace.
"""

from __future__ import annotations

from typing import Any, cast

from datahub.metadata.schema_classes import (
    OperationClass,
    OperationSourceTypeClass,
    OperationTypeClass,
    StatusClass,
)
from datahub.specific.dataset import DatasetPatchBuilder

from .datasets import DatasetNamer
from .proposals import Aspect, Memo, Proposal, from_json, proposal, serialise, to_json

__all__ = ["LIFECYCLE_CHANGES", "REMOVED", "Lifecycle", "previous_dataset"]

#: lifecycle change -> (DataHub operation type, customOperationType)
LIFECYCLE_CHANGES: dict[str, tuple[str, str | None]] = {
    "CREATE": (OperationTypeClass.CREATE, None),
    "ALTER": (OperationTypeClass.ALTER, None),
    "DROP": (OperationTypeClass.DROP, None),
    "RENAME": (OperationTypeClass.CUSTOM, "RENAME"),
    "TRUNCATE": (OperationTypeClass.CUSTOM, "TRUNCATE"),
    "OVERWRITE": (OperationTypeClass.CUSTOM, "OVERWRITE"),
}
REMOVED = serialise(StatusClass(removed=True))


def previous_dataset(d: dict[str, Any]) -> dict[str, Any] | None:
    """The dataset dict the RENAME's output ``d`` was before (its namespace, name and, for a catalog table, the
    old table as its symlink), None unless ``d`` is a RENAME with a previous identifier."""
    before = d.get("previous_identifier")
    if d.get("lifecycle_change") != "RENAME" or not before:
        return None
    old: dict[str, Any] = {"namespace": before["namespace"], "name": before["name"], "format": d.get("format"),
                           "properties": d.get("properties") or {}, "symlinks": []}
    for link in d.get("symlinks") or ():
        if (link.get("type") or "TABLE").upper() != "TABLE" or not link.get("name"):
            continue
        if before["namespace"] == link["namespace"]:
            table = before["name"]
        else:
            leaf = before["name"].rstrip("/").rsplit("/", 1)[-1]
            head, dot, _ = str(link["name"]).rpartition(".")
            table = f"{head}{dot}{leaf}"
        old["symlinks"] = [{**link, "name": table}]
        break
    return old


class Lifecycle:
    """The proposals of the lifecycle changes of an event's outputs (see the module's docstring)."""

    def __init__(self, names: DatasetNamer, memo: Memo) -> None:
        self.names = names
        self._memo = memo

    def proposals(self, outputs: list[dict[str, Any]], run: dict[str, str], when: int, system: Any
                  ) -> list[Proposal]:
        """``run``: the custom properties naming the run (and action) that made the changes."""
        out: list[Proposal] = []
        for d in outputs:
            change = d.get("lifecycle_change")
            if change not in LIFECYCLE_CHANGES:
                continue  # none, or a change this version does not know (the contract's field is an open string)
            urn = self.names.urn(d)
            out.append(proposal(urn, self._operation(change, run, when), system))
            old = previous_dataset(d)
            if old is not None:
                old_urn = self.names.urn(old)
                if old_urn != urn:
                    out.append(proposal(old_urn, REMOVED, system))
                    out += _patch(old_urn, "renamedTo", urn, system)
                    out += _patch(urn, "renamedFrom", old_urn, system)
        return out

    def _operation(self, change: str, run: dict[str, str], when: int) -> Aspect:
        kind, custom = LIFECYCLE_CHANGES[change]
        base = self._memo.get(("operation", change, *run), lambda: to_json(OperationClass(
            timestampMillis=0, lastUpdatedTimestamp=0, operationType=kind, customOperationType=custom,
            sourceType=OperationSourceTypeClass.DATA_PROCESS, customProperties=dict.fromkeys(run, ""))))
        return from_json(OperationClass.ASPECT_NAME, {**base, "timestampMillis": when, "lastUpdatedTimestamp": when,
                                                      "customProperties": {**base["customProperties"], **run}})


def _patch(urn: str, key: str, value: str, system: Any) -> list[Proposal]:
    """A custom property added by a PATCH: plain ``MetadataChangeProposalClass``es, which every sink reads through
    the public ``to_obj`` as it reads ``Proposal`` (see ``translate._patches``)."""
    return cast("list[Proposal]", DatasetPatchBuilder(urn, system_metadata=system).add_custom_property(key, value)
                .build())
