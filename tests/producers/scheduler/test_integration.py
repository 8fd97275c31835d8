"""The scheduler against the real broker: commands on Kafka, status back from job events,
kill -9 and restart, two instances on one database."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from lineagewire.kafka.publisher import Publisher
from lineagewire.producers.scheduler.service import SchedulerService, ServiceConfig, create_app
from lineagewire.producers.scheduler.tables import TableCatalog
from lineagewire.schemas import Codec, header, job_status_changed
from tests import helpers
from tests.helpers import read_topic

from .conftest import TABLES, ServerThread
from .topics import fresh_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "integration-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def lw_settings(kafka_settings: Settings) -> Iterator[Settings]:
    """Fresh jobs and refresh-commands topics."""
    with fresh_topics(kafka_settings) as settings:
        yield settings


def wait_for(predicate: Any, timeout: float = 60.0, every: float = 0.2) -> Any:  # noqa: ANN001
    return helpers.wait_for(predicate, timeout, every)


def status_of(cmd: dict, new: str, old: str | None, *, error: bool = False) -> dict:
    h = cmd["header"]
    hdr = header("JobStatusChangedEvent", job_namespace=h["job_namespace"], job_name=h["job_name"],
                 run_id=h["run_id"], parent_run=h["parent_run"], schedule=h["schedule"])
    err = {"error_class": "org.apache.spark.SparkException", "message": "disk full", "stack_trace": None} \
        if error else None
    return job_status_changed(hdr, new, old, error=err, duration_ms=50 if new != "RUNNING" else None)  # type: ignore


def test_commands_on_kafka_and_status_from_job_events(lw_settings: Settings, catalog: TableCatalog,
                                                       tmp_path: pathlib.Path) -> None:
    config = ServiceConfig(db_url=f"sqlite:///{tmp_path / 's.db'}", token=TOKEN, misfire_grace=5, max_attempts=2,
                           retry_backoff=0.5, status_group=f"status-{os.getpid()}-{time.monotonic_ns()}")
    service = SchedulerService(config, lw_settings, catalog=catalog)
    cmds_topic = lw_settings.topics.refresh_commands
    with ServerThread(create_app(service)) as srv, httpx.Client(base_url=srv.url, headers=AUTH) as http:
        w = http.post("/workflows", json={"table": "mart.hourly", "cron": "*/2 * * * * *"}).json()
        cmds = read_topic(lw_settings, cmds_topic, 2, timeout=60, decode=False)
        assert len(cmds) == 2
        assert {m.key() for m in cmds} == {b"mart.hourly"}
        first = sorted((Codec().decode(m.value()) for m in cmds),
                       key=lambda e: e["nominal_time"])[0]
        assert first["workflow_id"] == w["id"] and first["header"]["schedule"]["command_id"] == first["command_id"]
        http.post(f"/workflows/{w['id']}/suspend")

        with Publisher(lw_settings) as pub:  # what the runner's emitter sends back
            pub.publish(status_of(first, "RUNNING", "CREATED"))
            pub.publish(status_of(first, "FINISHED", "RUNNING"))
        done = wait_for(lambda: (r := http.get(f"/refreshes/{first['command_id']}").json())["status"] == "COMPLETED"
                        and r)
        assert done["duration_ms"] == 50 and done["retry_count"] == 0

        second = next(e for e in (Codec().decode(m.value()) for m in cmds)
                      if e["command_id"] != first["command_id"])
        with Publisher(lw_settings) as pub:
            pub.publish(status_of(second, "FAILED", "RUNNING", error=True))
        # a retry (attempt 2) is published after the backoff
        retried = wait_for(lambda: [e for e in read_topic(lw_settings, cmds_topic, 10, timeout=3)
                                    if e["command_id"] == second["command_id"] and e["attempt"] == 2])
        assert retried[0]["header"]["run_id"] != second["header"]["run_id"]
        with Publisher(lw_settings) as pub:
            pub.publish(status_of(retried[0], "FAILED", "RUNNING", error=True))
        r = wait_for(lambda: (r := http.get(f"/refreshes/{second['command_id']}").json())["status"] == "FAILED"
                     and r["attempt"] == 2 and r)
        assert r["error"] == "org.apache.spark.SparkException: disk full" and r["next_retry_at"] is None
        ts = http.get("/tables/mart.hourly/status").json()
        assert ts["healthy"] is False and "disk full" in ts["reason"]


# -- real processes ----------------------------------------------------------------------------------------------------

class Proc:
    """`lineagewire scheduler serve` in a subprocess."""

    def __init__(self, settings: Settings, tables: pathlib.Path, db: str, log: pathlib.Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "LINEAGEWIRE_TOPICS__JOBS": settings.topics.jobs,
               "LINEAGEWIRE_TOPICS__REFRESH_COMMANDS": settings.topics.refresh_commands,
               "LINEAGEWIRE_SCHEDULER_STATUS_GROUP": f"status-{time.monotonic_ns()}"}
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers, "scheduler",
             "serve", "--tables", str(tables), "--db-url", db, "--port", str(self.port), "--token", TOKEN,
             "--misfire-grace", "1"], env=env, stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(self._up, timeout=90)

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"scheduler exited with {self.proc.returncode}")
        try:
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        if not self._log.closed:
            self._log.close()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


@pytest.fixture
def tables_file(tmp_path: pathlib.Path) -> pathlib.Path:
    f = tmp_path / "tables.yaml"
    f.write_text(yaml.safe_dump(TABLES))
    return f


def commands(settings: Settings, n_at_least: int = 1) -> list[dict]:
    return read_topic(settings, settings.topics.refresh_commands, 100_000, timeout=5)


def test_killed_and_restarted_scheduler_follows_misfire_policy(lw_settings: Settings, tables_file: pathlib.Path,
                                                              tmp_path: pathlib.Path, procs: list[Proc]) -> None:
    db = f"sqlite:///{tmp_path / 'sched.db'}"
    p = Proc(lw_settings, tables_file, db, tmp_path / "s1.log")
    procs.append(p)
    ids = {}
    with httpx.Client(base_url=p.url, headers=AUTH) as http:
        for policy in ("skip", "fire_once", "catch_up"):
            ids[policy] = http.post("/workflows", json={"table": "mart.hourly", "cron": "* * * * * *",
                                                        "misfire_policy": policy, "catchup_cap": 3}).json()["id"]
        wait_for(lambda: all(http.get(f"/workflows/{i}").json()["last_fire"] for i in ids.values()))
    p.kill()
    time.sleep(6)  # six nominal times of each workflow pass while it is down
    restart = dt.datetime.now(dt.UTC)
    p2 = Proc(lw_settings, tables_file, db, tmp_path / "s2.log")
    procs.append(p2)
    with httpx.Client(base_url=p2.url, headers=AUTH) as http:
        wait_for(lambda: all(http.get(f"/workflows/{i}").json()["last_fire"] > restart.isoformat()
                             for i in ids.values()), timeout=60)
        for i in ids.values():
            http.post(f"/workflows/{i}/suspend")
        refreshes = {k: http.get("/refreshes", params={"workflow_id": i, "limit": 500}).json() for k, i in ids.items()}
    misfires = {k: sum(r["trigger"] == "MISFIRE" for r in rs) for k, rs in refreshes.items()}
    assert misfires == {"skip": 0, "fire_once": 1, "catch_up": 3}
    # skip: nothing at all for the nominal times well inside the downtime
    skip_times = sorted(dt.datetime.fromisoformat(r["nominal_time"].replace("Z", "+00:00"))
                        for r in refreshes["skip"])
    gaps = [b - a for a, b in itertools.pairwise(skip_times)]
    assert max(gaps) >= dt.timedelta(seconds=5)
    # every fire on Kafka once: same command ids as the database, no (workflow, nominal time) twice
    published = commands(lw_settings)
    db_ids = {r["command_id"] for rs in refreshes.values() for r in rs}
    topic_ids = [e["command_id"] for e in published]
    assert set(topic_ids) <= db_ids
    fires = [(e["workflow_id"], e["nominal_time"], e["attempt"]) for e in published]
    assert len(fires) == len(set(fires))


def test_two_instances_on_one_database_fire_once_per_nominal_time(lw_settings: Settings, tables_file: pathlib.Path,
                                                                  tmp_path: pathlib.Path, procs: list[Proc]) -> None:
    db = f"sqlite:///{tmp_path / 'shared.db'}"
    a = Proc(lw_settings, tables_file, db, tmp_path / "a.log")
    procs.append(a)
    b = Proc(lw_settings, tables_file, db, tmp_path / "b.log")
    procs.append(b)
    with httpx.Client(base_url=a.url, headers=AUTH) as http:
        for _ in range(20):
            assert http.post("/workflows", json={"table": "mart.hourly", "cron": "* * * * * *"}).status_code == 201
    time.sleep(6)
    with httpx.Client(base_url=b.url, headers=AUTH) as http:
        for w in http.get("/workflows").json():
            http.post(f"/workflows/{w['id']}/suspend")
    published = commands(lw_settings)
    fires = [(e["workflow_id"], e["nominal_time"]) for e in published]
    assert len(fires) >= 20 * 3
    assert len(fires) == len(set(fires)), "a nominal time was fired twice"
