"""The Airflow task run above a Spark application, named as DataHub's Airflow plugin names it.

Airflow's OpenLineage provider gives a Spark application two runs (``producers/spark/parents.py``):
``header.parent_run`` is the task run (namespace = Airflow's ``[openlineage] namespace``, job
``<dag_id>.<task_id>``, run id = ``OpenLineageAdapter.build_task_instance_run_id``) and
``header.root_parent_run`` the DAG run (the same namespace, job ``<dag_id>``). That shape is how a
parent is recognised as an Airflow task run here; it also splits ``<dag_id>.<task_id>`` without
guessing (both ids may hold dots: task groups name tasks ``<group>.<task>``).

What DataHub's Airflow plugin (``datahub_airflow_plugin``, ``AirflowGenerator``) names, and what is
derivable from the OpenLineage parent:

* DataFlow ``urn:li:dataFlow:(airflow,<dag_id>,<cluster>)`` (``<platform_instance>.<dag_id>`` with a
  platform instance) and DataJob ``urn:li:dataJob:(<flow>,<task_id>)``: derivable, given the plugin's
  ``cluster`` (default ``prod``) and ``platform_instance``, which our ``orchestrator_cluster`` and
  ``orchestrator_platform_instance`` repeat.
* The task run's DataProcessInstance: the plugin's is ``DataProcessInstance.from_datajob(job,
  id=f"{dag_id}_{task_id}_{dag_run.run_id}")``, a guid of (cluster, "airflow", that id), where
  ``dag_run.run_id`` is Airflow's run id string (``scheduled__<logical date>``, ``manual__...`` or any
  id given at trigger time). The OpenLineage run id is a UUIDv7 built from the logical date and a hash
  of ``<namespace>.<dag_id>.<task_id>.<try>.<map index>``: Airflow's run id string cannot be recovered
  from it, so the plugin's instance URN cannot be derived. The instance we link to is DataHub's own
  OpenLineage converter's (acryl-spark-lineage and GMS's OpenLineage endpoint):
  ``urn:li:dataProcessInstance:<OpenLineage run id>``, which is what a DataHub Spark agent under the same
  Airflow task writes as ``parentInstance`` and what the task's own OpenLineage events become when sent
  to DataHub's OpenLineage endpoint.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from datahub.emitter.mce_builder import make_data_flow_urn, make_data_job_urn_with_flow, make_data_process_instance_urn

__all__ = ["AIRFLOW", "AirflowTask", "airflow_task"]

AIRFLOW = "airflow"
#: Airflow's own rule for dag and task ids (``airflow.utils.helpers.KEY_REGEX``): anything else is not its shape
_AIRFLOW_ID = re.compile(r"[\w.-]+")


@dataclass(frozen=True)
class AirflowTask:
    """One Airflow task run and the DataHub URNs of its DAG, task and run."""

    dag_id: str
    task_id: str
    run_id: str
    flow: str
    job: str
    instance: str


def airflow_task(hdr: dict[str, Any], cluster: str, platform_instance: str | None = None) -> AirflowTask | None:
    """The Airflow task run that is the parent of the run of ``hdr``, or None when the parent is not one."""
    parent, root = hdr.get("parent_run"), hdr.get("root_parent_run")
    if not parent or not root or hdr.get("schedule") or parent["job_namespace"] != root["job_namespace"]:
        return None
    dag_id, job = root["job_name"], parent["job_name"]
    task_id = job[len(dag_id) + 1:] if job.startswith(f"{dag_id}.") else ""
    if not (_AIRFLOW_ID.fullmatch(dag_id) and _AIRFLOW_ID.fullmatch(task_id)):
        return None
    return _task(dag_id, task_id, parent["run_id"], cluster, platform_instance)


@functools.lru_cache(maxsize=1024)
def _task(dag_id: str, task_id: str, run_id: str, cluster: str, platform_instance: str | None) -> AirflowTask:
    # Built and validated by acryl-datahub once per task run (a run's events repeat it).
    flow = make_data_flow_urn(AIRFLOW, dag_id, cluster, platform_instance)
    return AirflowTask(dag_id, task_id, run_id, flow, make_data_job_urn_with_flow(flow, task_id),
                       make_data_process_instance_urn(run_id))
