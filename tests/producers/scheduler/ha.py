"""Real `lineagewire scheduler serve` processes, and the high-availability scenario the test and the bench run.

HA scenario: two instances on one database fire a 1-second cron for a few
workflows; midway one instance is killed with SIGKILL and restarted. Every
nominal time from the first to the last must be fired exactly once: on the
topic no (workflow, nominal time) twice and none missing, and both instances
must have claimed fires (``claimed_by``), so a dead instance cannot pass.
"""

from __future__ import annotations

import collections
import datetime as dt
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx

from lineagewire.config import Settings
from lineagewire.kafka.local import free_port
from lineagewire.processes import stop_process
from tests.helpers import read_topic, wait_for

__all__ = ["TOKEN", "Proc", "all_refreshes", "publish_write", "run_ha", "run_upstream_ha"]

TOKEN = "integration-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Proc:
    """`lineagewire scheduler serve` in a subprocess, on its own port."""

    def __init__(self, settings: Settings, tables: pathlib.Path, db: str, log: pathlib.Path, *,
                 misfire_grace: float = 1, status_group: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "LINEAGEWIRE_KAFKA__TOPICS__JOBS": settings.topics.jobs,
               "LINEAGEWIRE_KAFKA__TOPICS__REFRESH_COMMANDS": settings.topics.refresh_commands,
               "LINEAGEWIRE_SCHEDULER__STATUS_GROUP": status_group or f"status-{uuid.uuid4().hex[:8]}",
               # one inputs group per scenario (the topics are the test's own): instances share it
               "LINEAGEWIRE_SCHEDULER__INPUTS_GROUP": f"inputs-{settings.topics.jobs}"}
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers, "scheduler",
             "serve", "--tables", str(tables), "--db-url", db, "--port", str(self.port), "--token", TOKEN,
             "--misfire-grace", str(misfire_grace)], env=env, stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(self._up, timeout=90)
        self.instance: str = httpx.get(f"{self.url}/health", timeout=10).json()["instance"]

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"scheduler exited with {self.proc.returncode}")
        try:
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=AUTH, timeout=30)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._log.close()

    def stop(self) -> None:
        stop_process(self.proc, 30)
        if not self._log.closed:
            self._log.close()


def all_refreshes(http: httpx.Client, workflow_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    return {w: http.get("/refreshes", params={"workflow_id": w, "limit": 1000}).json() for w in workflow_ids}


def _t(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def run_ha(settings: Settings, tables: pathlib.Path, db: str, workdir: pathlib.Path, *, seconds: float,
           workflows: int = 5, procs: list[Proc] | None = None) -> dict[str, Any]:
    """Run the scenario for ``seconds``; return the figures (see the module docstring)."""
    started: list[Proc] = procs if procs is not None else []
    try:
        a = Proc(settings, tables, db, workdir / "a.log", misfire_grace=60)
        started.append(a)
        b = Proc(settings, tables, db, workdir / "b.log", misfire_grace=60)
        started.append(b)
        with b.client() as http:
            ids = [http.post("/workflows", json={"table": "mart.hourly", "cron": "* * * * * *",
                                                 "misfire_policy": "catch_up", "catchup_cap": 1000}).json()["id"]
                   for _ in range(workflows)]
        t0 = time.monotonic()
        wait_for(lambda: time.monotonic() - t0 >= seconds / 2, timeout=seconds + 60, every=0.5)
        a.kill()
        killed_at = dt.datetime.now(dt.UTC)
        a2 = Proc(settings, tables, db, workdir / "a2.log", misfire_grace=60)
        started.append(a2)
        restarted_at = dt.datetime.now(dt.UTC)
        wait_for(lambda: time.monotonic() - t0 >= seconds, timeout=seconds + 60, every=0.5)
        with b.client() as http:
            for w in ids:
                assert http.post(f"/workflows/{w}/suspend").status_code == 200
            # The killed instance's unsent claims are republished by the others (republish_after, 15 s).
            rows = wait_for(lambda: (r := all_refreshes(http, ids)) and all(
                x["status"] != "PENDING" for rs in r.values() for x in rs) and r, timeout=90, every=1)
    finally:
        if procs is None:
            for p in started:
                p.stop()
    db_fires = [(w, _t(x["nominal_time"])) for w, rs in rows.items() for x in rs]
    published = read_topic(settings, settings.topics.refresh_commands, len(db_fires) + 1000, timeout=15)
    on_topic = collections.Counter((e["workflow_id"], e["nominal_time"]) for e in published if e["workflow_id"] in ids)
    missed = 0
    for w in ids:
        times = sorted(t for wid, t in db_fires if wid == w)
        expected = {times[0] + dt.timedelta(seconds=i) for i in range(int((times[-1] - times[0]).total_seconds()) + 1)}
        missed += len(expected - {t for wid, t in on_topic if wid == w})
    claimers = collections.Counter(x["claimed_by"] for rs in rows.values() for x in rs)
    return {
        "seconds": seconds, "workflows": workflows, "database": db.split(":", 1)[0],
        "nominal_times": len(db_fires), "published": sum(on_topic.values()),
        "duplicates": sum(n - 1 for n in on_topic.values() if n > 1), "missed": missed,
        "not_on_topic": len(set(db_fires) - set(on_topic)),
        "misfire_fires": sum(x["trigger"] == "MISFIRE" for rs in rows.values() for x in rs),
        "claims_per_instance": {"a": claimers.get(a.instance, 0), "b": claimers.get(b.instance, 0),
                                "a_restarted": claimers.get(a2.instance, 0)},
        "killed_at": killed_at.isoformat(), "restarted_after_s": (restarted_at - killed_at).total_seconds(),
    }


def publish_write(settings: Settings, table: str, *, job: str = "ingest_orders", status: str = "FINISHED",
                  run_id: str | None = None) -> dict[str, str]:
    """What an upstream Spark job's emitter sends for a run that writes catalog table ``table``: its action's
    lineage (the output, SUCCEEDED unless the run failed) and its final status. Returns the run (a RunRef)."""
    from lineagewire.kafka.publisher import Publisher
    from lineagewire.schemas import action_lineage, dataset, header, job_status_changed

    run = {"job_namespace": "spark", "job_name": job, "run_id": run_id or str(uuid.uuid4())}
    ok = status == "FINISHED"
    out = dataset("spark_catalog", table, symlinks=[{"namespace": "spark_catalog", "name": table, "type": "TABLE"}])
    action = action_lineage(header("ActionLineageEvent", **run), str(uuid.uuid4()), "InsertIntoHadoopFsRelation",
                            outputs=[out], action_status="SUCCEEDED" if ok else "FAILED")
    err = None if ok else {"error_class": "org.apache.spark.SparkException", "message": "disk full",
                           "stack_trace": None}
    done = job_status_changed(header("JobStatusChangedEvent", **run), status, "RUNNING",  # type: ignore[arg-type]
                              error=err, duration_ms=10)  # type: ignore[arg-type]
    with Publisher(settings) as pub:
        pub.publish(action)
        pub.publish(done)
        pub.flush(30)
    return run


def run_upstream_ha(settings: Settings, tables: pathlib.Path, db: str, workdir: pathlib.Path, *, table: str,
                    upstream_table: str, procs: list[Proc]) -> dict[str, Any]:
    """Two instances on one database and an UPSTREAM workflow (debounce 4 s): an upstream write, one instance
    killed while the write's debounce runs, then a restart and a second write. Each write must make one
    refresh on the topic, naming its upstream run, whoever fires it: not zero, not two."""
    a = Proc(settings, tables, db, workdir / "up-a.log")
    procs.append(a)
    b = Proc(settings, tables, db, workdir / "up-b.log")
    procs.append(b)
    with b.client() as http:
        wid = http.post("/workflows", json={"table": table}).json()["id"]
        first = publish_write(settings, upstream_table)
        # the write is stored (by whichever instance's tracker reads its partition): the debounce runs; kill one
        wait_for(lambda: any(i["last_write_run"] and i["last_write_run"]["run_id"] == first["run_id"]
                             for i in http.get(f"/tables/{table}/inputs").json()["inputs"]), timeout=60, every=0.1)
        killed_mid_debounce = not all_refreshes(http, [wid])[wid]
    a.kill()
    with b.client() as http:
        one = wait_for(lambda: all_refreshes(http, [wid])[wid], timeout=60, every=0.2)
    a2 = Proc(settings, tables, db, workdir / "up-a2.log")
    procs.append(a2)
    cmds = wait_for(lambda: [e for e in read_topic(settings, settings.topics.refresh_commands, 100, timeout=3)
                             if e["workflow_id"] == wid] or None, timeout=60, every=0.5)
    from lineagewire.kafka.publisher import Publisher
    from lineagewire.schemas import header, job_status_changed

    h = cmds[0]["header"]
    with Publisher(settings) as pub:  # the runner finished the first refresh: the table is free again
        pub.publish(job_status_changed(header("JobStatusChangedEvent", job_namespace=h["job_namespace"],
                                              job_name=h["job_name"], run_id=h["run_id"], schedule=h["schedule"]),
                                       "FINISHED", "RUNNING", duration_ms=10))
    with a2.client() as http:
        wait_for(lambda: http.get(f"/refreshes/{cmds[0]['command_id']}").json()["status"] == "COMPLETED",
                 timeout=60, every=0.2)
        second = publish_write(settings, upstream_table)
        wait_for(lambda: len(all_refreshes(http, [wid])[wid]) >= 2, timeout=60, every=0.2)
    # read for 6 s (fewer than 100 come): a duplicate would have had a debounce and rounds of every instance
    published = [e for e in read_topic(settings, settings.topics.refresh_commands, 100, timeout=6)
                 if e["workflow_id"] == wid and e.get("header", {}).get("schedule", {}).get("trigger") == "UPSTREAM"]
    by_run = collections.Counter(e["header"]["schedule"]["trigger_run"]["run_id"] for e in published)
    with b.client() as http:
        rows = all_refreshes(http, [wid])[wid]
    return {"killed_mid_debounce": killed_mid_debounce, "first_fired_by": one[0]["claimed_by"],
            "instances": {"a": a.instance, "b": b.instance, "a_restarted": a2.instance},
            "refreshes_per_upstream_run": {first["run_id"]: by_run.get(first["run_id"], 0),
                                           second["run_id"]: by_run.get(second["run_id"], 0)},
            "refreshes": len(rows), "commands": len(published)}
