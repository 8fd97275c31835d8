"""The orchestrator's run a Spark application belongs to: Airflow's OpenLineage provider and the like.

Airflow's OpenLineage provider (``spark_inject_parent_job_info``) adds these conf keys to
``spark-submit``, so the user's DAG is unchanged:

* ``spark.openlineage.parentJobNamespace``, ``parentJobName``, ``parentRunId``: the task's run;
* ``spark.openlineage.rootParentJobNamespace``, ``rootParentJobName``, ``rootParentRunId``: the
  DAG run at the root of the chain.

OpenLineage clients elsewhere pass the same as environment variables,
``OPENLINEAGE_PARENT_ID`` and ``OPENLINEAGE_ROOT_PARENT_ID``, each ``namespace/job/runId``
(the job name may itself hold slashes). The conf keys win over the variables.

They become the application run's ``header.parent_run`` and ``header.root_parent_run``.
An incomplete or malformed parent is left out with a warning naming the key and what was
expected: a wrong parent must not cost the job its lineage.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from lineagewire.schemas.events import RunRef

log = logging.getLogger(__name__)

__all__ = ["CONF_KEYS", "ENV_PARENT", "ENV_ROOT_PARENT", "orchestrator_parents"]

OPENLINEAGE_CONF = "spark.openlineage."
_PARTS = ("JobNamespace", "JobName", "RunId")
#: every conf key read here (the session's conf: spark-submit's --conf, or spark.conf.set before install)
CONF_KEYS = tuple(f"{OPENLINEAGE_CONF}{prefix}{part}" for prefix in ("parent", "rootParent") for part in _PARTS)
ENV_PARENT = "OPENLINEAGE_PARENT_ID"
ENV_ROOT_PARENT = "OPENLINEAGE_ROOT_PARENT_ID"


def orchestrator_parents(conf: Mapping[str, str], environ: Mapping[str, str]) -> tuple[RunRef | None, RunRef | None]:
    """(parent, root parent) of the application run, from the Spark conf, else the environment."""
    return (_one(conf, environ, "parent", ENV_PARENT), _one(conf, environ, "rootParent", ENV_ROOT_PARENT))


def _one(conf: Mapping[str, str], environ: Mapping[str, str], prefix: str, variable: str) -> RunRef | None:
    keys = [f"{OPENLINEAGE_CONF}{prefix}{part}" for part in _PARTS]
    values = [(conf.get(k) or "").strip() for k in keys]
    if any(values):
        if not all(values):
            given = ", ".join(k for k, v in zip(keys, values, strict=True) if v)
            missing = ", ".join(k for k, v in zip(keys, values, strict=True) if not v)
            log.warning("lineagewire: %s set without %s; expected all three (the orchestrator's namespace, job and "
                        "run id): the run is reported without this parent", given, missing)
            return None
        return _checked(*values, where=keys[2])
    text = (environ.get(variable) or "").strip()
    if not text:
        return None
    namespace, _, rest = text.partition("/")
    job, _, run_id = rest.rpartition("/")
    if not (namespace and job and run_id):
        log.warning("lineagewire: %s=%r; expected namespace/job/runId: the run is reported without this parent",
                    variable, text)
        return None
    return _checked(namespace, job, run_id, where=variable)


def _checked(namespace: str, job: str, run_id: str, *, where: str) -> RunRef | None:
    try:
        uuid.UUID(run_id)
    except ValueError:
        log.warning("lineagewire: %s=%r is not a UUID; expected the orchestrator's run id (a UUID): the run is "
                    "reported without this parent", where, run_id)
        return None
    return {"job_namespace": namespace, "job_name": job, "run_id": run_id}
