"""Session-scoped Kafka for the whole suite, a fresh topic and group per test.

Which broker (``LINEAGEWIRE_TEST_KAFKA`` forces one: docker, local, external):

1. testcontainers' Kafka, when a Docker engine answers;
2. else lineagewire's own local broker (``lineagewire.kafka.local``) on free
   ports with its data in a temporary folder, never the user's broker;
3. else the cluster named by ``LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.topics import TopicSpec, create_topics, delete_topics
from tests.postgres import LocalPostgres, find_bin_dir


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    mode = os.environ.get("LINEAGEWIRE_TEST_KAFKA")
    if mode == "docker" or (mode is None and _docker_answers()):
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer("apache/kafka:4.1.1").with_kraft() as kafka:
            yield kafka.get_bootstrap_server()
        return
    if mode == "external":
        yield os.environ["LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS"]
        return
    from lineagewire.exceptions import LocalKafkaError
    from lineagewire.kafka.local import LocalKafka, free_port

    broker = LocalKafka(name=f"pytest-{os.getpid()}", port=free_port(), controller_port=free_port(),
                        base=tmp_path_factory.mktemp("kafka"))
    try:
        broker.start(timeout=120)
    except LocalKafkaError:
        if os.environ.get("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS"):
            yield os.environ["LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS"]
            return
        raise
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_settings(kafka_bootstrap: str) -> Settings:
    return Settings(bootstrap_servers=kafka_bootstrap)


@pytest.fixture
def topic_factory(kafka_settings: Settings) -> Iterator:
    """Creates fresh, uniquely named topics; deletes them after the test."""
    created: list[str] = []

    def make(prefix: str = "t", partitions: int = 3) -> str:
        name = f"{prefix}.{uuid.uuid4().hex[:10]}"
        # Kept until the test deletes it: tests produce records stamped years ago (archive hours, replay by time),
        # which a time retention would let the broker's periodic check delete mid-test.
        create_topics(kafka_settings, [TopicSpec(name, partitions, -1)])
        created.append(name)
        return name

    yield make
    if created:
        try:
            delete_topics(kafka_settings, created, timeout=20)
        except Exception:  # noqa: BLE001 - cleanup only
            pass


@pytest.fixture
def topic(topic_factory) -> str:  # noqa: ANN001
    """A fresh topic with 3 partitions."""
    return topic_factory()


@pytest.fixture
def settings(kafka_settings: Settings, topic: str) -> Settings:
    """Settings whose jobs topic is this test's fresh topic."""
    return kafka_settings.model_copy(update={"topics": kafka_settings.topics.model_copy(update={"jobs": topic})})


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pytest.MonkeyPatch:
    """No LINEAGEWIRE_* variable (but LINEAGEWIRE_HOME) and no ./lineagewire.yaml but those a test sets."""
    for name in list(os.environ):
        if name.startswith("LINEAGEWIRE_") and name != "LINEAGEWIRE_HOME":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


@pytest.fixture
def group_id() -> str:
    return f"test-group-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """A PostgreSQL server for the session (Debian's binaries), skipped with the reason when absent.

    Installed but unable to start is a failure, not a skip: `make test` installs it, and a skip would
    hide that the two-instance tests ran on SQLite only.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin); "
                    "install them with: apt-get install -y postgresql")
    server = LocalPostgres(bin_dir)
    try:
        server.start()
    except RuntimeError as exc:
        server.stop()
        pytest.fail(f"PostgreSQL is installed ({bin_dir}) but could not start: {exc}")
    yield server
    server.stop()
