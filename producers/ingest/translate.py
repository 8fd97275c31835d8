"""OpenLineage events -> contract events (``OpenLineageTranslator``), for ``lineagewire ingest openlineage``.

A pure function of the event: the same OpenLineage event always gives the same contract events, byte for byte
once encoded (event ids, sequence numbers and times all come from the event), so a producer's retry or a topic
replayed changes nothing downstream (the registry, alerting and the OpenLineage output deduplicate on them).

RunEvent, in publish order (all keyed by the OpenLineage job, ``job_key``):

* START: a ``JobCreatedEvent`` (status CREATED) with the spec from the job facets (``jobType``, ``sql``,
  ``ownership``, ``tags``) and the run's ``processing_engine``;
* START, RUNNING, COMPLETE, FAIL, ABORT: a ``JobStatusChangedEvent`` to RUNNING, RUNNING, FINISHED, FAILED,
  CANCELED (``STATUS_OF_EVENT_TYPE``), ``old_status`` null (a stateless translator does not know it: downstream,
  null means "whatever it was", and a run whose START never came starts with it), the ``errorMessage`` facet
  as ``error``; OTHER (and no eventType) changes no status;
* an ``ActionLineageEvent`` with the inputs, outputs, column lineage and the ``sql`` facet, when the event has
  datasets (or when nothing else would stand for it: an OTHER without datasets); every event of a run gives the
  same action (``ACTION_NAME``), RUNNING until COMPLETE (SUCCEEDED) or FAIL (FAILED).

DatasetEvent and JobEvent have no run: each becomes one ``ActionLineageEvent`` (the shape every consumer reads
lineage from) of a run that stands for the job's static lineage, ``static_run_id``: a JobEvent's job and its
inputs and outputs; a DatasetEvent's dataset as the one output of the job named by the dataset.

The header keeps the producer URI (``producer.name``; ``version`` is read from ``/tree/<version>/`` in it,
``host`` is empty: the event says nothing of the host, and the intake's own host would make two intakes' copies
of one event differ), the event time, the run id, and the ``parent`` run facet as ``parent_run`` (its ``root``
as ``root_parent_run``). ``sequence`` is ``eventTime`` in microseconds × 1024 plus the event type's rank (START
before RUNNING before OTHER before the ends, for events of one instant) × 128, four bits of the event's digest
× 8 and the event's slot in its group: per run it orders by event time, and it is sparse (consumers must not
expect consecutive numbers). The last event of the group carries the OpenLineage event's remainder in
``header.openlineage`` (``lineagewire.schemas.openlineage``), so the OpenLineage output gives it back unchanged.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import orjson

from lineagewire.schemas import action_lineage, dataset, header, job_created, job_spec, job_status_changed
from lineagewire.schemas.events import (
    ColumnLineage,
    Dataset,
    DatasetId,
    ErrorInfo,
    EventHeader,
    InputField,
    JobSpec,
    Producer,
    RunRef,
    SchemaField,
    Transformation,
)
from lineagewire.schemas.openlineage import (
    DERIVED,
    ORIGIN_VERSION,
    STATUS_OF_EVENT_TYPE,
    diff,
    origin_text,
    regenerate,
)

from .exceptions import TranslationError
from .file_reads import relocate_file_reads

__all__ = ["INGEST_NAMESPACE", "OpenLineageTranslator", "sequence_of", "static_run_id"]

#: UUIDv5 namespace of the ids the intake derives (fixed forever: changing it changes every event id)
INGEST_NAMESPACE = uuid.UUID("0b6b1f0e-6a43-5c55-9d1e-4f1a7c2e9a10")

#: event type -> its rank among events of one run at one instant
_RANK = {"START": 0, "RUNNING": 1, "OTHER": 2, "COMPLETE": 3, "FAIL": 3, "ABORT": 3}
_ACTION_STATUS = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "SUCCEEDED", "FAIL": "FAILED"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MAX_LONG = 2**63 - 1
_MAX_MICROS = _MAX_LONG // 1024 - 1
_VERSION = re.compile(r"/tree/v?([^/]+)/")
#: producer URI -> the version in it
_VERSIONS: dict[str, str] = {}
#: the action name and id of ingested lineage: an OpenLineage run is one unit of work (a Spark integration's SQL
#: execution is a run of its own), so its START and COMPLETE report the same action, whose lifecycle changes the
#: registry keeps once, whose DataHub run instance is one, and whose job downstream is the same run after run
ACTION_NAME = "openlineage"


_NAMESPACE_BYTES = INGEST_NAMESPACE.bytes


def _uuid5(namespaced: bytes) -> str:
    """``str(uuid.uuid5(INGEST_NAMESPACE, name))`` of ``INGEST_NAMESPACE.bytes + name``, without building a UUID
    object (a few µs on every contract event)."""
    h = bytearray(hashlib.sha1(namespaced, usedforsecurity=False).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def static_run_id(namespace: str, name: str) -> str:
    """The run id that holds a job's (or a dataset's) lineage from DatasetEvents and JobEvents, which have none."""
    return str(uuid.uuid5(INGEST_NAMESPACE, f"static/{namespace}/{name}"))


def sequence_of(when: dt.datetime, event_type: str, digest: bytes, slot: int) -> int:
    """header.sequence of the ``slot``-th contract event of an OpenLineage event (see the module docstring)."""
    micros = (when - _EPOCH) // dt.timedelta(microseconds=1)
    # An Avro long: times before 1970 count from 0, and after 2255 stay at the last number that fits.
    return min(max(micros, 0), _MAX_MICROS) * 1024 + _RANK.get(event_type, 2) * 128 + (digest[0] & 0xF) * 8 + slot


class OpenLineageTranslator:
    """Translates decoded, spec-valid OpenLineage events into contract events; stateless (safe to share)."""

    def translate(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """The contract events of ``event`` in publish order; ``TranslationError`` names what does not fit."""
        if not isinstance(event, dict):
            raise TranslationError("$", f"got {type(event).__name__}; expected a JSON object (an OpenLineage event)")
        try:
            if "run" in event:
                return _Event(relocate_file_reads(event), "RunEvent").run_event()
            if "dataset" in event:
                return _Event(event, "DatasetEvent").static_event()
            if "job" in event:
                return _Event(relocate_file_reads(event), "JobEvent").static_event()
        except TranslationError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise TranslationError("$", f"cannot translate ({type(exc).__name__}: {exc}); expected an event valid "
                                   "by the OpenLineage spec") from exc
        raise TranslationError("$", "has none of run, job, dataset; expected a RunEvent, JobEvent or DatasetEvent")


class _Event:
    """One OpenLineage event being translated."""

    def __init__(self, ev: dict[str, Any], kind: str) -> None:
        self.ev, self.kind = ev, kind
        self.event_type = ev.get("eventType") or "OTHER"
        self.when = _event_time(ev.get("eventTime"))
        self.digest = hashlib.sha256(_identity(ev).encode()).digest()
        self.ids_from = _NAMESPACE_BYTES + self.digest.hex().encode()
        self.producer = _producer(ev.get("producer"))
        self.slot = 0

    # -- kinds ---------------------------------------------------------------------------------------

    def run_event(self) -> list[dict[str, Any]]:
        ev = self.ev
        job, run = _object(ev, "job"), _object(ev, "run")
        run_id = _text(run, "runId", "$.run")
        run_facets = _object(run, "facets", "$.run", required=False)
        ids = (_text(job, "namespace", "$.job"), _text(job, "name", "$.job"), run_id)
        parent, root = _parents(run_facets)
        out: list[dict[str, Any]] = []
        if self.event_type == "START":
            out.append(dict(job_created(self._header("JobCreatedEvent", ids, parent, root),
                                        _spec(job, run_facets), status="CREATED")))
        error = _error(run_facets)
        status = STATUS_OF_EVENT_TYPE.get(self.event_type)
        if status is not None:
            out.append(dict(job_status_changed(self._header("JobStatusChangedEvent", ids, parent, root),
                                               status, None, error=error,  # type: ignore[arg-type]
                                               transition_time=self.when)))
        if ev.get("inputs") or ev.get("outputs") or not out:
            out.append(self._action(ids, parent, root, job, error))
        return self._finish(out)

    def static_event(self) -> list[dict[str, Any]]:
        ev = self.ev
        if self.kind == "DatasetEvent":
            ds = _object(ev, "dataset")
            ids = (_text(ds, "namespace", "$.dataset"), _text(ds, "name", "$.dataset"))
            job: dict[str, Any] = {}
            outputs = [ds]
            ev = {"outputs": outputs}
        else:
            job = _object(ev, "job")
            ids = (_text(job, "namespace", "$.job"), _text(job, "name", "$.job"))
        return self._finish([self._action((*ids, static_run_id(*ids)), None, None, job, None, ev)])

    # -- pieces --------------------------------------------------------------------------------------

    def _header(self, kind: str, ids: tuple[str, str, str], parent: RunRef | None, root: RunRef | None
                ) -> EventHeader:
        slot, self.slot = self.slot, self.slot + 1
        return header(kind, job_namespace=ids[0], job_name=ids[1], run_id=ids[2],
                      sequence=sequence_of(self.when, self.event_type, self.digest, slot),
                      parent_run=parent, root_parent_run=root, producer=self.producer, event_time=self.when,
                      event_id=_uuid5(self.ids_from + b"/%d" % slot))

    def _action(self, ids: tuple[str, str, str], parent: RunRef | None, root: RunRef | None, job: dict[str, Any],
                error: ErrorInfo | None, ev: dict[str, Any] | None = None) -> dict[str, Any]:
        ev = self.ev if ev is None else ev
        inputs = [_dataset(d, f"$.inputs[{i}]") for i, d in enumerate(ev.get("inputs") or [])]
        outputs, lineage = [], []
        for i, d in enumerate(ev.get("outputs") or []):
            outputs.append(_dataset(d, f"$.outputs[{i}]"))
            lineage += _column_lineage(d, f"$.outputs[{i}]")
        sql = _facet(job, "sql").get("query")
        return dict(action_lineage(
            self._header("ActionLineageEvent", ids, parent, root),
            action_id=ACTION_NAME, action_name=ACTION_NAME,
            inputs=inputs, outputs=outputs, column_lineage=lineage,
            action_status=_ACTION_STATUS.get(self.event_type, "UNKNOWN"),  # type: ignore[arg-type]
            sql=sql if isinstance(sql, str) else None, error=error))

    def _finish(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Marks the group: the last event stands for the OpenLineage event and carries what its fields do not."""
        for event in out[:-1]:
            event["header"]["openlineage"] = DERIVED
        last = out[-1]
        facet_producer = _facet_producer(self.ev)
        last["header"]["openlineage"] = _origin_text(
            self.kind, diff(self.ev, regenerate(last, self.kind, facet_producer)), facet_producer)
        return out


def _origin_text(kind: str, patch: Any, facet_producer: str | None) -> str:
    """``origin_text``'s JSON, written by orjson (a tenth of the time of ``json.dumps`` with sorted keys: about
    10 µs of every event). The same text for the same patch, and ``origin_text``'s for the corpus (the tests
    compare them); a float may be spelt otherwise (``1e16`` for ``1e+16``), the same JSON value. What orjson does
    not write (an integer past 64 bits, a lone surrogate) goes to ``origin_text``."""
    found: dict[str, Any] = {"v": ORIGIN_VERSION, "kind": kind, "patch": patch}
    if facet_producer is not None:
        found["facetProducer"] = facet_producer
    try:
        return orjson.dumps(found, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:
        return origin_text(kind, patch, facet_producer)


# -- fields ------------------------------------------------------------------------------------------

def _identity(ev: dict[str, Any]) -> str:
    """What makes an OpenLineage event the same event: its run, type, time and job (or dataset), and the datasets it
    names. A producer that sends it again (a retry, a replayed topic) sends the same; two events of one run differ
    in type or time, or (two RUNNING events in one millisecond) in what they read and wrote."""
    run, job, ds = ev.get("run") or {}, ev.get("job") or {}, ev.get("dataset") or {}
    parts = (run.get("runId"), ev.get("eventType"), ev.get("eventTime"), job.get("namespace"), job.get("name"),
             ds.get("namespace"), ds.get("name"), _names(ev.get("inputs")), _names(ev.get("outputs")))
    return json.dumps(parts)


def _names(datasets: Any) -> list[str] | None:
    if not isinstance(datasets, list) or not datasets:
        return None  # none named: the identity of events without datasets is as it always was
    return [f"{d.get('namespace')}/{d.get('name')}" for d in datasets if isinstance(d, dict)]


def _facet_producer(ev: dict[str, Any]) -> str | None:
    """The ``_producer`` of the event's first facet when it is not the event's producer (openlineage-python's
    facets name the client library, the event the application): regenerated facets get it, the patch need not
    repeat it for each."""
    for facet in _all_facets(ev):
        found = facet.get("_producer")
        if isinstance(found, str):
            return None if found == ev.get("producer") else found
    return None


def _all_facets(ev: dict[str, Any]) -> Iterator[dict[str, Any]]:
    owners = [ev.get("run"), ev.get("job"), ev.get("dataset"), *(ev.get("inputs") or []), *(ev.get("outputs") or [])]
    for owner in owners:
        facets = owner.get("facets") if isinstance(owner, dict) else None
        if isinstance(facets, dict):
            yield from (f for f in facets.values() if isinstance(f, dict))


def _object(parent: dict[str, Any], key: str, where: str = "$", *, required: bool = True) -> dict[str, Any]:
    value = parent.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise TranslationError(f"{where}.{key}", f"got {type(value).__name__}; expected an object")
    return value


def _text(parent: dict[str, Any], key: str, where: str) -> str:
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        raise TranslationError(f"{where}.{key}", f"got {value!r}; expected a non-empty string")
    return value


def _facet(owner: dict[str, Any], name: str) -> dict[str, Any]:
    facet = (owner.get("facets") or {}).get(name)
    return facet if isinstance(facet, dict) else {}


def _event_time(text: Any) -> dt.datetime:
    if not isinstance(text, str):
        raise TranslationError("$.eventTime", f"got {text!r}; expected an ISO 8601 date-time")
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise TranslationError("$.eventTime", f"got {text!r}; expected an ISO 8601 date-time ({exc})") from exc
    # A time without an offset (the spec asks for one) is read as UTC, as Marquez reads it.
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def _producer(uri: Any) -> Producer:
    if not isinstance(uri, str) or not uri:
        raise TranslationError("$.producer", f"got {uri!r}; expected the producer's URI")
    version = _VERSIONS.get(uri)
    if version is None:
        found = _VERSION.search(uri)
        version = found.group(1) if found else ""
        if len(_VERSIONS) < 1024:  # a few producers send to one receiver: their URIs, not one per event
            _VERSIONS[uri] = version
    return {"name": uri, "version": version, "host": ""}


def _ref(run: Any, job: Any) -> RunRef | None:
    if not isinstance(run, dict) or not isinstance(job, dict):
        return None
    run_id, namespace, name = run.get("runId"), job.get("namespace"), job.get("name")
    if not (isinstance(run_id, str) and isinstance(namespace, str) and isinstance(name, str)):
        return None
    return {"job_namespace": namespace, "job_name": name, "run_id": run_id}


def _parents(run_facets: dict[str, Any]) -> tuple[RunRef | None, RunRef | None]:
    parent = run_facets.get("parent")
    if not isinstance(parent, dict):
        return None, None
    root = parent.get("root")
    return (_ref(parent.get("run"), parent.get("job")),
            _ref(root.get("run"), root.get("job")) if isinstance(root, dict) else None)


def _error(run_facets: dict[str, Any]) -> ErrorInfo | None:
    facet = run_facets.get("errorMessage")
    if not isinstance(facet, dict) or not isinstance(facet.get("message"), str):
        return None
    stack = facet.get("stackTrace")
    # The facet names the language, not the class: it is the error_class (a message often starts with the class).
    return {"error_class": str(facet.get("programmingLanguage") or ""), "message": facet["message"],
            "stack_trace": stack if isinstance(stack, str) else None}


def _spec(job: dict[str, Any], run_facets: dict[str, Any]) -> JobSpec:
    found = run_facets.get("processing_engine")
    engine: dict[str, Any] = found if isinstance(found, dict) else {}
    job_type = _facet(job, "jobType")
    integration = job_type.get("integration")
    sql = _facet(job, "sql").get("query")
    return job_spec(
        application_name=job["name"],
        engine_version=str(engine.get("version") or ""),
        engine=str(engine.get("name") or (integration or "openlineage")).lower(),
        job_type="STREAMING" if job_type.get("processingType") == "STREAMING" else "BATCH",
        sql=sql if isinstance(sql, str) else None,
        tags=_tags(job, job_type))


def _tags(job: dict[str, Any], job_type: dict[str, Any]) -> dict[str, str]:
    """The spec's tags: the job's ``tags`` facet, its ``ownership`` (``owner`` = the names, comma-separated) and
    its ``jobType`` (``openlineage.integration``, ``openlineage.jobType``)."""
    tags = {tag["key"]: str(tag.get("value", "")) for tag in _facet(job, "tags").get("tags") or []
            if isinstance(tag, dict) and isinstance(tag.get("key"), str)}
    owners = _owners(job)
    if owners:
        tags["owner"] = ",".join(owners)
    tags.update({f"openlineage.{key}": job_type[key] for key in ("integration", "jobType")
                 if isinstance(job_type.get(key), str)})
    return tags


def _owners(owner: dict[str, Any]) -> list[str]:
    return [o["name"] for o in _facet(owner, "ownership").get("owners") or []
            if isinstance(o, dict) and isinstance(o.get("name"), str)]


def _objects(items: Any) -> list[dict[str, Any]]:
    """The objects of a JSON list (none when it is absent)."""
    return [i for i in items or () if isinstance(i, dict)]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _schema_field(f: dict[str, Any]) -> SchemaField:
    return {"name": str(f.get("name", "")), "type": str(f.get("type") or ""), "nullable": True,
            "description": f["description"] if isinstance(f.get("description"), str) else None,
            "fields": [_schema_field(c) for c in f.get("fields") or [] if isinstance(c, dict)]}


def _dataset(d: dict[str, Any], where: str) -> Dataset:
    if not isinstance(d, dict):
        raise TranslationError(where, f"got {type(d).__name__}; expected a dataset object")
    schema, symlinks, storage = _facet(d, "schema"), _facet(d, "symlinks"), _facet(d, "storage")
    statistics = (d.get("outputFacets") or {}).get("outputStatistics") or {}
    layer = _str(storage.get("storageLayer"))
    change, before = _lifecycle(_facet(d, "lifecycleStateChange"))
    return dataset(
        _text(d, "namespace", where), _text(d, "name", where),
        fields=[_schema_field(f) for f in _objects(schema.get("fields"))],
        symlinks=[{"namespace": str(s.get("namespace", "")), "name": str(s.get("name", "")),
                   "type": str(s.get("type", ""))} for s in _objects(symlinks.get("identifiers"))],
        format=_str(storage.get("fileFormat")), properties={} if layer is None else {"storage_layer": layer},
        dataset_type=_str(_facet(d, "datasetType").get("datasetType")),
        lifecycle_change=change, previous_identifier=before,
        row_count=_count(statistics.get("rowCount")), byte_count=_count(statistics.get("size")))


def _lifecycle(facet: dict[str, Any]) -> tuple[str | None, DatasetId | None]:
    """The ``lifecycleStateChange`` facet's change, and the name before a RENAME."""
    before = facet.get("previousIdentifier")
    return _str(facet.get("lifecycleStateChange")), {
        "namespace": str(before.get("namespace", "")), "name": str(before.get("name", ""))} if isinstance(
        before, dict) else None


def _count(value: Any) -> int | None:
    # a count past an Avro long (valid JSON, not a count any system reaches) stays in the patch only
    return value if type(value) is int and 0 <= value <= _MAX_LONG else None


def _column_lineage(d: dict[str, Any], where: str) -> list[ColumnLineage]:
    fields = _facet(d, "columnLineage").get("fields", {})
    if not isinstance(fields, dict):
        raise TranslationError(f"{where}.facets.columnLineage.fields", "expected an object of output fields")
    return [{"namespace": d["namespace"], "name": d["name"], "field": name,
             "inputs": [_input_field(i) for i in spec.get("inputFields") or [] if isinstance(i, dict)]}
            for name, spec in fields.items() if isinstance(spec, dict)]


def _input_field(i: dict[str, Any]) -> InputField:
    return {"namespace": str(i.get("namespace", "")), "name": str(i.get("name", "")),
            "field": str(i.get("field", "")),
            "transformations": [_transformation(t) for t in i.get("transformations") or [] if isinstance(t, dict)]}


def _transformation(t: dict[str, Any]) -> Transformation:
    kind = t.get("type")
    return {"type": kind if kind in ("DIRECT", "INDIRECT") else "UNKNOWN",
            "subtype": str(t.get("subtype") or ""), "description": str(t.get("description") or ""),
            "masking": t.get("masking") is True}
