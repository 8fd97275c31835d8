"""Spark Connect thin clients (issue 22, item 1): a local server under `lineagewire instrument`, and
`lineagewire connect-server` shared by two clients at once, each client in a process of its own."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import grpc  # noqa: E402, F401 - the connect extra (in dev): a missing one fails here, it does not skip
import pytest

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from lineagewire.kafka.reader import TopicReader
from lineagewire.producers.spark import versions
from lineagewire.schemas import Codec
from tests.helpers import wait_for
from tests.producers.packages import IVY_SETTINGS

ROOT = pathlib.Path(__file__).resolve().parents[3]
JOBS = pathlib.Path(__file__).with_name("connect_jobs")

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def _events(settings: Settings) -> list[dict]:
    codec = Codec()
    with TopicReader(settings, settings.topics.jobs, start="beginning", end="end") as reader:
        return [codec.decode(m.value()) for m in reader]


def _kind(event: dict) -> str:
    return event["header"]["schema_name"].rsplit(".", 1)[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGEWIRE_", "SPARK_REMOTE"))}
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def _names(datasets: list[dict]) -> set[str]:
    return {d["name"] for d in datasets}


def test_local_connect_client_under_instrument_reports_like_a_classic_session(settings, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "out"
    env = _env()
    # PySpark's own switch for an ephemeral server port (instead of 15002), so parallel test runs do not clash.
    env["SPARK_TESTING"] = "1"
    if package := versions.connect_package(""):
        # Spark 3.5: the Connect server is a package the user names, as PySpark's docs say (`--packages`).
        env["PYSPARK_SUBMIT_ARGS"] = f"--packages {package} --conf spark.jars.ivySettings={IVY_SETTINGS} pyspark-shell"
    proc = subprocess.run(
        [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers, "instrument",
         "--topic", settings.topics.jobs, "--namespace", "connect", "--set", f"outbox_dir={tmp_path / 'outbox'}",
         "--set", "time_budget_ms=10000", "--", sys.executable, str(JOBS / "local_client.py"), str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "connect-local: wrote 5" in proc.stdout
    assert "did not start" not in proc.stderr

    events = sorted(_events(settings), key=lambda e: e["header"]["sequence"])
    assert {(e["header"]["job_name"], e["header"]["run_id"]) for e in events} == \
        {("connect-local", events[0]["header"]["run_id"])}, "one application run, as a classic session's"
    assert [e["header"]["sequence"] for e in events] == list(range(len(events)))
    assert _kind(events[0]) == "JobCreatedEvent"
    assert [(e["old_status"], e["new_status"]) for e in events if _kind(e) == "JobStatusChangedEvent"] == \
        [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    actions = [e for e in events if _kind(e) == "ActionLineageEvent"]
    numbers, odd = str(out / "numbers"), str(out / "odd")
    writes = {next(iter(_names(a["outputs"]))): a for a in actions if a["outputs"]}
    assert set(writes) == {numbers, odd}
    assert _names(writes[odd]["inputs"]) == {numbers}
    edges = {(c["field"], f["field"]) for c in writes[odd]["column_lineage"] for f in c["inputs"]}
    assert ("odd", "twice") in edges
    assert all(a["action_status"] == "SUCCEEDED" for a in actions)


def test_shared_connect_server_gives_each_client_session_its_own_run(settings, tmp_path) -> None:  # noqa: ANN001
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers,
             "connect-server", "--port", str(port), "--master", "local[2]",
             "--conf", f"spark.lineagewire.topic={settings.topics.jobs}",
             "--conf", f"spark.lineagewire.outbox_dir={tmp_path / 'outbox'}",
             "--conf", "spark.lineagewire.namespace=shared", "--conf", "spark.lineagewire.time_budget_ms=10000",
             "--conf", "spark.ui.enabled=false", "--conf", f"spark.jars.ivySettings={IVY_SETTINGS}"],
            cwd=ROOT, env=_env(), stdout=sink, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: "listening on sc://" in log.read_text() or server.poll() is not None, timeout=240)
        assert server.poll() is None, log.read_text()[-3000:]
        url = f"sc://127.0.0.1:{port}"
        clients = {name: subprocess.Popen(
            [sys.executable, str(JOBS / "remote_client.py"), url, name, f"team-{name}", str(tmp_path / name)],
            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name in ("orders", "billing")}  # both at once, on the one server
        for name, client in clients.items():
            stdout, stderr = client.communicate(timeout=300)
            assert client.returncode == 0, stderr[-3000:]
            assert f"{name} wrote 3" in stdout
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert server.returncode == 0, log.read_text()[-3000:]

    events = _events(settings)
    created = {e["header"]["job_name"]: e for e in events if _kind(e) == "JobCreatedEvent"}
    assert set(created) == {"lineagewire-connect-server", "orders", "billing"}
    server_run = created["lineagewire-connect-server"]["header"]["run_id"]
    for name in ("orders", "billing"):
        run = created[name]
        run_id = run["header"]["run_id"]
        assert run["header"]["job_namespace"] == "shared"
        assert run["header"]["parent_run"]["run_id"] == server_run
        tags = run["spec"]["tags"]
        assert tags["connect.tags"] == f"team-{name}" and tags["connect.session_id"]
        mine = [e for e in events if e["header"]["run_id"] == run_id]
        assert [(e["old_status"], e["new_status"]) for e in sorted(mine, key=lambda e: e["header"]["sequence"])
                if _kind(e) == "JobStatusChangedEvent"] == [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
        actions = [e for e in mine if _kind(e) == "ActionLineageEvent"]
        folder = tmp_path / name
        writes = {next(iter(_names(a["outputs"]))): a for a in actions if a["outputs"]}
        assert set(writes) == {str(folder / "in"), str(folder / "out")}, "this client's writes, and only them"
        assert _names(writes[str(folder / "out")]["inputs"]) == {str(folder / "in")}
        edges = {(c["field"], f["field"]) for c in writes[str(folder / "out")]["column_lineage"]
                 for f in c["inputs"]}
        assert ("k", "k") in edges
    assert not [e for e in events if _kind(e) == "ActionLineageEvent" and e["header"]["run_id"] == server_run], \
        "no client action is left in the server's own run"
