"""`lineagewire ingest openlineage` as users start it: settings from the environment and the YAML file, two worker
processes on one port, and a clean stop on SIGTERM."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from tests.helpers import read_topic, wait_for

from .conftest import ol_event, post

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_command_serves_with_its_settings_from_the_environment_and_the_config_file(
        settings: Settings, tmp_path: pathlib.Path) -> None:
    port = free_port()
    config = tmp_path / "lineagewire.yaml"
    config.write_text(f"kafka:\n  bootstrap_servers: {settings.bootstrap_servers}\n  topics: {{jobs: "
                      f"{settings.topics.jobs}}}\ningest:\n  port: {port}\n  workers: 2\n  outbox_dir: {tmp_path}/ob\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_") or k == "LINEAGEWIRE_HOME"}
    env["LINEAGEWIRE_INGEST__TOKEN"] = "from-the-environment"
    proc = subprocess.Popen([sys.executable, "-m", "lineagewire", "--config", str(config), "ingest", "openlineage"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url), timeout=60, every=0.1)
        refused = post(url, ol_event("command"))
        events = [ol_event("command", "START") for _ in range(6)]
        taken = [post(url, e, headers={"Authorization": "Bearer from-the-environment"}) for e in events]
        got = read_topic(settings, settings.topics.jobs, 2 * len(events))  # START: JobCreated, then RUNNING
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        err = proc.communicate(timeout=10)[1]
    assert refused.status == 401
    assert [a.status for a in taken] == [201] * len(events)
    assert sorted(e["header"]["run_id"] for e in got if e.get("new_status") == "RUNNING") == \
        sorted(e["run"]["runId"] for e in events)
    assert proc.returncode == 0, err[-2000:]
    assert "(2 process(es))" in err and "Traceback" not in err
    # two receivers ran: the second spooled beside the first (its own outbox folder inside the one given)
    assert len(list((tmp_path / "ob").glob("proc-*"))) == 1


def _answers(url: str) -> bool:
    try:
        return post(url, b"", method="GET", path="/healthz").status == 200
    except OSError:
        return False


def test_one_receiver_process_stops_on_sigterm_after_flushing_and_exits_0(
        settings: Settings, tmp_path: pathlib.Path) -> None:
    # uvicorn raises the SIGTERM it handled again once it stopped: the command must still flush, report and exit 0
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_") or k == "LINEAGEWIRE_HOME"}
    env.update(LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS=settings.bootstrap_servers,
               LINEAGEWIRE_KAFKA__TOPICS__JOBS=settings.topics.jobs, LINEAGEWIRE_INGEST__PORT=str(port),
               LINEAGEWIRE_INGEST__OUTBOX_DIR=str(tmp_path / "ob"))
    proc = subprocess.Popen([sys.executable, "-m", "lineagewire", "ingest", "openlineage"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url), timeout=60, every=0.1)
        taken = [post(url, ol_event("one-process", "START")) for _ in range(3)]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        err = proc.communicate(timeout=10)[1]
    assert [a.status for a in taken] == [201] * 3
    assert proc.returncode == 0, err[-2000:]
    # the stopped line comes after the sink closed: every message (JobCreated + RUNNING per START) confirmed by
    # Kafka, none left behind in the outbox
    assert "stopped; 3 request(s) taken, 0 refused; {'delivered': 6, 'spooled': 0, 'in_outbox': 0}" in err, err[-2000:]
    assert len(read_topic(settings, settings.topics.jobs, 6)) == 6
