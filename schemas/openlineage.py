"""How a contract event carries the OpenLineage event it was translated from (``lineagewire ingest openlineage``).

The intake (producers/ingest) turns one OpenLineage event into a few contract events (a JobCreatedEvent for a
START, a JobStatusChangedEvent for a state change, an ActionLineageEvent for its datasets). The **last** of them
stands for the OpenLineage event: its ``header.openlineage`` is the JSON text of

    {"v": 1, "kind": "RunEvent" | "DatasetEvent" | "JobEvent", "patch": PATCH[, "facetProducer": URI]}

where ``PATCH`` turns ``regenerate(event, kind, facetProducer)`` (an OpenLineage event rebuilt from the contract
event's own fields: header, status or datasets, error, SQL; its facets' ``_producer`` is ``facetProducer``, else
the event's producer) into the original. The others of the group carry
``{"v": 1, "derived": true}``: they restate part of the same OpenLineage event for the consumers that read runs
(registry, alerting, DataHub), and an OpenLineage output skips them. Everything the contract does not model
(unknown facets, ``_producer`` and ``_schemaURL`` of each facet, the exact ``eventTime`` text) is in the
patch, so the OpenLineage output gives the event back as it came: ``restore(event)``.

Both sides run ``regenerate`` of the same ``v``: its output for a given event must never change within a
version. A change to it is a new version, and ``restore`` keeps the old one for events written before.

PATCH grammar (a patch of a value is None when nothing differs):
    {key: PATCH | ["-"], ...}     an object: members changed, or removed (``["-"]``), others kept
    ["[", {"<index>": PATCH}]     a list of the same length: items changed, others kept
    ["=", value]                  anything else: the original value itself
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

__all__ = [
    "DERIVED",
    "FACET_URLS",
    "ORIGIN_VERSION",
    "STATUS_OF_EVENT_TYPE",
    "apply_patch",
    "diff",
    "origin",
    "origin_text",
    "regenerate",
    "restore",
]

#: version of ``regenerate`` (the ``v`` of header.openlineage)
ORIGIN_VERSION = 1
#: header.openlineage of the events that restate part of an OpenLineage event another event of the group stands for
DERIVED = json.dumps({"v": ORIGIN_VERSION, "derived": True}, sort_keys=True, separators=(",", ":"))

_SPEC = "https://openlineage.io/spec"
EVENT_URLS = {kind: f"{_SPEC}/2-0-2/OpenLineage.json#/$defs/{kind}"
              for kind in ("RunEvent", "DatasetEvent", "JobEvent")}
#: the ``_schemaURL`` regenerated facets get (openlineage-python 1.5x's); a producer's other version is in the patch
FACET_URLS = {name: f"{_SPEC}/facets/{version}/{cls}.json#/$defs/{cls}" for name, version, cls in (
    ("parent", "1-2-0", "ParentRunFacet"),
    ("errorMessage", "1-0-1", "ErrorMessageRunFacet"),
    ("sql", "1-1-0", "SQLJobFacet"),
    ("schema", "1-2-0", "SchemaDatasetFacet"),
    ("symlinks", "1-0-1", "SymlinksDatasetFacet"),
    ("storage", "1-0-1", "StorageDatasetFacet"),
    ("datasetType", "1-0-1", "DatasetTypeDatasetFacet"),
    ("lifecycleStateChange", "1-0-1", "LifecycleStateChangeDatasetFacet"),
    ("columnLineage", "1-2-0", "ColumnLineageDatasetFacet"),
    ("outputStatistics", "1-0-2", "OutputStatisticsOutputDatasetFacet"),
)}

#: OpenLineage eventType -> the Flink status of the run after it (OTHER and a missing type change nothing)
STATUS_OF_EVENT_TYPE: dict[str, str] = {
    "START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "FINISHED", "FAIL": "FAILED", "ABORT": "CANCELED",
}
_EVENT_TYPE_OF_STATUS = {"RUNNING": "RUNNING", "FINISHED": "COMPLETE", "FAILED": "FAIL", "CANCELED": "ABORT"}
_EVENT_TYPE_OF_ACTION = {"RUNNING": "RUNNING", "SUCCEEDED": "COMPLETE", "FAILED": "FAIL", "UNKNOWN": "OTHER"}
_DELETE = ["-"]


# -- header.openlineage -----------------------------------------------------------------------------

def origin_text(kind: str, patch: Any, facet_producer: str | None = None) -> str:
    """header.openlineage of the event that stands for an OpenLineage event of ``kind``."""
    found: dict[str, Any] = {"v": ORIGIN_VERSION, "kind": kind, "patch": patch}
    if facet_producer is not None:
        found["facetProducer"] = facet_producer
    return json.dumps(found, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def origin(event: dict[str, Any]) -> dict[str, Any] | None:
    """The parsed header.openlineage of ``event``; None for events not translated from OpenLineage."""
    text = event["header"].get("openlineage")
    return None if text is None else json.loads(text)


def restore(event: dict[str, Any]) -> dict[str, Any] | None:
    """The OpenLineage event (JSON-ready dict) ``event`` stands for; None when it stands for none (not ingested,
    or derived)."""
    found = origin(event)
    if found is None or found.get("derived"):
        return None
    if found.get("v") != ORIGIN_VERSION:
        raise ValueError(f"header.openlineage v={found.get('v')!r}; expected {ORIGIN_VERSION} (a newer lineagewire "
                         "wrote this event)")
    return apply_patch(regenerate(event, found["kind"], found.get("facetProducer")), found["patch"])


# -- patches ----------------------------------------------------------------------------------------

def diff(original: Any, regenerated: Any) -> Any:
    """The patch that turns ``regenerated`` into ``original`` (None when they are the same JSON).

    Values that are ``==`` are the same (1, 1.0 and True among them): ``regenerate`` gives the original's own
    values or constants of the type the spec gives them, so a spec-valid event never differs from it by that."""
    if type(original) is not type(regenerated):
        return ["=", original]
    # Most of an event is what its fields regenerate: compared at C speed. (``==`` takes 1 for True and 1.0, which
    # regenerated values never differ by: they are the original values or constants of their own types.)
    if original == regenerated:
        return None
    if type(original) is dict:
        out: dict[str, Any] = {}
        for key, value in original.items():
            if key not in regenerated:
                out[key] = ["=", value]
            elif (sub := diff(value, regenerated[key])) is not None:
                out[key] = sub
        for key in regenerated:
            if key not in original:
                out[key] = _DELETE
        return out or None
    if type(original) is list:
        if len(original) != len(regenerated):
            return ["=", original]
        items = {str(i): sub for i, (a, b) in enumerate(zip(original, regenerated, strict=True))
                 if (sub := diff(a, b)) is not None}
        return ["[", items] if items else None
    return None if original == regenerated else ["=", original]


def apply_patch(base: Any, patch: Any) -> Any:
    """``base`` with ``patch`` applied (``diff``'s inverse); ``base`` is not changed."""
    if patch is None:
        return base
    if type(patch) is dict:
        out = dict(base)
        for key, sub in patch.items():
            if sub == _DELETE:
                out.pop(key, None)
            else:
                out[key] = apply_patch(out.get(key), sub)
        return out
    if patch[0] == "=":
        return patch[1]
    if patch[0] == "[":
        items = list(base)
        for index, sub in patch[1].items():
            items[int(index)] = apply_patch(items[int(index)], sub)
        return items
    raise ValueError(f"patch {patch!r}: expected an object, ['=', value] or ['[', {{index: patch}}]")


# -- regenerate (version 1: never change what it gives) ---------------------------------------------

def event_time_text(when: dt.datetime) -> str:
    """An event time as openlineage-python writes it (``datetime.isoformat()`` in UTC)."""
    return when.astimezone(dt.UTC).isoformat()


def regenerate(event: dict[str, Any], kind: str = "RunEvent", facet_producer: str | None = None) -> dict[str, Any]:
    """The OpenLineage event of ``kind`` rebuilt from the contract event's own fields (version 1); its facets'
    ``_producer`` is ``facet_producer`` (a client library's URI, when the event's producer is the application's),
    else the event's producer."""
    h = event["header"]
    producer = facet_producer or h["producer"]["name"]
    out: dict[str, Any] = {"eventTime": event_time_text(h["event_time"]), "producer": h["producer"]["name"],
                           "schemaURL": EVENT_URLS.get(kind, EVENT_URLS["RunEvent"])}
    inputs = [_dataset(d, producer, None) for d in event.get("inputs") or []]
    outputs = [_dataset(d, producer, event.get("column_lineage") or []) for d in event.get("outputs") or []]
    if kind == "DatasetEvent":
        out["dataset"] = outputs[0] if outputs else {}
        return out
    job_facets: dict[str, Any] = {}
    if event.get("sql"):
        job_facets["sql"] = {**_base(producer, "sql"), "query": event["sql"]}
    out["job"] = {"namespace": h["job_namespace"], "name": h["job_name"], "facets": job_facets}
    out["inputs"], out["outputs"] = inputs, outputs
    if kind == "JobEvent":
        return out
    out["eventType"] = _event_type(event)
    out["run"] = {"runId": h["run_id"], "facets": _run_facets(event, producer)}
    return out


def _event_type(event: dict[str, Any]) -> str:
    if "new_status" in event:
        return _EVENT_TYPE_OF_STATUS.get(event["new_status"], "OTHER")
    return _EVENT_TYPE_OF_ACTION.get(event.get("action_status") or "UNKNOWN", "OTHER")


def _base(producer: str, facet: str) -> dict[str, Any]:
    return {"_producer": producer, "_schemaURL": FACET_URLS[facet]}


def _run_facets(event: dict[str, Any], producer: str) -> dict[str, Any]:
    h = event["header"]
    facets: dict[str, Any] = {}
    parent, root = h.get("parent_run"), h.get("root_parent_run")
    if parent:
        facet = {**_base(producer, "parent"), "run": {"runId": parent["run_id"]},
                 "job": {"namespace": parent["job_namespace"], "name": parent["job_name"]}}
        if root:
            facet["root"] = {"run": {"runId": root["run_id"]},
                             "job": {"namespace": root["job_namespace"], "name": root["job_name"]}}
        facets["parent"] = facet
    err = event.get("error")
    if err:
        facet = {**_base(producer, "errorMessage"), "message": err["message"],
                 "programmingLanguage": err["error_class"]}
        if err.get("stack_trace") is not None:
            facet["stackTrace"] = err["stack_trace"]
        facets["errorMessage"] = facet
    return facets


def _field(f: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f["name"]}
    if f["type"]:
        out["type"] = f["type"]
    if f.get("description") is not None:
        out["description"] = f["description"]
    if f.get("fields"):
        out["fields"] = [_field(c) for c in f["fields"]]
    return out


def _dataset(d: dict[str, Any], producer: str, column_lineage: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An input (``column_lineage`` None) or output dataset with the facets the contract models."""
    facets: dict[str, Any] = {}
    if d["fields"]:
        facets["schema"] = {**_base(producer, "schema"), "fields": [_field(f) for f in d["fields"]]}
    if d["symlinks"]:
        facets["symlinks"] = {**_base(producer, "symlinks"), "identifiers": [
            {"namespace": s["namespace"], "name": s["name"], "type": s["type"]} for s in d["symlinks"]]}
    if d.get("format") is not None:
        facets["storage"] = {**_base(producer, "storage"),
                             "storageLayer": d["properties"].get("storage_layer", ""), "fileFormat": d["format"]}
    if d.get("dataset_type") is not None:
        facets["datasetType"] = {**_base(producer, "datasetType"), "datasetType": d["dataset_type"]}
    if d.get("lifecycle_change") is not None:
        facet = {**_base(producer, "lifecycleStateChange"), "lifecycleStateChange": d["lifecycle_change"]}
        before = d.get("previous_identifier")
        if before:
            facet["previousIdentifier"] = {"namespace": before["namespace"], "name": before["name"]}
        facets["lifecycleStateChange"] = facet
    out: dict[str, Any] = {"namespace": d["namespace"], "name": d["name"], "facets": facets}
    if column_lineage is None:
        return out
    mine = [cl for cl in column_lineage if cl["namespace"] == d["namespace"] and cl["name"] == d["name"]]
    if mine:
        facets["columnLineage"] = {**_base(producer, "columnLineage"), "fields": {
            cl["field"]: {"inputFields": [_input_field(i) for i in cl["inputs"]]} for cl in mine}}
    statistics = {k: v for k, v in (("rowCount", d.get("row_count")), ("size", d.get("byte_count")))
                  if v is not None}
    if statistics:
        out["outputFacets"] = {"outputStatistics": {**_base(producer, "outputStatistics"), **statistics}}
    return out


def _input_field(i: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": i["namespace"], "name": i["name"], "field": i["field"]}
    if i["transformations"]:
        out["transformations"] = [_transformation(t) for t in i["transformations"]]
    return out


def _transformation(t: dict[str, Any]) -> dict[str, Any]:
    # as openlineage-spark writes each (the producer of most column lineage): every member, "" for none
    return {"type": t["type"], "subtype": t["subtype"], "description": t["description"], "masking": t["masking"]}
