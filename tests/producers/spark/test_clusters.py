"""Jobs submitted to real cluster managers (issue 30): lineage from the driver wherever the cluster runs it.

- YARN (Hadoop's MiniYARNCluster, ``tests/clusters/yarn.py``), ``--deploy-mode cluster``: the Python driver runs
  in the ApplicationMaster's container, from the environment the job ships (``tests/clusters/pyenv.py``).
- Spark standalone (a master and a worker from the pip PySpark), client mode: the driver runs here, the
  executors in the worker's JVMs.

Every job is ``cluster_jobs/orders.py`` through PySpark's own ``bin/spark-submit``; its events are read back
from the session's Kafka broker. One cluster of each kind serves the whole session.
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.reader import TopicReader
from lineagewire.schemas import Codec
from tests.clusters.process import ServerProcess
from tests.clusters.pyenv import packed_environment, pyspark_archives
from tests.clusters.standalone import SparkStandalone, spark_environment, spark_home
from tests.clusters.yarn import HadoopJarsUnavailable, MiniYarn
from tests.helpers import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.cluster]

JOB = pathlib.Path(__file__).with_name("cluster_jobs") / "orders.py"
NAMESPACE = "clusters"
JOB_NAME = "cluster_orders"  # the job's appName
#: seconds a submitted job may take here (2 shared cores; a YARN job takes about a minute)
SUBMIT_TIMEOUT = 240
#: driver and executors small enough for four containers on the NodeManager
SMALL = {"spark.driver.memory": "512m", "spark.executor.memory": "512m", "spark.executor.instances": "1",
         "spark.executor.cores": "1", "spark.ui.enabled": "false"}


@pytest.fixture(scope="session")
def mini_yarn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniYarn]:
    cluster = MiniYarn(tmp_path_factory.mktemp("yarn"))
    try:
        cluster.start()
    except HadoopJarsUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    cluster = SparkStandalone(tmp_path_factory.mktemp("standalone")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def shipped_environment() -> pathlib.Path:
    return packed_environment()


@pytest.fixture
def orders_csv(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "orders.csv"
    path.write_text("order_id,customer,amount\n1,ann,10.0\n2,bob,20.5\n3,ann,300.0\n")
    return path


def activation(deploy_mode: str, bootstrap_servers: str, topic: str, outbox: pathlib.Path,
               ) -> tuple[dict[str, str], dict[str, str]]:
    """What turns the emitter on in a submitted job, as ``(spark conf, environment of spark-submit)``: Spark
    configuration alone (docs/platforms.md), in client and cluster deploy mode alike. The driver's Python has
    lineagewire installed (the shipped environment in cluster mode, this venv in client mode), whose start-up
    hook reads ``spark.lineagewire.enabled``."""
    conf = {
        "spark.lineagewire.enabled": "true",
        "spark.lineagewire.bootstrap_servers": bootstrap_servers,
        "spark.lineagewire.topic": topic,
        "spark.lineagewire.namespace": NAMESPACE,
        "spark.lineagewire.outbox_dir": str(outbox),
        # a generous extraction budget, and the time to use it at spark.stop(), which comes right after the job's
        # only write: the machine is shared, and these tests check lineage, not speed (the cut at close is
        # test_failures.py's)
        "spark.lineagewire.time_budget_ms": "10000",
        "spark.lineagewire.flush_timeout": "60",
    }
    return conf, {}


def _submit(options: list[str], conf: dict[str, str], env: dict[str, str], log: pathlib.Path,
            job_args: list[str]) -> ServerProcess:
    command = [str(spark_home() / "bin" / "spark-submit"), *options]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return ServerProcess("spark-submit", [*command, str(JOB), *job_args], log, env=env, cwd=log.parent)


def yarn_submit(yarn: MiniYarn, environment: pathlib.Path, kafka_bootstrap: str, topic: str,
                tmp_path: pathlib.Path, orders: pathlib.Path, mode: str) -> ServerProcess:
    """``spark-submit --master yarn --deploy-mode cluster`` of the job, its environment shipped as an archive."""
    conf, env = activation("cluster", kafka_bootstrap, topic, tmp_path / "outbox")
    conf = {
        "spark.pyspark.python": "./environment/bin/python",
        # Spark's jars are on the node already (one machine): no 440 MB upload per application
        "spark.yarn.jars": f"local:{spark_home() / 'jars'}/*",
        # a failed attempt would be retried as a second run of the application
        "spark.yarn.maxAppAttempts": "1",
        "spark.yarn.appMasterEnv.SPARK_LOCAL_IP": "127.0.0.1",
        "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1",
        **SMALL, **conf,
    }
    env = {**spark_environment(), **yarn.environment(),
           "PYSPARK_ARCHIVES_PATH": ",".join(f"local:{p}" for p in pyspark_archives()), **env}
    return _submit(["--master", "yarn", "--deploy-mode", "cluster", "--archives", f"{environment}#environment"],
                   conf, env, tmp_path / "submit.log", [str(orders), str(tmp_path / "out"), mode])


def standalone_submit(cluster: SparkStandalone, kafka_bootstrap: str, topic: str, tmp_path: pathlib.Path,
                      orders: pathlib.Path, mode: str) -> ServerProcess:
    """``spark-submit --master spark://...`` in client mode: the driver here, executors on the worker."""
    conf, env = activation("client", kafka_bootstrap, topic, tmp_path / "outbox")
    conf = {**SMALL, "spark.cores.max": "1", **conf}
    env = {**spark_environment(), "PYSPARK_PYTHON": sys.executable, **env}
    return _submit(["--master", cluster.master_url, "--deploy-mode", "client"], conf, env, tmp_path / "submit.log",
                   [str(orders), str(tmp_path / "out"), mode])


def finished(submit: ServerProcess, timeout: float = SUBMIT_TIMEOUT) -> int:
    try:
        submit.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        submit.stop(10)
        raise AssertionError(f"spark-submit did not end within {timeout}s; see {submit.log}") from None
    return submit.stop()


def events_of(settings: Settings, topic: str) -> list[dict[str, Any]]:
    codec = Codec()
    with TopicReader(settings, topic, start="beginning", end="end") as reader:
        events = [codec.decode(m.value()) for m in reader]
    return sorted(events, key=lambda e: e["header"]["sequence"])


def kind(event: dict[str, Any]) -> str:
    return event["header"]["schema_name"].rsplit(".", 1)[1]


def statuses(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["old_status"], e["new_status"]) for e in events if kind(e) == "JobStatusChangedEvent"]


def assert_one_run(events: list[dict[str, Any]], master: str, deploy_mode: str, context: str) -> None:
    """The events are one application run of the job, in sequence, opened by its JobCreatedEvent."""
    assert events, f"no event reached the topic: the emitter did not run in the driver\n{context}"
    assert {e["header"]["run_id"] for e in events} == {events[0]["header"]["run_id"]}, "one application run"
    assert {(e["header"]["job_namespace"], e["header"]["job_name"]) for e in events} == {(NAMESPACE, JOB_NAME)}
    assert [e["header"]["sequence"] for e in events] == list(range(len(events))), "no event lost"
    assert kind(events[0]) == "JobCreatedEvent"
    spec = events[0]["spec"]
    assert (spec["master"], spec["deploy_mode"], spec["application_name"]) == (master, deploy_mode, JOB_NAME)


def assert_lineage(events: list[dict[str, Any]], orders: pathlib.Path, out: pathlib.Path, context: str) -> None:
    """The job's one write: the CSV in, the Parquet folder out, and where each output column came from."""
    actions = [e for e in events if kind(e) == "ActionLineageEvent"]
    writes = [a for a in actions if any(d["name"] == str(out) for d in a["outputs"])]
    assert len(writes) == 1, ([(a["plan_node"], [d["name"] for d in a["outputs"]], a["incomplete_reason"])
                               for a in actions], context)
    write = writes[0]
    assert write["action_status"] == "SUCCEEDED" and write["lineage_complete"], (write["incomplete_reason"], context)
    assert [(d["namespace"], d["name"], d["format"]) for d in write["inputs"]] == [("file", str(orders), "csv")]
    assert [(d["namespace"], d["name"], d["format"]) for d in write["outputs"]] == [("file", str(out), "parquet")]
    columns = {c["field"]: {(i["name"], i["field"]) for i in c["inputs"]} for c in write["column_lineage"]}
    assert columns == {"customer": {(str(orders), "customer")},
                       "doubled_total": {(str(orders), "amount"), (str(orders), "customer")}}


def assert_failed_in_udf(events: list[dict[str, Any]]) -> None:
    """The run ends FAILED with the executor's Python error, and so does the action that ran the UDF."""
    final = events[-1]
    assert statuses(events) == [("CREATED", "RUNNING"), ("RUNNING", "FAILED")]
    assert kind(final) == "JobStatusChangedEvent" and final["lifecycle_state"] == "FAILED"
    assert "PythonException" in final["error"]["error_class"], final["error"]
    assert "ValueError: bad amount 300.0" in final["error"]["message"], final["error"]["message"][-2000:]
    failed = [e for e in events if kind(e) == "ActionLineageEvent" and e["action_status"] == "FAILED"]
    assert len(failed) == 1 and "bad amount 300.0" in failed[0]["error"]["message"]


# -- YARN, cluster mode ------------------------------------------------------------------------------------------


def test_yarn_cluster_job_publishes_its_run_and_lineage(mini_yarn, shipped_environment, kafka_bootstrap,  # noqa: ANN001
                                                         kafka_settings, topic, tmp_path, orders_csv) -> None:
    with yarn_submit(mini_yarn, shipped_environment, kafka_bootstrap, topic, tmp_path, orders_csv, "ok") as submit:
        app = submit.wait_for(r"Submitted application (application_\d+_\d+)", 120).group(1)
        code = finished(submit)
    context = f"spark-submit: {submit.log}\n{mini_yarn.container_logs(app)}"
    assert code == 0, context

    events = events_of(kafka_settings, topic)
    assert_one_run(events, "yarn", "cluster", context)
    assert statuses(events) == [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    assert_lineage(events, orders_csv, tmp_path / "out", context)


def test_yarn_cluster_job_failing_in_a_udf_ends_failed_with_the_executor_error(  # noqa: ANN201
        mini_yarn, shipped_environment, kafka_bootstrap, kafka_settings, topic, tmp_path, orders_csv):  # noqa: ANN001
    with yarn_submit(mini_yarn, shipped_environment, kafka_bootstrap, topic, tmp_path, orders_csv, "fail") as submit:
        app = submit.wait_for(r"Submitted application (application_\d+_\d+)", 120).group(1)
        code = finished(submit)
    context = f"spark-submit: {submit.log}\n{mini_yarn.container_logs(app)}"
    assert code != 0, context

    events = events_of(kafka_settings, topic)
    assert_one_run(events, "yarn", "cluster", context)
    assert_failed_in_udf(events)


def test_yarn_application_killed_by_the_cluster_manager_ends_its_run_canceled(  # noqa: ANN201
        mini_yarn, shipped_environment, kafka_bootstrap, kafka_settings, topic, tmp_path, orders_csv):  # noqa: ANN001
    """``yarn application -kill`` of a running application: its run ends CANCELED.

    YARN stops the ApplicationMaster's container (the driver's JVM and its Python) with SIGTERM to the container's
    process group, and SIGKILL 250 ms later (``yarn.nodemanager.sleep-delay-before-sigkill.ms``). The instrumented
    driver turns SIGTERM into an orderly unwind (docs/emitter.md), which ends the run within that grace: the stream
    shows CREATED → RUNNING → CANCELED, the error saying ``terminated by signal 15``. The write the kill
    interrupted (its UDF held the task) never completed: no output, and no SUCCEEDED action; its FAILED action
    event (``java.lang.InterruptedException``) comes after the CANCELED status and gets out only when the SIGKILL
    is late enough (seen both ways), so it is allowed, not required.
    """
    with yarn_submit(mini_yarn, shipped_environment, kafka_bootstrap, topic, tmp_path, orders_csv, "hold") as submit:
        app = submit.wait_for(r"Submitted application (application_\d+_\d+)", 120).group(1)
        try:
            wait_for(lambda: ("CREATED", "RUNNING") in statuses(events_of(kafka_settings, topic)), timeout=150,
                     every=1)
        except AssertionError:
            with contextlib.suppress(AssertionError):  # the held job would keep the cluster busy for an hour
                mini_yarn.kill(app)
            raise
        mini_yarn.kill(app)
        code = finished(submit)
    context = f"spark-submit: {submit.log}\n{mini_yarn.container_logs(app)}"
    assert code != 0 and f"Application {app} is killed" in submit.log.read_text(), context

    events = events_of(kafka_settings, topic)
    assert_one_run(events, "yarn", "cluster", context)
    assert statuses(events) == [("CREATED", "RUNNING"), ("RUNNING", "CANCELED")], context
    canceled = next(e for e in events if kind(e) == "JobStatusChangedEvent" and e["new_status"] == "CANCELED")
    assert canceled["lifecycle_state"] == "TERMINATED"
    assert "terminated by signal 15" in canceled["error"]["message"]
    actions = [e for e in events if kind(e) == "ActionLineageEvent"]
    assert all(a["action_status"] == "FAILED" and a["header"]["sequence"] > canceled["header"]["sequence"]
               for a in actions), [(a["action_status"], a["error"]) for a in actions]
    assert not (tmp_path / "out" / "_SUCCESS").exists()


# -- Spark standalone, client mode -------------------------------------------------------------------------------


def test_standalone_client_job_publishes_its_run_and_lineage(spark_standalone, kafka_bootstrap,  # noqa: ANN001
                                                             kafka_settings, topic, tmp_path, orders_csv) -> None:
    with standalone_submit(spark_standalone, kafka_bootstrap, topic, tmp_path, orders_csv, "ok") as submit:
        code = finished(submit)
    context = f"spark-submit: {submit.log}\n{submit.log.read_text()[-20000:]}"
    assert code == 0, context

    events = events_of(kafka_settings, topic)
    assert_one_run(events, spark_standalone.master_url, "client", context)
    assert statuses(events) == [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    assert_lineage(events, orders_csv, tmp_path / "out", context)


def test_standalone_client_job_failing_in_a_udf_ends_failed_with_the_executor_error(  # noqa: ANN201
        spark_standalone, kafka_bootstrap, kafka_settings, topic, tmp_path, orders_csv):  # noqa: ANN001
    with standalone_submit(spark_standalone, kafka_bootstrap, topic, tmp_path, orders_csv, "fail") as submit:
        assert finished(submit) != 0, f"see {submit.log}"

    events = events_of(kafka_settings, topic)
    assert_one_run(events, spark_standalone.master_url, "client", f"spark-submit: {submit.log}")
    assert_failed_in_udf(events)
