"""lineagewire events -> DataHub metadata change proposals, built from acryl-datahub's generated aspect classes.

A pure function of the event (and the configuration): URNs are derived from
job, run and action ids, times come from the event, nothing from the clock,
so the same events always give the same proposals and a replay into DataHub
(which upserts by URN and aspect) is harmless.

The model follows DataHub's own Spark agent (acryl-spark-lineage):

* **DataFlow** ``urn:li:dataFlow:(spark,<job name>,<cluster>)`` per Spark
  application (``dataFlowInfo``, ``status``), from ``JobCreatedEvent``.
* **DataJob** per Spark action, ``<job>.<plan node>.<output>`` in that flow, with
  ``dataJobInfo``, ``status`` and ``dataJobInputOutput``: ``inputDatasetEdges`` /
  ``outputDatasetEdges``, ``inputDatasetFields`` / ``outputDatasetFields`` and
  ``fineGrainedLineages`` from the column lineage. DataHub has no direct/indirect
  flag: each output column gets one fine-grained lineage per kind, whose
  ``transformOperation`` is ``DIRECT:<subtypes>`` or ``INDIRECT:<subtypes>``
  (``include_indirect: false`` drops the indirect ones, as the agent does by default).
  Lineage already known when the run is created (a refresh's query) gives a DataJob
  named after the job itself.
* **DataProcessInstance** per application run (``parentTemplate`` = the DataFlow,
  ``parentInstance`` = the parent run's instance) and per action run (``parentTemplate`` =
  its DataJob, ``parentInstance`` = the application run), with
  ``dataProcessInstanceProperties``, ``...Relationships``, ``...Input``/``...Output`` and
  ``dataProcessInstanceRunEvent``: RUNNING -> STARTED; FINISHED -> COMPLETE/SUCCESS,
  FAILED -> COMPLETE/FAILURE, CANCELED -> COMPLETE/SKIPPED.
* **Airflow** (``parents.py``): an application run whose parent is an Airflow task run (the
  ``parent_run``/``root_parent_run`` Airflow's OpenLineage provider gives) has ``parentInstance``
  ``urn:li:dataProcessInstance:<task's OpenLineage run id>`` (DataHub's OpenLineage converter's name for
  that run) and ``airflow.*`` properties; its DataJobs get an ``inputDatajobEdges`` edge to the task's
  DataJob ``urn:li:dataJob:(urn:li:dataFlow:(airflow,<dag_id>,<orchestrator_cluster>),<task_id>)``, as
  DataHub's Airflow plugin names it (its action DataJobs by a PATCH, while this process remembers the run).
* **Datasets** (``datasets.DatasetNamer``): ``status``, ``schemaMetadata`` from the
  schema fields, and on outputs ``upstreamLineage`` with the fine-grained lineage. A view
  (``views``) also gets ``subTypes`` [View] and, as an output, ``viewProperties``.
* **Lifecycle changes** (``lifecycle``): an output's ``lifecycle_change`` gives an ``operation``; a DROP
  soft-deletes the dataset (``status`` removed), a RENAME soft-deletes the old URN and links both names.
* **Refreshes** (``header.schedule`` set): the scheduler's workflow is the DataFlow
  ``urn:li:dataFlow:(lineagewire,<workflow id>,<cluster>)`` and the refresh run its
  DataProcessInstance (type BATCH_SCHEDULED) with ``nominalTime`` in its properties
  and the attempt in its run events. ``RefreshCommand`` gives the workflow's DataFlow.

Column lineage split over several parts of one action (``part``/``parts``): part 0
upserts the DataJob's and datasets' lineage aspects, later parts add their
fine-grained lineage with PATCH proposals (acryl-datahub's patch builders), and
the last part gives the run events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from lineagewire.exceptions import MissingExtraError
from lineagewire.schemas import kind_of

try:
    from datahub.metadata.schema_classes import (
        AuditStampClass,
        DataFlowInfoClass,
        DataJobInfoClass,
        DataJobInputOutputClass,
        DataProcessInstanceInputClass,
        DataProcessInstanceOutputClass,
        DataProcessInstancePropertiesClass,
        DataProcessInstanceRelationshipsClass,
        DataProcessInstanceRunEventClass,
        DataProcessInstanceRunResultClass,
        DataProcessRunStatusClass,
        DataProcessTypeClass,
        EdgeClass,
        FineGrainedLineageClass,
        RunResultTypeClass,
        StatusClass,
        SystemMetadataClass,
    )
    from datahub.specific.datajob import DataJobPatchBuilder
    from datahub.specific.dataset import DatasetPatchBuilder
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("acryl-datahub", "datahub", "The DataHub service") from exc

from .config import DataHubConfig
from .datasets import DatasetNamer, schema_metadata
from .exceptions import TranslationError
from .ids import ACTOR, DPI_NAMESPACE, _iso, _ms, _unique, action_job_id, flow_urn, instance_urn, job_urn
from .lifecycle import REMOVED, Lifecycle
from .lineage import at_time, fine_grained, known_urns, of_output, upstream_lineage
from .parents import airflow_task
from .proposals import Aspect, Memo, Proposal, content_key, from_json, proposal, serialise, to_json
from .views import view_aspects

__all__ = ["ACTOR", "DPI_NAMESPACE", "RESULT_OF_STATUS", "Proposal", "Translator", "action_job_id", "instance_urn"]

#: Terminal Flink job status -> (DataHub run result, native result type)
RESULT_OF_STATUS: dict[str, str] = {
    "FINISHED": RunResultTypeClass.SUCCESS,
    "FAILED": RunResultTypeClass.FAILURE,
    "CANCELED": RunResultTypeClass.SKIPPED,
}
_STARTED_STATUSES = frozenset({"RUNNING"})
#: An output's counts of what the action wrote (contract v2) and the run's custom property of each: run
#: properties, not dataset content.
_COUNTS = {"row_count": "rowsWritten", "byte_count": "bytesWritten"}
_STATUS = serialise(StatusClass(removed=False))
#: the run event's default partitionSpec, as acryl-datahub resolves it (once: resolving it costs ~40 µs a time)
_FULL_TABLE = DataProcessInstanceRunEventClass(timestampMillis=0, status=DataProcessRunStatusClass.STARTED
                                               ).partitionSpec
_RESULT_OF_ACTION = {"SUCCEEDED": RunResultTypeClass.SUCCESS, "FAILED": RunResultTypeClass.FAILURE}


class Translator:
    """Builds DataHub proposals from decoded lineagewire events.

    ``translate(event)`` returns a list of proposals (empty when the event carries nothing for
    DataHub) and raises ``TranslationError`` naming the field when the event cannot be mapped.
    """

    def __init__(self, config: DataHubConfig | None = None) -> None:
        self.config = config or DataHubConfig()
        self.names = DatasetNamer(self.config)
        self._memo = Memo()
        self._lifecycle = Lifecycle(self.names, self._memo)
        self._systems = Memo(16)
        self._last_system: tuple[int | None, Any] = (None, None)
        #: application run (namespace, job, run id) -> its Airflow task's DataJob URN, for the run's actions
        self._orchestrated = Memo(4096)
        self._by_kind: dict[str, Callable[[dict[str, Any]], list[Proposal]]] = {
            "JobCreatedEvent": self._job_created,
            "JobStatusChangedEvent": self._status_changed,
            "ActionLineageEvent": self._action,
            "RefreshCommand": self._refresh_command,
            "CancelRefresh": lambda e: [],
            "RefreshHeld": lambda e: [],
        }

    def translate(self, event: dict[str, Any]) -> list[Proposal]:
        try:
            hdr, kind = event["header"], kind_of(event)
        except (KeyError, TypeError, AttributeError) as exc:
            raise TranslationError(f"event has no header.schema_name ({exc!r}); expected a decoded lineagewire "
                                   "event") from exc
        build = self._by_kind.get(kind)
        if build is None:
            raise TranslationError(f"header.schema_name={hdr.get('schema_name')!r}: no DataHub mapping; "
                                   f"expected one of {', '.join(self._by_kind)}")
        try:
            return build(event)
        except TranslationError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, AssertionError) as exc:
            raise TranslationError(f"{kind} {hdr.get('event_id')}: cannot translate to DataHub: "
                                   f"{type(exc).__name__}: {exc}") from exc

    # -- kinds -------------------------------------------------------------------------------

    def _job_created(self, e: dict[str, Any]) -> list[Proposal]:
        hdr, spec, lineage = e["header"], e["spec"], e["lineage"]
        when = _ms(hdr["event_time"])
        out = self._flow(hdr, spec, when)
        flow = self._flow_urn(hdr)
        dpi = self._app_instance(hdr)
        props = {"jobNamespace": hdr["job_namespace"], "jobName": hdr["job_name"], "runId": hdr["run_id"],
                 "engine": spec["engine"], "engineVersion": spec["engine_version"], "jobType": spec["job_type"]}
        for key, value in (("applicationName", spec["application_name"]), ("applicationId", spec["application_id"]),
                           ("master", spec["master"]), ("deployMode", spec["deploy_mode"]),
                           ("parallelism", spec["parallelism"]), ("sql", spec.get("sql"))):
            if value is not None:
                props[key] = str(value)
        props.update({f"conf.{k}": v for k, v in sorted(spec["conf"].items())})
        props.update({f"tag.{k}": v for k, v in sorted(spec["tags"].items())})
        props.update(self._schedule_props(hdr))
        task = airflow_task(hdr, self.config.orchestrator_cluster, self.config.orchestrator_platform_instance)
        if task is not None:
            props.update({"airflow.dagId": task.dag_id, "airflow.taskId": task.task_id, "airflow.taskRunId":
                          task.run_id, "airflow.dataJob": task.job})
            self._orchestrated.get((hdr["job_namespace"], hdr["job_name"], hdr["run_id"]), lambda: task.job)
        kind = DataProcessTypeClass.STREAMING if spec["job_type"] == "STREAMING" else DataProcessTypeClass.BATCH_AD_HOC
        if hdr.get("schedule"):
            kind = DataProcessTypeClass.BATCH_SCHEDULED
        out.append(self._mcp(dpi, serialise(DataProcessInstancePropertiesClass(
            name=hdr["run_id"], created=AuditStampClass(time=when, actor=ACTOR), customProperties=props,
            type=kind)), when))
        parent = hdr.get("parent_run")
        parent_dpi = None if parent is None or hdr.get("schedule") else task.instance if task else instance_urn(
            parent["job_namespace"], parent["job_name"], parent["run_id"])
        out.append(self._mcp(dpi, self._memo.get(("relationships", flow, parent_dpi), lambda: serialise(
            DataProcessInstanceRelationshipsClass(upstreamInstances=[], parentTemplate=flow,
                                                  parentInstance=parent_dpi))), when))
        if lineage["sources"] or lineage["sinks"]:
            job = job_urn(flow, hdr["job_name"])
            proposals, io = self._data_job(job, flow, hdr["job_name"], lineage["sources"], lineage["sinks"],
                                           lineage["column_lineage"], when,
                                           {"sql": spec["sql"]} if spec.get("sql") else {},
                                           relations=lineage["relations"], upstream_jobs=(task.job,) if task else ())
            out += proposals
            out += [self._mcp(dpi, a, when) for a in io]
            out += self._changes(lineage["sinks"], {"runId": hdr["run_id"]}, when)
        if e["status"] in _STARTED_STATUSES:
            out.append(self._run_event(dpi, hdr, when, DataProcessRunStatusClass.STARTED))
        return out

    def _status_changed(self, e: dict[str, Any]) -> list[Proposal]:
        hdr, status = e["header"], e["new_status"]
        when = _ms(e["transition_time"])
        dpi = self._app_instance(hdr)
        if status in _STARTED_STATUSES:
            return [self._run_event(dpi, hdr, when, DataProcessRunStatusClass.STARTED, attempt=e["restarts"] + 1)]
        result = RESULT_OF_STATUS.get(status)
        if result is None:
            return []  # CREATED, RESTARTING, FAILING...: no DataHub run event for in-between states
        return [self._run_event(dpi, hdr, when, DataProcessRunStatusClass.COMPLETE, attempt=e["restarts"] + 1,
                                result=result, native=status, duration=e.get("duration_ms"))]

    def _action(self, e: dict[str, Any]) -> list[Proposal]:
        hdr = e["header"]
        when = _ms(hdr["event_time"])
        flow = self._flow_urn(hdr)
        first_output = e["outputs"][0]["name"] if e["outputs"] else None
        job_id = action_job_id(hdr["job_name"], e["action_name"], e.get("plan_node"), first_output)
        job = job_urn(flow, job_id)
        if e["part"] > 0:
            return self._later_part(job, e, when)
        props = {"actionName": e["action_name"], "lineageComplete": str(e["lineage_complete"]).lower()}
        if e.get("plan_node"):
            props["planNode"] = e["plan_node"]
        if e.get("sql"):
            props["sql"] = e["sql"]
        outputs, written = _counts(e["outputs"])
        out, io = self._data_job(job, flow, job_id, e["inputs"], outputs, e["column_lineage"], when, props)
        out += self._changes(outputs, {"runId": hdr["run_id"], "actionId": e["action_id"]}, when)
        out += self._partitions(outputs, when)
        app = hdr.get("parent_run") or {"job_namespace": hdr["job_namespace"], "job_name": hdr["job_name"],
                                        "run_id": hdr["run_id"]}
        task_job = self._orchestrated.find((app["job_namespace"], app["job_name"], app["run_id"]))
        if task_job is not None:
            # Added to the edges the upsert above wrote: a run of the job that no Airflow task started keeps them.
            out += _patches(DataJobPatchBuilder(job, system_metadata=self._system(when))
                            .add_input_datajob(task_job))
        dpi = instance_urn(hdr["job_namespace"], hdr["job_name"], hdr["run_id"], e["action_id"])
        more = self._schedule_props(hdr)  # the run's properties after its ids, action name and status
        if e.get("incomplete_reason"):
            more["incompleteReason"] = e["incomplete_reason"]
        if e.get("error"):
            more["errorClass"] = e["error"]["error_class"]
            more["errorMessage"] = e["error"]["message"]
        kind = DataProcessTypeClass.BATCH_SCHEDULED if hdr.get("schedule") else DataProcessTypeClass.BATCH_AD_HOC
        name, status = e["action_name"], e["action_status"]
        run_id, action_id = hdr["run_id"], e["action_id"]
        # The same for every run of the action but for the run's ids, time, counts and partitions: serialised once,
        # those set (kept out of the memo's key, which per-run values would flush).
        base = self._memo.get(("action-run", name, status, kind, *more.items()), lambda: to_json(
            DataProcessInstancePropertiesClass(
                name="", created=AuditStampClass(time=0, actor=ACTOR), type=kind,
                customProperties={"actionId": "", "actionName": name, "runId": "", "status": status, **more})))
        out.append(self._mcp(dpi, from_json(DataProcessInstancePropertiesClass.ASPECT_NAME, {
            **base, "name": f"{run_id}/{action_id}", "created": {**base["created"], "time": when},
            "customProperties": {**base["customProperties"], "actionId": action_id, "runId": run_id, **written,
                                 **_partitions_of(e)}}),
            when))
        parent = instance_urn(app["job_namespace"], app["job_name"], app["run_id"])
        out.append(self._mcp(dpi, self._memo.get(("action-relationships", job, parent), lambda: serialise(
            DataProcessInstanceRelationshipsClass(upstreamInstances=[], parentTemplate=job, parentInstance=parent))),
            when))
        out += [self._mcp(dpi, a, when) for a in io]
        if e["parts"] <= 1:
            out += self._action_run_events(dpi, hdr, e, when)
        return out

    def _later_part(self, job: str, e: dict[str, Any], when: int) -> list[Proposal]:
        hdr = e["header"]
        known = known_urns(self.names, e["inputs"], e["outputs"])
        lineages = fine_grained(self.names, e["column_lineage"], known, self.config.include_indirect)
        out: list[Proposal] = []
        if lineages:
            patch = DataJobPatchBuilder(job, system_metadata=self._system(when))
            for fgl in lineages:
                patch.add_fine_grained_lineage(fgl)
            out += _patches(patch)
            if self.config.dataset_lineage:
                for d in e["outputs"]:
                    mine = of_output(lineages, self.names.urn(d))
                    if mine:
                        dpatch = DatasetPatchBuilder(self.names.urn(d), system_metadata=self._system(when))
                        for fgl in mine:
                            dpatch.add_fine_grained_lineage(fgl)
                        out += _patches(dpatch)
        if e["part"] >= e["parts"] - 1:
            dpi = instance_urn(hdr["job_namespace"], hdr["job_name"], hdr["run_id"], e["action_id"])
            out += self._action_run_events(dpi, hdr, e, when)
        return out

    def _refresh_command(self, e: dict[str, Any]) -> list[Proposal]:
        hdr = e["header"]
        when = _ms(hdr["event_time"])
        flow = flow_urn("lineagewire", e["workflow_id"], self.config.cluster)
        parent = hdr.get("parent_run")
        name = parent["job_name"] if parent else f"refresh {e['table']}"
        return [self._mcp(flow, serialise(DataFlowInfoClass(
            name=name, customProperties={"workflowId": e["workflow_id"], "table": e["table"], "query": e["query"]},
            env=self.config.env)), when), self._mcp(flow, _STATUS, when)]

    # -- pieces ------------------------------------------------------------------------------

    def _system(self, when: int) -> SystemMetadataClass:
        # One object per event time, shared by that time's proposals (the emitters, which stamp it, get copies);
        # kept apart from _memo, which per-event entries would flush.
        last = self._last_system
        if last[0] != when:  # most proposals of an event are at its time: one look-up an event
            last = self._last_system = (when, self._systems.get(when, lambda: SystemMetadataClass(lastObserved=when)))
        system: SystemMetadataClass = last[1]
        return system

    def _changes(self, outputs: list[dict[str, Any]], run: dict[str, str], when: int) -> list[Proposal]:
        """The lifecycle changes of an event's outputs (``lifecycle``): nothing to do for the rest."""
        if not any(d.get("lifecycle_change") for d in outputs):
            return []
        return self._lifecycle.proposals(outputs, run, when, self._system(when))

    def _partitions(self, outputs: list[dict[str, Any]], when: int) -> list[Proposal]:
        """The partition (static partition, dated folder) each output was last written at, as the dataset's
        custom property ``partition``: a PATCH, so the other writers' properties stay."""
        out: list[Proposal] = []
        for d in outputs:
            if d["partition_values"]:
                out += _patches(DatasetPatchBuilder(self.names.urn(d), system_metadata=self._system(when))
                                .add_custom_property("partition", _partition_text(d["partition_values"])))
        return out

    def _mcp(self, urn: str, aspect: Aspect, when: int) -> Proposal:
        return proposal(urn, aspect, self._system(when))

    def _flow_urn(self, hdr: dict[str, Any]) -> str:
        schedule = hdr.get("schedule")
        if schedule:
            return flow_urn("lineagewire", schedule["workflow_id"], self.config.cluster)
        return flow_urn("spark", hdr["job_name"], self.config.cluster)

    def _flow(self, hdr: dict[str, Any], spec: dict[str, Any], when: int) -> list[Proposal]:
        flow = self._flow_urn(hdr)
        if hdr.get("schedule"):
            return []  # the workflow's DataFlow comes from its RefreshCommand
        props = {"jobNamespace": hdr["job_namespace"], "engine": spec["engine"], "jobType": spec["job_type"]}
        info = self._memo.get(("flow", flow, hdr["job_name"], content_key(props)), lambda: serialise(
            DataFlowInfoClass(name=hdr["job_name"], customProperties=props, env=self.config.env)))
        return [self._mcp(flow, info, when), self._mcp(flow, _STATUS, when)]

    @staticmethod
    def _app_instance(hdr: dict[str, Any]) -> str:
        return instance_urn(hdr["job_namespace"], hdr["job_name"], hdr["run_id"])

    @staticmethod
    def _schedule_props(hdr: dict[str, Any]) -> dict[str, str]:
        s = hdr.get("schedule")
        if not s:
            return {}
        return {"nominalTime": _iso(s["nominal_time"]), "workflowId": s["workflow_id"], "commandId": s["command_id"],
                "attempt": str(s["attempt"])}

    def _run_event(self, dpi: str, hdr: dict[str, Any], when: int, status: str, *, attempt: int | None = None,
                   result: str | None = None, native: str | None = None,
                   duration: int | None = None) -> Proposal:
        schedule = hdr.get("schedule")
        if schedule:
            attempt = schedule["attempt"]
        base = self._memo.get(("run-event", status, attempt, result, native, duration), lambda: to_json(
            DataProcessInstanceRunEventClass(
                timestampMillis=0, status=status, attempt=attempt,
                result=DataProcessInstanceRunResultClass(type=result, nativeResultType=native or result)
                if result else None, durationMillis=duration, partitionSpec=_FULL_TABLE)))
        return self._mcp(dpi, from_json(DataProcessInstanceRunEventClass.ASPECT_NAME,
                                        {**base, "timestampMillis": when}), when)

    def _action_run_events(self, dpi: str, hdr: dict[str, Any], e: dict[str, Any], when: int) -> list[Proposal]:
        result = _RESULT_OF_ACTION.get(e["action_status"])
        if result is None:
            return []  # RUNNING or UNKNOWN: the action has not ended
        duration = e.get("duration_ms")
        # The two points of a timeseries aspect are told apart by their time: keep STARTED at least 1 ms earlier.
        started = when - max(duration or 0, 1)
        return [self._run_event(dpi, hdr, started, DataProcessRunStatusClass.STARTED),
                self._run_event(dpi, hdr, when, DataProcessRunStatusClass.COMPLETE, result=result,
                                native=e["action_status"], duration=duration)]

    def _data_job(self, job: str, flow: str, name: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
                  column_lineage: list[dict[str, Any]], when: int, props: dict[str, str],
                  relations: list[dict[str, Any]] | None = None,
                  upstream_jobs: tuple[str, ...] = ()) -> tuple[list[Proposal], list[Any]]:
        """The DataJob's and its datasets' proposals, and the aspects of a run's instance inputs/outputs."""
        key = ("job", content_key((job, flow, name, inputs, outputs, column_lineage, props, relations)), upstream_jobs)
        job_aspects, feeds, datasets, io = self._memo.get(key, lambda: self._job_aspects(
            job, flow, name, inputs, outputs, column_lineage, props, relations, upstream_jobs))
        mcp = self._mcp
        out: list[Proposal] = [mcp(job, a, when) for a in job_aspects]
        for urn, aspects in datasets[:len(inputs)]:
            out.append(mcp(urn, _STATUS, when))
            out += [mcp(urn, a, when) for a in aspects]
        for (urn, aspects), upstream, d in zip(datasets[len(inputs):], feeds, outputs, strict=True):
            # a DROP soft-deletes the dataset (lifecycle.py); any other event about it makes it present again
            out.append(mcp(urn, REMOVED if d.get("lifecycle_change") == "DROP" else _STATUS, when))
            out += [mcp(urn, a, when) for a in aspects]
            if upstream is not None:  # stamped with the event time: new each time
                out.append(mcp(urn, at_time(upstream, when), when))
        return out, io

    def _job_aspects(self, job: str, flow: str, name: str, inputs: list[dict[str, Any]],
                     outputs: list[dict[str, Any]], column_lineage: list[dict[str, Any]], props: dict[str, str],
                     relations: list[dict[str, Any]] | None, upstream_jobs: tuple[str, ...] = ()
                     ) -> tuple[list[Aspect], list[dict[str, Any] | None], list[tuple[str, list[Aspect]]],
                                list[Aspect]]:
        """The DataJob's aspects, per output the JSON of its upstreamLineage at time 0 (None when nothing
        feeds it), per input then output (its URN, its schemaMetadata if any and a view's aspects), and a run's
        instance inputs/outputs; built and serialised once per distinct content (``Memo``): a job repeats them in every
        action of every run."""
        known = known_urns(self.names, inputs, outputs)
        lineages = fine_grained(self.names, column_lineage, known, self.config.include_indirect)
        in_urns = _unique(self.names.urn(d) for d in inputs)
        out_urns = _unique(self.names.urn(d) for d in outputs)
        aspects = [
            serialise(DataJobInfoClass(name=name, type="SPARK", flowUrn=flow, customProperties=props,
                                       env=self.config.env)),
            _STATUS,
            serialise(_job_input_output(in_urns, out_urns, upstream_jobs, lineages))]
        feeds = self._feeds(outputs, in_urns, known, lineages, relations)
        datasets = [self._dataset(d, False) for d in inputs] + [self._dataset(d, True) for d in outputs]
        return aspects, feeds, datasets, self._instance_io(in_urns, out_urns)

    def _feeds(self, outputs: list[dict[str, Any]], in_urns: list[str], known: dict[tuple[str, str], str],
               lineages: list[FineGrainedLineageClass], relations: list[dict[str, Any]] | None
               ) -> list[dict[str, Any] | None]:
        """Per output, the JSON of its upstreamLineage at time 0 (None when dataset lineage is off): the inputs
        that feed it (all of them, unless the event's relations say which) and its fine-grained lineage."""
        feeds: list[dict[str, Any] | None] = []
        for d in outputs:
            urn = self.names.urn(d)
            if not self.config.dataset_lineage:
                feeds.append(None)
                continue
            feeding = in_urns
            if relations:
                feeding = _unique(known.get((r["source"]["namespace"], r["source"]["name"])) or
                                  self.names.urn_of(r["source"]["namespace"], r["source"]["name"])
                                  for r in relations if known.get((r["sink"]["namespace"], r["sink"]["name"])) == urn
                                  ) or in_urns
            feeds.append(upstream_lineage([u for u in feeding if u != urn], of_output(lineages, urn)))
        return feeds

    def _dataset(self, d: dict[str, Any], output: bool) -> tuple[str, list[Aspect]]:
        """(the dataset's URN, its schemaMetadata when the event has fields for it, and a view's aspects)."""
        urn = self.names.urn(d)
        out = view_aspects(d, output)
        if d["fields"] and d.get("lifecycle_change") != "DROP":  # a dropped table's schema stays as it was
            out.insert(0, self._memo.get(("schema", urn, d["name"], content_key(d["fields"])),
                                         lambda: serialise(schema_metadata(urn, self.names.platform(urn), d["name"],
                                                                           d["fields"]))))
        return urn, out

    def _instance_io(self, ins: list[str], outs: list[str]) -> list[Aspect]:
        """A run instance's inputs and outputs: functions of the dataset URNs only, so every run of every job
        with those datasets shares one serialised aspect."""
        out: list[Aspect] = []
        if ins:
            out.append(self._memo.get(("inputs", *ins), lambda: serialise(DataProcessInstanceInputClass(
                inputs=ins, inputEdges=[EdgeClass(destinationUrn=u) for u in ins]))))
        if outs:
            out.append(self._memo.get(("outputs", *outs), lambda: serialise(DataProcessInstanceOutputClass(
                outputs=outs, outputEdges=[EdgeClass(destinationUrn=u) for u in outs]))))
        return out


def _counts(outputs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The outputs without the rows and bytes they were written (contract v2), and those as the run's custom
    properties ``rowsWritten`` / ``bytesWritten``: summed over the outputs Spark counted, absent when it counted
    none. Counts differ on every run: the memoised job and dataset aspects are keyed on the rest."""
    sums: dict[str, int] = {}
    for d in outputs:
        for key, prop in _COUNTS.items():
            if d.get(key) is not None:
                sums[prop] = sums.get(prop, 0) + d[key]
    if not sums:
        return outputs, {}
    return [{k: v for k, v in d.items() if k not in _COUNTS} for d in outputs], {p: str(n) for p, n in sums.items()}


def _partition_text(values: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items())


def _partitions_of(e: dict[str, Any]) -> dict[str, str]:
    """The run's custom properties ``partitionsRead`` / ``partitionsWritten``: each dataset with partition values,
    ``name[k=v,...]``, joined by '; ' (a run reads several days of one dataset as one input)."""
    props = {}
    for key, datasets in (("partitionsRead", e["inputs"]), ("partitionsWritten", e["outputs"])):
        parts = [f"{d['name']}[{_partition_text(d['partition_values'])}]" for d in datasets if d["partition_values"]]
        if parts:
            props[key] = "; ".join(parts)
    return props


def _patches(builder: Any) -> list[Proposal]:
    """A patch builder's proposals. acryl-datahub makes them plain ``MetadataChangeProposalClass``es, not our
    ``Proposal`` (which only writes its JSON faster): every sink reads both through the public ``to_obj``."""
    return cast("list[Proposal]", builder.build())


def _job_input_output(in_urns: list[str], out_urns: list[str], upstream_jobs: tuple[str, ...],
                      lineages: list[FineGrainedLineageClass]) -> DataJobInputOutputClass:
    """The DataJob's dataJobInputOutput: its dataset edges, the Airflow task feeding it (if any), and the
    columns on either side of its fine-grained lineage."""
    return DataJobInputOutputClass(
        inputDatasets=[], outputDatasets=[],
        inputDatasetEdges=[EdgeClass(destinationUrn=u) for u in in_urns],
        outputDatasetEdges=[EdgeClass(destinationUrn=u) for u in out_urns],
        inputDatajobEdges=[EdgeClass(destinationUrn=u) for u in upstream_jobs] or None,
        inputDatasetFields=sorted({u for fgl in lineages for u in fgl.upstreams or ()}),
        outputDatasetFields=sorted({u for fgl in lineages for u in fgl.downstreams or ()}),
        fineGrainedLineages=lineages)
