"""`lineagewire kafka start|status|stop` and `topics create` on a broker of its own, and a broker that is down."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lineagewire.config import Settings
from lineagewire.exceptions import BrokerUnavailableError, PublishError
from lineagewire.kafka.local import free_port, locked_artifacts
from lineagewire.kafka.publisher import Publisher
from lineagewire.kafka.topics import create_topics
from tests.helpers import status_event


def _lw(home, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    env = {**os.environ, "LINEAGEWIRE_HOME": str(home)}
    # Reuse the jar cache the session broker already filled, so this test needs no network.
    from lineagewire.kafka.local import libs_dir

    env.setdefault("LINEAGEWIRE_KAFKA_LIBS", str(libs_dir()))
    return subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def test_lock_file_pins_kafka_and_logging_with_checksums() -> None:
    arts = {f"{a.group}:{a.artifact}": a for a in locked_artifacts()}
    assert arts["org.apache.kafka:kafka_2.13"].version.startswith("4.")
    assert "org.apache.logging.log4j:log4j-core" in arts
    assert all(len(a.sha1) == 40 for a in arts.values())


@pytest.mark.integration
@pytest.mark.slow
def test_cli_starts_creates_topics_reports_status_and_stops(tmp_path, kafka_bootstrap) -> None:  # noqa: ANN001
    port = free_port()
    start = _lw(tmp_path, "kafka", "start", "--port", str(port))
    try:
        assert start.returncode == 0, start.stderr
        assert "topic lineage.jobs: created" in start.stdout
        status = _lw(tmp_path, "kafka", "status", "--port", str(port))
        st = json.loads(status.stdout)
        assert status.returncode == 0 and st["running"] and st["answering"]
        assert st["data_dir"].startswith(str(tmp_path))
        again = _lw(tmp_path, "--bootstrap-servers", f"127.0.0.1:{port}", "topics", "create", "--dlq", "openlineage")
        assert "lineage.jobs: exists" in again.stdout and "lineage.jobs.dlq.openlineage: created" in again.stdout
        listing = _lw(tmp_path, "--bootstrap-servers", f"127.0.0.1:{port}", "topics", "list").stdout
        assert "lineage.jobs\t6" in listing and "lineage.refresh-commands\t3" in listing
    finally:
        stop = _lw(tmp_path, "kafka", "stop", "--port", str(port))
    assert stop.stdout.strip() == "stopped"
    assert _lw(tmp_path, "kafka", "status", "--port", str(port)).returncode == 1


@pytest.mark.slow
def test_broker_down_gives_clear_errors() -> None:
    dead = Settings(bootstrap_servers=f"127.0.0.1:{free_port()}")
    with pytest.raises(BrokerUnavailableError, match="no broker answered"):
        create_topics(dead, timeout=2)
    pub = Publisher(dead, producer_config={"message.timeout.ms": 1500})
    event = status_event()
    pub.publish(event)
    with pytest.raises(PublishError) as err:
        pub.flush(timeout=5)
    assert "failed" in str(err.value) or "undelivered" in str(err.value)


def test_cli_reports_bad_config_without_a_traceback(tmp_path) -> None:  # noqa: ANN001
    run = _lw(tmp_path, "--bootstrap-servers", "nonsense", "topics", "list", timeout=60)
    assert run.returncode == 2
    assert "bootstrap_servers" in run.stderr and "Traceback" not in run.stderr
