"""lineagewire events -> OpenLineage RunEvents (openlineage-python's ``event_v2`` model).

The translation is a pure function of the event: the same event always gives
the same OpenLineage events, field for field (run ids are derived, times come
from the event, nothing is read from the clock). That is what makes
redelivery and replay harmless: the backend sees the same run again.

Runs
----
* The **application run** (``JobCreatedEvent``, ``JobStatusChangedEvent``) is
  the OpenLineage job ``header.job_namespace`` / ``header.job_name`` with run
  id ``ol_run_id(namespace, name, header.run_id)``: the run id itself when it
  is a UUID, else a UUIDv5 of ``namespace/name/run_id``.
* Each **Spark action** (``ActionLineageEvent``) is its own OpenLineage run of
  the job ``action_job_name(...)`` (``<job>.<plan node>.<output>``); its run id is a UUIDv5 of the
  application run id and ``action_id``, and its parent facet points at
  ``header.parent_run`` (the application run), or at the run named by the
  header when no parent is set.
* **Scheduled refreshes** carry ``header.schedule``: every event of such a run
  gets ``nominalTime`` (the schedule's nominal time) and, when
  ``header.parent_run`` names the workflow, the parent facet.
* ``RefreshCommand`` and ``CancelRefresh`` are commands, not runs: they give
  no OpenLineage event (the refresh shows up through the runner's own events).
* Events that came in as OpenLineage (``header.openlineage`` set, by ``lineagewire
  ingest openlineage``) go out as the OpenLineage event they came as: see ``ingested``.

Status table (see also docs/consumers.md)
-----------------------------------------
See ``EVENT_TYPE_OF_STATUS`` and ``EVENT_TYPE_OF_ACTION``.
"""

from __future__ import annotations

import copy
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from lineagewire.exceptions import MissingExtraError
from lineagewire.schemas import kind_of
from lineagewire.schemas.naming import action_job_name

try:
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.generated import (
        base_subset_dataset,
        column_lineage_dataset,
        dataset_type_dataset,
        datasource_dataset,
        error_message_run,
        job_type_job,
        lifecycle_state_change_dataset,
        nominal_time_run,
        output_statistics_output_dataset,
        parent_run,
        processing_engine_run,
        schema_dataset,
        sql_job,
        storage_dataset,
        symlinks_dataset,
    )
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("openlineage-python", "openlineage", "The OpenLineage service") from exc

from lineagewire import __version__

from .exceptions import TranslationError
from .ingested import ingested_events
from .render import Renderer

__all__ = [
    "EVENT_TYPE_OF_ACTION",
    "EVENT_TYPE_OF_STATUS",
    "LINEAGEWIRE_RUN_NAMESPACE",
    "PRODUCER",
    "Translator",
    "action_job_name",
    "action_run_id",
    "ol_run_id",
]

#: The ``producer`` URI of every event this translator builds.
PRODUCER = f"https://github.com/lineagewire/lineagewire/tree/v{__version__}/consumers/openlineage"

#: UUIDv5 namespace of derived run ids (fixed forever: changing it changes every run id).
LINEAGEWIRE_RUN_NAMESPACE = uuid.UUID("6f1c8a52-3b0e-5d1e-9a57-1e2f0c4b7d31")

#: Flink job status -> OpenLineage event type.
EVENT_TYPE_OF_STATUS: dict[str, RunState] = {
    "INITIALIZING": RunState.START,
    "CREATED": RunState.START,
    "RUNNING": RunState.RUNNING,
    "RESTARTING": RunState.RUNNING,
    "RECONCILING": RunState.RUNNING,
    "FAILING": RunState.RUNNING,
    "CANCELLING": RunState.RUNNING,
    "FINISHED": RunState.COMPLETE,
    "FAILED": RunState.FAIL,
    "CANCELED": RunState.ABORT,
    "SUSPENDED": RunState.OTHER,
    "UNKNOWN": RunState.OTHER,
}

#: Spark action status -> OpenLineage event type (for the last part of an action; earlier parts are RUNNING).
EVENT_TYPE_OF_ACTION: dict[str, RunState] = {
    "RUNNING": RunState.RUNNING,
    "SUCCEEDED": RunState.COMPLETE,
    "FAILED": RunState.FAIL,
    "UNKNOWN": RunState.OTHER,
}

#: Variants of one dataset name kept in the facet cache (different schemas, operations, column lineage).
_VARIANTS = 4

#: The contract's counts of what an action wrote (v2): the ``outputStatistics`` facet, never the cached ones.
_COUNTS = frozenset({"row_count", "byte_count"})
_LIFECYCLE = {s.value: s for s in lifecycle_state_change_dataset.LifecycleStateChange}
_JVM_PREFIXES = ("java.", "javax.", "scala.", "org.", "com.", "io.", "net.")


def ol_run_id(namespace: str, name: str, run_id: str) -> str:
    """The OpenLineage run id of a lineagewire run: the run id when it is a UUID, else a UUIDv5 of it."""
    try:
        return str(uuid.UUID(run_id))
    except (ValueError, TypeError, AttributeError):
        return str(uuid.uuid5(LINEAGEWIRE_RUN_NAMESPACE, f"{namespace}/{name}/{run_id}"))


def action_run_id(namespace: str, name: str, run_id: str, action_id: str) -> str:
    """The OpenLineage run id of one Spark action of a run (UUIDv5 of the run and the action id)."""
    return str(uuid.uuid5(LINEAGEWIRE_RUN_NAMESPACE, f"{ol_run_id(namespace, name, run_id)}/action/{action_id}"))


def _time(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Translator:
    """Builds OpenLineage RunEvents from decoded lineagewire events.

    ``translate(event)`` returns a list (empty for commands) and raises
    ``TranslationError`` naming the field when the event cannot be mapped.

    Events are built with openlineage-python's constructors (its validators run). Dataset, parent and
    job-type facets are cached (``cache_size`` entries) and shared by the events that use them: treat
    the returned events' facet objects as read-only. ``renderer`` renders events to JSON reusing the
    rendering of those shared facets (``to_json``); the Translator changes nothing process-wide.
    """

    def __init__(self, *, producer: str = PRODUCER, cache_size: int = 4096) -> None:
        self.producer = producer
        # A producer that is not a URI fails here, once, instead of on every event.
        RunEvent(eventType=RunState.OTHER, eventTime="2000-01-01T00:00:00.000Z", run=Run(runId=str(uuid.UUID(int=0))),
                 job=Job(namespace="lineagewire", name="producer-check"), producer=producer)
        self._cache_size = cache_size
        self.renderer = Renderer(max_shared=4 * cache_size)
        self._facet_cache: dict[tuple[Any, ...], Any] = {}
        self._run_ids: dict[tuple[str, ...], str] = {}
        self._by_kind: dict[str, Callable[[dict[str, Any]], list[RunEvent]]] = {
            "JobCreatedEvent": self._job_created,
            "JobStatusChangedEvent": self._status_changed,
            "ActionLineageEvent": self._action,
            "RefreshCommand": lambda e: [],
            "CancelRefresh": lambda e: [],
            "RefreshHeld": lambda e: [],
        }

    def to_json(self, event: RunEvent) -> str:
        """``event`` as ``Serde.to_json`` renders it (see ``render.Renderer``)."""
        return self.renderer.to_json(event)

    def translate(self, event: dict[str, Any]) -> list[RunEvent]:
        try:
            hdr, kind = event["header"], kind_of(event)
        except (KeyError, TypeError, AttributeError) as exc:
            raise TranslationError(f"event has no header.schema_name ({exc!r}); expected a decoded lineagewire "
                                   "event") from exc
        if hdr.get("openlineage") is not None:
            return ingested_events(event)
        build = self._by_kind.get(kind)
        if build is None:
            raise TranslationError(f"header.schema_name={hdr.get('schema_name')!r}: no OpenLineage mapping; "
                                   f"expected one of {', '.join(self._by_kind)}")
        try:
            return build(event)
        except TranslationError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TranslationError(f"{kind} {hdr.get('event_id')}: cannot translate to OpenLineage: "
                                   f"{type(exc).__name__}: {exc}") from exc

    # -- kinds -------------------------------------------------------------------------------

    def _job_created(self, e: dict[str, Any]) -> list[RunEvent]:
        hdr, spec, lineage = e["header"], e["spec"], e["lineage"]
        state = EVENT_TYPE_OF_STATUS.get(e["status"], RunState.START)
        run_facets = self._run_facets(hdr)
        key = ("processing_engine", spec["engine_version"], spec["engine"])
        engine = self._facet_cache.get(key)
        if engine is None:
            engine = processing_engine_run.ProcessingEngineRunFacet(
                version=spec["engine_version"], name=_engine_name(spec["engine"]),
                openlineageAdapterVersion=__version__, producer=self.producer)
            self._remember(key, engine, engine)
        run_facets["processing_engine"] = engine
        job_facets: dict[str, Any] = {"jobType": self._job_type(spec["job_type"], "APPLICATION")}
        if spec.get("sql"):
            job_facets["sql"] = self._sql(spec["sql"])
        inputs = [self._input(d) for d in lineage["sources"]]
        outputs = [self._output(d, lineage["column_lineage"]) for d in lineage["sinks"]]
        return [self._event(hdr, state, hdr["event_time"], self._app_run_id(hdr), hdr["job_name"],
                            run_facets, job_facets, inputs, outputs)]

    def _status_changed(self, e: dict[str, Any]) -> list[RunEvent]:
        hdr, status = e["header"], e["new_status"]
        state = EVENT_TYPE_OF_STATUS.get(status)
        if state is None:
            raise TranslationError(f"new_status={status!r}: expected one of {', '.join(EVENT_TYPE_OF_STATUS)}")
        run_facets = self._run_facets(hdr)
        if e.get("error"):
            run_facets["errorMessage"] = self._error(e["error"])
        return [self._event(hdr, state, e["transition_time"], self._app_run_id(hdr), hdr["job_name"], run_facets,
                            {}, [], [])]

    def _action(self, e: dict[str, Any]) -> list[RunEvent]:
        hdr = e["header"]
        last = e["part"] >= e["parts"] - 1
        state = EVENT_TYPE_OF_ACTION.get(e["action_status"], RunState.OTHER) if last else RunState.RUNNING
        parent = hdr.get("parent_run") or {"job_namespace": hdr["job_namespace"], "job_name": hdr["job_name"],
                                           "run_id": hdr["run_id"]}
        run_facets = self._run_facets(hdr, parent=parent)
        if e.get("error"):
            run_facets["errorMessage"] = self._error(e["error"])
        job_facets: dict[str, Any] = {"jobType": self._job_type("BATCH", "SQL_JOB")}
        if e.get("sql"):
            job_facets["sql"] = self._sql(e["sql"])
        inputs = [self._input(d) for d in e["inputs"]]
        outputs = [self._output(d, e["column_lineage"]) for d in e["outputs"]]
        key = (hdr["job_namespace"], hdr["job_name"], hdr["run_id"], e["action_id"])
        run_id = self._run_ids.get(key)
        if run_id is None:
            run_id = self._run_id(key, action_run_id(*key))
        when = hdr["event_time"]
        job = action_job_name(hdr["job_name"], e["action_name"], e.get("plan_node"),
                              e["outputs"][0]["name"] if e["outputs"] else None)
        return [self._event(hdr, state, when, run_id, job, run_facets, job_facets, inputs, outputs)]

    # -- pieces ------------------------------------------------------------------------------

    def _event(self, hdr: dict[str, Any], state: RunState, when: dt.datetime, run_id: str, job_name: str,
               run_facets: dict[str, Any], job_facets: dict[str, Any], inputs: list[InputDataset],
               outputs: list[OutputDataset]) -> RunEvent:
        return RunEvent(
            eventType=state,
            eventTime=_time(when),
            run=Run(runId=run_id, facets=run_facets),
            job=Job(namespace=hdr["job_namespace"], name=job_name, facets=job_facets),
            inputs=inputs,
            outputs=outputs,
            producer=self.producer,
        )

    def _app_run_id(self, hdr: dict[str, Any]) -> str:
        key = (hdr["job_namespace"], hdr["job_name"], hdr["run_id"])
        run_id = self._run_ids.get(key)
        return run_id if run_id is not None else self._run_id(key, ol_run_id(*key))

    def _run_id(self, key: tuple[str, ...], run_id: str) -> str:
        # A run's events come one after another: its run ids (a UUID parse, a UUIDv5 and their texts, several
        # µs per event) are kept for the most recent runs and actions.
        if len(self._run_ids) >= self._cache_size:
            self._run_ids.pop(next(iter(self._run_ids)))
        self._run_ids[key] = run_id
        return run_id

    def _run_facets(self, hdr: dict[str, Any], parent: dict[str, Any] | None = None) -> dict[str, Any]:
        facets: dict[str, Any] = {}
        parent = parent or hdr.get("parent_run")
        if parent:
            # header.root_parent_run (contract v2): an orchestrator's DAG run above the parent, the facet's root.
            root = hdr.get("root_parent_run")
            key = ("parent", parent["job_namespace"], parent["job_name"], parent["run_id"],
                   *((root["job_namespace"], root["job_name"], root["run_id"]) if root else ()))
            facet = self._facet_cache.get(key)
            if facet is None:
                facet = parent_run.ParentRunFacet(
                    run=parent_run.Run(runId=ol_run_id(parent["job_namespace"], parent["job_name"],
                                                       parent["run_id"])),
                    job=parent_run.Job(namespace=parent["job_namespace"], name=parent["job_name"]),
                    root=parent_run.Root(
                        run=parent_run.RootRun(runId=ol_run_id(root["job_namespace"], root["job_name"],
                                                               root["run_id"])),
                        job=parent_run.RootJob(namespace=root["job_namespace"], name=root["job_name"]),
                    ) if root else None,
                    producer=self.producer)
                self._remember(key, facet, facet)
            facets["parent"] = facet
        schedule = hdr.get("schedule")
        if schedule:
            facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
                nominalStartTime=_time(schedule["nominal_time"]), producer=self.producer)
        return facets

    def _job_type(self, processing: str, job_type: str) -> job_type_job.JobTypeJobFacet:
        key = ("jobType", processing, job_type)
        facet = self._facet_cache.get(key)
        if facet is None:
            facet = job_type_job.JobTypeJobFacet(
                processingType="STREAMING" if processing == "STREAMING" else "BATCH", integration="SPARK",
                jobType=job_type, producer=self.producer)
            self._remember(key, facet, facet)
        return facet

    def _sql(self, query: str) -> sql_job.SQLJobFacet:
        # A job runs the same statements run after run.
        key = ("sql", query)
        facet = self._facet_cache.get(key)
        if facet is None:
            facet = sql_job.SQLJobFacet(query=query, dialect="spark", producer=self.producer)
            self._remember(key, facet, facet)
        return facet

    def _error(self, err: dict[str, Any]) -> error_message_run.ErrorMessageRunFacet:
        cls = err.get("error_class") or ""
        message = f"{cls}: {err['message']}" if cls and not err["message"].startswith(cls) else err["message"]
        return error_message_run.ErrorMessageRunFacet(
            message=message, programmingLanguage="JVM" if cls.startswith(_JVM_PREFIXES) else "PYTHON",
            stackTrace=err.get("stack_trace"), producer=self.producer)

    def _dataset_facets(self, d: dict[str, Any]) -> dict[str, Any]:
        facets: dict[str, Any] = {
            "dataSource": datasource_dataset.DatasourceDatasetFacet(name=d["namespace"],
                                                                    uri=_uri(d["namespace"]),
                                                                    producer=self.producer)}
        if d["fields"]:
            facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=[self._field(f) for f in d["fields"]],
                                                                 producer=self.producer)
        if d["symlinks"]:
            facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[symlinks_dataset.Identifier(namespace=s["namespace"], name=s["name"], type=s["type"])
                             for s in d["symlinks"]], producer=self.producer)
        if d.get("format"):
            facets["storage"] = storage_dataset.StorageDatasetFacet(
                storageLayer=d["properties"].get("storage_layer", "file"), fileFormat=d["format"],
                producer=self.producer)
        if d.get("dataset_type"):  # VIEW (contract v2); absent on tables and files
            facets["datasetType"] = dataset_type_dataset.DatasetTypeDatasetFacet(datasetType=d["dataset_type"],
                                                                                producer=self.producer)
        lifecycle = self._lifecycle(d)
        if lifecycle is not None:
            facets["lifecycleStateChange"] = lifecycle
        return facets

    def _lifecycle(self, d: dict[str, Any]) -> lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet | None:
        """The dataset's ``lifecycleStateChange`` facet: its ``lifecycle_change`` (contract v2), with the name before
        a RENAME as ``previousIdentifier``; an event without one keeps the older reading of ``operation`` when it
        names a change (OVERWRITE, CREATE...)."""
        change = d.get("lifecycle_change")
        if change is None:
            op = (d.get("operation") or "").upper()
            if op not in _LIFECYCLE:
                return None
            change = op
        state = _LIFECYCLE.get(change)
        if state is None:
            # The contract's field is an open string: a change this version does not know (a newer emitter's)
            # gives no facet rather than losing the whole event's lineage.
            return None
        before = d.get("previous_identifier")
        return lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=state, producer=self.producer,
            previousIdentifier=lifecycle_state_change_dataset.PreviousIdentifier(
                namespace=before["namespace"], name=before["name"]) if before else None)

    def _field(self, f: dict[str, Any]) -> schema_dataset.SchemaDatasetFacetFields:
        return schema_dataset.SchemaDatasetFacetFields(
            name=f["name"], type=f["type"], description=f.get("description"),
            fields=[self._field(c) for c in f.get("fields") or []])

    def _input(self, d: dict[str, Any]) -> InputDataset:
        facets = self._dataset_cache("input", d, None)
        if d["partition_values"]:  # the partitions (or dated folders) read: the spec's subset facet
            return InputDataset(namespace=d["namespace"], name=d["name"], facets=dict(facets), inputFacets={
                "subset": base_subset_dataset.InputSubsetInputDatasetFacet(
                    inputCondition=_partitions(d["partition_values"]), producer=self.producer)})
        return InputDataset(namespace=d["namespace"], name=d["name"], facets=dict(facets))

    def _output(self, d: dict[str, Any], column_lineage: list[dict[str, Any]]) -> OutputDataset:
        mine = [cl for cl in column_lineage if cl["namespace"] == d["namespace"] and cl["name"] == d["name"]]
        statistics = self._statistics(d)
        if statistics is not None:
            # Counts differ on every run: the cached facets are matched on the dataset without them.
            d = {k: v for k, v in d.items() if k not in _COUNTS}
        facets = self._dataset_cache("output", d, mine)
        output_facets: dict[str, Any] = {}
        if d["partition_values"]:  # the partitions (or dated folder) written
            output_facets["subset"] = base_subset_dataset.OutputSubsetOutputDatasetFacet(
                outputCondition=_partitions(d["partition_values"]), producer=self.producer)
        if statistics is not None:
            output_facets["outputStatistics"] = statistics
        if output_facets:
            return OutputDataset(namespace=d["namespace"], name=d["name"], facets=dict(facets),
                                 outputFacets=output_facets)
        return OutputDataset(namespace=d["namespace"], name=d["name"], facets=dict(facets))

    def _statistics(self, d: dict[str, Any]
                    ) -> output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet | None:
        """The ``outputStatistics`` facet of the rows and bytes the output was written (contract v2, from Spark's
        write metrics), or None when Spark counted neither."""
        rows, size = d.get("row_count"), d.get("byte_count")
        if rows is None and size is None:
            return None
        return output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=rows, size=size,
                                                                                   producer=self.producer)

    def _dataset_cache(self, role: str, d: dict[str, Any], mine: list[dict[str, Any]] | None) -> dict[str, Any]:
        # Keyed by the dataset's name, and matched on its whole content (schema, symlinks, operation, column
        # lineage...): comparing decoded dicts costs far less than rendering them as a key, and a name that
        # comes with different content (two jobs writing one table, a schema change) keeps a few variants.
        key = (role, d["namespace"], d["name"])
        variants = self._facet_cache.get(key)
        if variants is not None:
            for seen, seen_mine, facets in variants:
                if seen == d and seen_mine == mine:
                    return facets
        facets = self._dataset_facets(d) if mine is None else self._output_facets(d, mine)
        # A copy: the cache must not change when the caller changes its event afterwards.
        entry = (copy.deepcopy(d), copy.deepcopy(mine), facets)
        if variants is None:
            self._remember(key, [entry], facets)
        else:
            variants.insert(0, entry)
            del variants[_VARIANTS:]
            self._freeze(facets)
        return facets

    def _remember(self, key: Any, value: Any, facets: Any) -> Any:
        # Facets are a pure function of the dataset, and a run repeats its datasets in every action:
        # building the attrs facet objects is the costly part of translating, so keep recent ones.
        if len(self._facet_cache) >= self._cache_size:
            self._facet_cache.pop(next(iter(self._facet_cache)))
        self._facet_cache[key] = value
        self._freeze(facets)
        return value

    def _freeze(self, facets: Any) -> None:
        # Cached facets are shared by every event that uses them and never changed: rendered once (render.py).
        for facet in facets.values() if isinstance(facets, dict) else (facets,):
            self.renderer.share(facet)

    def _output_facets(self, d: dict[str, Any], column_lineage: list[dict[str, Any]]) -> dict[str, Any]:
        facets = self._dataset_facets(d)
        fields: dict[str, column_lineage_dataset.Fields] = {}
        for cl in column_lineage:
            inputs = [column_lineage_dataset.InputField(
                namespace=i["namespace"], name=i["name"], field=i["field"],
                transformations=[column_lineage_dataset.Transformation(
                    type=t["type"], subtype=t["subtype"] or None, description=t["description"] or None,
                    masking=t["masking"]) for t in i["transformations"]])
                for i in cl["inputs"]]
            if cl["field"] in fields:
                fields[cl["field"]].inputFields.extend(inputs)
            else:
                fields[cl["field"]] = column_lineage_dataset.Fields(inputFields=inputs)
        if fields:
            facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields,
                                                                                       producer=self.producer)
        return facets


def _partitions(values: dict[str, str]) -> base_subset_dataset.PartitionSubsetCondition:
    """A dataset's partition values as the subset facet's partition condition: one partition of those
    dimensions, or one for each of the values of a key read together (``date=20261128,20261129``)."""
    keys = list(values)
    columns = [values[k].split(",") for k in keys]
    if all(len(c) == 1 for c in columns):
        return base_subset_dataset.PartitionSubsetCondition(partitions=[base_subset_dataset.Partition(
            dimensions=dict(values))])
    width = max(len(c) for c in columns)
    return base_subset_dataset.PartitionSubsetCondition(partitions=[base_subset_dataset.Partition(
        dimensions={k: c[min(i, len(c) - 1)] for k, c in zip(keys, columns, strict=True)})
        for i in range(width)])


def _engine_name(engine: str) -> str:
    return "spark" if engine.lower() == "spark" else engine


def _uri(namespace: str) -> str:
    # The dataSource facet's uri must be a URI; namespaces such as "file" or "hive://host:9083" mostly are.
    if namespace == "file":
        return "file:///"
    return namespace if "://" in namespace else f"{quote(namespace, safe='')}:"
