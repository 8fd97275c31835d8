"""The real OpenLineage producers into ``lineagewire ingest openlineage``, and what comes out of lineagewire.

One estate for the session: one topic (its ``lineage.jobs``), one receiver process on it, one lake folder; each
test module runs its producer once into it (openlineage-python, the openlineage-spark jar, ``dbt-ol run``,
``airflow dags test``) and reads what arrived in the four outputs, each a consumer on a thread of this
process: the registry (SQLite), the OpenLineage output (to a loopback backend), DataHub (file sink) and
alerting (a ``run_failed`` rule, to a loopback webhook). The estate is shared on purpose: the dbt models read
what the openlineage-spark job wrote, and the Spark job Airflow starts reads it too, so one graph spans the
tools as it would in a data team.

dbt and Airflow run from venvs of their own (tests/ingest_producers.sh makes them and passes their paths in
``LINEAGEWIRE_TEST_DBT_VENV`` and ``LINEAGEWIRE_TEST_AIRFLOW_VENV``); their tests skip, saying so, without.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from lineagewire.kafka.topics import TopicSpec, create_topics
from tests.consumers.alerting.receivers import HttpReceiver
from tests.consumers.openlineage.receiver import Receiver
from tests.helpers import wait_for

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "ingest"
DBT_VENV = "LINEAGEWIRE_TEST_DBT_VENV"
AIRFLOW_VENV = "LINEAGEWIRE_TEST_AIRFLOW_VENV"
#: the openlineage-spark build for the main venv's PySpark 4 (Scala 2.13): the newest Maven Central serves
OPENLINEAGE_SPARK = os.environ.get("LINEAGEWIRE_TEST_OPENLINEAGE_SPARK",
                                   "io.openlineage:openlineage-spark_2.13:1.53.0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "producers: runs a real OpenLineage producer (openlineage-python, the "
                            "openlineage-spark jar, dbt-ol, Airflow) into lineagewire ingest openlineage "
                            "(make test-ingest-producers)")


def producer_venv(variable: str, what: str) -> pathlib.Path:
    """The venv ``variable`` names; skips the test when it is unset (only tests/ingest_producers.sh sets it)."""
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is not set: the {what} venv is made by tests/ingest_producers.sh "
                    "(make test-ingest-producers), which sets it")
    venv = pathlib.Path(value)
    if not (venv / "bin" / "python").exists():
        pytest.fail(f"{variable}={value}: no bin/python there; expected a venv made by tests/ingest_producers.sh")
    return venv


def producer_env(**extra: str) -> dict[str, str]:
    """This process's environment without lineagewire's, OpenLineage's and Airflow's own settings, plus ``extra``:
    a producer sees only what its test gives it (a developer's LINEAGEWIRE_EMITTER__ENABLED must not turn our
    emitter on in the openlineage-spark job)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LINEAGEWIRE_", "OPENLINEAGE_", "AIRFLOW_", "DBT_", "SPARK_"))}
    return {**env, "PYSPARK_PYTHON": sys.executable, **extra}


def run_logged(args: list[str], log: pathlib.Path, *, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run a producer with its output in ``log`` (large: Spark and Airflow talk); the log's tail on failure."""
    with log.open("w") as out:
        done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False, **kwargs)
    done.stdout = log.read_text(errors="replace")
    return done


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def messages_on(settings: Settings, topic: str) -> int:
    """How many records ``topic`` holds (the sum of its partitions' high watermarks)."""
    consumer = Consumer({**settings.as_librdkafka_dict(), "group.id": f"size-{uuid.uuid4().hex}"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions)
    finally:
        consumer.close()


@dataclass
class Estate:
    """The session's topic, receiver and lake."""

    settings: Settings  # jobs topic: the estate's
    url: str  # the receiver's base URL; producers post to url + /api/v1/lineage
    base: pathlib.Path
    lake: pathlib.Path
    receiver_log: pathlib.Path
    receiver: subprocess.Popen = field(repr=False)

    def env(self, **extra: str) -> dict[str, str]:
        """A producer's environment with lineagewire's Kafka settings of the estate (for our emitter)."""
        return producer_env(LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS=self.settings.bootstrap_servers,
                            LINEAGEWIRE_KAFKA__TOPICS__JOBS=self.settings.topics.jobs, **extra)

    def check_receiver(self) -> None:
        assert self.receiver.poll() is None, f"the receiver exited:\n{tail(self.receiver_log.read_text())}"


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@contextlib.contextmanager
def ingest_process(settings: Settings, base: pathlib.Path, name: str, **ingest: str) -> Iterator[
        tuple[subprocess.Popen, pathlib.Path]]:
    """``lineagewire ingest openlineage`` as a user starts it, its settings in LINEAGEWIRE_INGEST__* variables;
    stopped with SIGTERM (it must exit 0: it flushed)."""
    log = base / f"{name}.log"
    env = producer_env(LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS=settings.bootstrap_servers,
                       LINEAGEWIRE_KAFKA__TOPICS__JOBS=settings.topics.jobs,
                       LINEAGEWIRE_INGEST__OUTBOX_DIR=str(base / f"{name}-outbox"),
                       **{f"LINEAGEWIRE_INGEST__{k.upper()}": v for k, v in ingest.items()})
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "lineagewire", "ingest", "openlineage"], cwd=base, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc, log
    finally:
        proc.terminate()
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(10)
        assert code == 0, f"{name} exited {code} on SIGTERM:\n{tail(log.read_text())}"


@pytest.fixture(scope="session")
def estate(kafka_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Estate]:
    base = tmp_path_factory.mktemp("estate")
    topic = f"ingest-producers.{uuid.uuid4().hex[:8]}"
    create_topics(kafka_settings, [TopicSpec(topic, 3, -1)])
    settings = kafka_settings.model_copy(update={"topics": kafka_settings.topics.model_copy(update={"jobs": topic})})
    port = free_port()
    with ingest_process(settings, base, "receiver", port=str(port)) as (proc, log):
        wait_for(lambda: _listening(port) or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, f"lineagewire ingest openlineage did not start:\n{tail(log.read_text())}"
        (base / "lake").mkdir()
        yield Estate(settings, f"http://127.0.0.1:{port}", base, base / "lake", log, proc)


class Outputs:
    """lineagewire's four outputs, each a consumer of the estate's topic on a thread of this process."""

    def __init__(self, estate: Estate) -> None:
        from lineagewire.consumers.alerting.config import parse_config
        from lineagewire.consumers.alerting.service import AlertingHandler
        from lineagewire.consumers.audit.registry import RegistryHandler
        from lineagewire.consumers.datahub.config import load_config
        from lineagewire.consumers.datahub.handler import DataHubHandler
        from lineagewire.consumers.openlineage.handler import OpenLineageHandler
        from lineagewire.consumers.runtime import ConsumerRuntime

        self.estate = estate
        self.db = f"sqlite:///{estate.base / 'registry.db'}"
        self.datahub_file = estate.base / "datahub.json"
        self.openlineage = Receiver()
        self.alerts = HttpReceiver()
        alerting = parse_config({"route": {"group_wait": "0s", "channels": ["hook"]},
                                 "channels": {"hook": {"type": "webhook", "url": f"{self.alerts.url}/hook"}},
                                 "rules": [{"name": "failed", "kind": "run_failed"}]})
        handlers = [RegistryHandler(self.db),
                    OpenLineageHandler(config={"transport": {"type": "http", "url": self.openlineage.url}}),
                    DataHubHandler(load_config(file={"path": str(self.datahub_file)})),
                    AlertingHandler(alerting, database=f"sqlite:///{estate.base / 'alerting.db'}")]
        self.runtimes = [ConsumerRuntime(estate.settings, h, group_id=f"{h.name}-{uuid.uuid4().hex[:6]}",
                                         dead_letters=False) for h in handlers]
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Outputs:
        self.openlineage.__enter__()
        self.alerts.__enter__()
        # One at a time: the registry and alerting stores migrate their databases as they open, and alembic's
        # op/context proxies are process-wide (two migrations on two threads at once trip over each other).
        for rt in self.runtimes:
            opened = threading.Event()
            thread = threading.Thread(target=rt.run, kwargs={"on_open": opened.set}, name=f"out-{rt.service}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
            wait_for(lambda: opened.is_set() or not thread.is_alive(), timeout=60)  # noqa: B023 - waited here
            assert opened.is_set(), f"the {rt.service} output did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        for rt in self.runtimes:
            rt.stop()
        for t in self._threads:
            t.join(60)
        self.alerts.__exit__(*exc)
        self.openlineage.__exit__(*exc)

    def settle(self, timeout: float = 60) -> int:
        """Wait until every output has consumed every record on the topic (the producers have exited: what the
        receiver acknowledged is on Kafka); the number of records."""
        total = messages_on(self.estate.settings, self.estate.settings.topics.jobs)

        def done() -> bool:
            behind = [(rt.service, rt.stats.consumed) for rt in self.runtimes if rt.stats.consumed < total]
            assert all(t.is_alive() for t in self._threads), "an output's consumer thread died"
            return not behind

        wait_for(done, timeout=timeout)
        return total

    def registry(self, *args: str, missing_ok: bool = False) -> Any:
        """A registry command's JSON answer (``--format json`` added); None when it says the job or run is not
        there and ``missing_ok``."""
        from lineagewire.cli import main_group
        from lineagewire.consumers.audit.registry_query import NotFoundError

        r = CliRunner().invoke(main_group, [*args, "--format", "json", "--db-url", self.db],
                               catch_exceptions=missing_ok)
        if missing_ok and isinstance(r.exception, NotFoundError):
            return None
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    def registry_text(self, *args: str) -> str:
        from lineagewire.cli import main_group

        r = CliRunner().invoke(main_group, [*args, "--db-url", self.db], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r.stdout

    def datahub(self, holds: Callable[[list[dict[str, Any]]], Any] = bool, timeout: float = 30) -> list[
            dict[str, Any]]:
        """The DataHub output's records once ``holds`` is true of them (the file sink writes after the consumer
        counted the event); those there at ``timeout`` else, for the caller's assert to show."""
        def read() -> list[dict[str, Any]]:
            try:
                return json.loads(self.datahub_file.read_text())  # type: ignore[no-any-return]
            except (OSError, json.JSONDecodeError):
                return []

        with contextlib.suppress(AssertionError):
            return wait_for(lambda: (lambda got: got if holds(got) else None)(read()), timeout=timeout)  # type: ignore[no-any-return]
        return read()


@pytest.fixture(scope="session")
def outputs(estate: Estate) -> Iterator[Outputs]:
    with Outputs(estate) as out:
        yield out


@dataclass
class SparkRun:
    """What the openlineage-spark job did: its output folder and its log."""

    orders: pathlib.Path
    log: str


@pytest.fixture(scope="session")
def orders_landed(estate: Estate) -> SparkRun:
    """examples/ingest/orders_ingest.py under the openlineage-spark jar (spark-submit, Maven Central through the
    tests' Ivy settings), reporting over HTTP to the receiver; our emitter explicitly off. Once per session: the
    dbt models and the Spark job Airflow starts read what it wrote."""
    pytest.importorskip("pyspark")
    spark_submit = pathlib.Path(sys.executable).with_name("spark-submit")
    from tests.producers.packages import IVY_SETTINGS

    done = run_logged([str(spark_submit), "--master", "local[2]", "--packages", OPENLINEAGE_SPARK,
                       "--conf", f"spark.jars.ivySettings={IVY_SETTINGS}",
                       "--conf", "spark.lineagewire.enabled=false",
                       "--conf", "spark.extraListeners=io.openlineage.spark.agent.OpenLineageSparkListener",
                       "--conf", "spark.openlineage.transport.type=http",
                       "--conf", f"spark.openlineage.transport.url={estate.url}",
                       "--conf", "spark.openlineage.namespace=spark-ol",
                       str(EXAMPLES / "orders_ingest.py"), str(estate.lake)],
                      estate.base / "orders_ingest.log", timeout=600, cwd=estate.base,
                      env=estate.env(LINEAGEWIRE_EMITTER__ENABLED="false"))
    assert done.returncode == 0, tail(done.stdout)
    assert "OpenLineageSparkListener" in done.stdout, "the openlineage-spark listener did not load"
    return SparkRun(estate.lake / "orders", done.stdout)
