"""An Airflow 3 DAG whose task starts a PySpark job (examples/ingest/customer_totals.py) under lineagewire's emitter.

Airflow's OpenLineage provider reports the DAG run and the task run to `lineagewire ingest openlineage`
(AIRFLOW__OPENLINEAGE__TRANSPORT); its macros hand the task's run to the job as the parent run
(OPENLINEAGE_PARENT_ID, OPENLINEAGE_ROOT_PARENT_ID: namespace/job/runId), which the emitter reads, so the
registry shows the Spark run under the Airflow task run that started it.

The environment of the scheduler or of `airflow dags test` says where things are:
LINEAGEWIRE_EXAMPLE_PYTHON, a Python with PySpark and lineagewire (not Airflow's: their pins clash);
LINEAGEWIRE_EXAMPLE_LAKE, the folder of the orders; and the emitter's Kafka settings
(LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS, ...), which the task passes on.
"""

import os
import pathlib
import shlex

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

JOB = pathlib.Path(__file__).resolve().parents[1] / "customer_totals.py"
PYTHON = os.environ.get("LINEAGEWIRE_EXAMPLE_PYTHON", "python3")
LAKE = os.environ.get("LINEAGEWIRE_EXAMPLE_LAKE", "/tmp/lineagewire-lake")
# Jinja, rendered by Airflow when the task runs: the provider's macros give the task run as namespace/job/runId
PARENT = "{{ macros.OpenLineageProviderPlugin.lineage_parent_id(task_instance) }}"
ROOT_PARENT = "{{ macros.OpenLineageProviderPlugin.lineage_root_parent_id(task_instance) }}"

with DAG("orders_dag", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    BashOperator(
        task_id="customer_totals",
        bash_command=shlex.join([PYTHON, str(JOB), LAKE]),
        env={
            "OPENLINEAGE_PARENT_ID": PARENT,
            "OPENLINEAGE_ROOT_PARENT_ID": ROOT_PARENT,
            "LINEAGEWIRE_EMITTER__ENABLED": "true",
        },
        append_env=True,  # the emitter's Kafka settings and the rest of the environment
    )
