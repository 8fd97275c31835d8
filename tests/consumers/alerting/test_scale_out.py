"""Several ``consume alerting`` instances in one group, sharing one PostgreSQL database, page once per alert
state change: the way an on-call team scales the service out.

Each repetition starts 2 or 3 real service processes on a fresh 6-partition topic of the real broker, with a fresh
database of a real PostgreSQL server and a webhook at a real HTTP receiver on 127.0.0.1, publishes failing runs
of a dozen jobs, SIGKILLs an instance (two, with three instances) at random points (while joining, reading,
claiming or posting), restarts it, and publishes good runs for half of the jobs. It then waits for every firing
and every resolve and stops the instances: each (fingerprint, status, startsAt) must have reached the receiver
exactly once. The one exception the docs allow is a notification whose claim was taken over from a killed
instance (its ``claims`` in the outbox > 1): the dead one may have posted it before the kill, so it may arrive
at most once per claim. Ten and more repetitions in one run, about a minute and a half in all.
"""

from __future__ import annotations

import collections
import datetime as dt
import os
import pathlib
import random
import subprocess
import sys
import time
import uuid

import pytest
import sqlalchemy as sa
import yaml

from lineagewire.kafka.publisher import Publisher
from lineagewire.processes import stop_process
from tests.helpers import wait_for

from .events import RunBuilder, error
from .receivers import HttpReceiver

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPETITIONS = 10
JOBS = 12
#: a member killed holds its partitions until its session ends: the broker's least (6 s), not the runtime's 10 s
CONSUMER = ("--consumer-property", "session.timeout.ms=6000", "--consumer-property", "heartbeat.interval.ms=500")


def _rules(folder: pathlib.Path, url: str) -> pathlib.Path:
    rules = folder / "rules.yaml"
    rules.write_text(yaml.safe_dump({
        # a claim of a killed instance is taken over after 3 s (the webhook's attempts time out after 1 s)
        "claim_lease": "3s",
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "1s",
                  "repeat_interval": "4h", "channels": ["hook"]},
        "channels": {"hook": {"type": "webhook", "url": url, "timeout": 1}},
        "rules": [{"name": "failed", "kind": "run_failed"}],
    }))
    return rules


class Instances:
    """Service processes of one group; ``kill`` is a SIGKILL, ``start`` a (re)start with the same command."""

    def __init__(self, settings, rules: pathlib.Path, db: str, group: str, log: pathlib.Path) -> None:  # noqa: ANN001
        self.cmd = [sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers, "consume",
                    "alerting", "--rules", str(rules), "--database", db, "--topic", settings.topics.jobs,
                    "--group", group, "--no-dlq", "--notify-since", "1h", *CONSUMER]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
        self.cwd, self.log = rules.parent, log
        self.procs: list[subprocess.Popen] = []

    def start(self, i: int | None = None) -> None:
        with open(self.log, "ab") as err:
            proc = subprocess.Popen(self.cmd, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=err)
        if i is None:
            self.procs.append(proc)
        else:
            self.procs[i] = proc

    def kill(self, i: int) -> None:
        self.procs[i].kill()
        self.procs[i].wait(30)

    def stop(self) -> None:
        codes = [stop_process(p, 60) for p in self.procs]
        assert all(c in (0, -9) for c in codes), (codes, self.log.read_text()[-4000:])


def _publish(settings, events: list[dict]) -> None:  # noqa: ANN001
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
        pub.flush(60)


def _received(receiver: HttpReceiver, path: str) -> collections.Counter[tuple[str, str, str]]:
    return collections.Counter((a["fingerprint"], a["status"], a["startsAt"])
                               for r in receiver.on(path) for a in r.json["alerts"])


def _claims(db: str) -> dict[tuple[str, str, str], int]:
    """(fingerprint, status, startsAt) -> how many times its outbox row was claimed (more than once: taken over)."""
    engine = sa.create_engine(db)
    try:
        with engine.connect() as c:
            rows = c.execute(sa.text("SELECT payload, claims, state FROM alerting_outbox")).all()
    finally:
        engine.dispose()
    assert all(r.state == "delivered" for r in rows), [(r.payload, r.state) for r in rows if r.state != "delivered"]
    out: dict[tuple[str, str, str], int] = {}
    for r in rows:
        for a in r.payload["alerts"]:
            key = (a["fingerprint"], a["status"], a["startsAt"])
            out[key] = out.get(key, 0) + int(r.claims)
    return out


def _repetition(n: int, rnd: random.Random, settings, postgres, receiver: HttpReceiver,  # noqa: ANN001
                folder: pathlib.Path) -> tuple[int, int]:
    """One run of the scenario; (notifications received, claims taken over)."""
    folder.mkdir()
    path = f"/hook/{n}"
    count = 2 if n % 2 == 0 else 3
    db, group = postgres.new_database(), f"alerting-ha-{uuid.uuid4().hex[:8]}"
    fleet = Instances(settings, _rules(folder, receiver.url + path), db, group, folder / "services.log")
    runs = {f"job{j:02d}": RunBuilder(f"job{j:02d}", namespace="prod") for j in range(JOBS)}
    try:
        for _ in range(count):
            fleet.start()
        now = dt.datetime.now(dt.UTC)
        failures = [e for j, b in enumerate(runs.values()) for e in b.life(now + dt.timedelta(milliseconds=j), 1,
                                                                          end="FAILED", error=error())]
        kills = sorted(rnd.uniform(0.0, 4.0) for _ in range(1 if count == 2 else 2))
        t0 = time.monotonic()
        _publish(settings, failures[: len(failures) // 2])
        for at in kills:
            victim = rnd.randrange(count)
            wait_for(lambda at=at: time.monotonic() - t0 >= at, timeout=10, every=0.02)  # noqa: B023
            fleet.kill(victim)
            if at == kills[0]:
                _publish(settings, failures[len(failures) // 2:])
            fleet.start(victim)
        if len(kills) == 1:
            _publish(settings, failures[len(failures) // 2:])
        firing = {("firing", job) for job in runs}
        receiver.wait(path, lambda got: {(a["status"], a["labels"]["job"]) for r in got
                                         for a in r.json["alerts"]} >= firing, timeout=60)
        later = dt.datetime.now(dt.UTC)
        good = [e for b in list(runs.values())[: JOBS // 2]
                for e in RunBuilder(b.job, namespace="prod").life(later, 1)]
        _publish(settings, good)
        expected = len(runs) + JOBS // 2
        receiver.wait(path, lambda got: len({(a["status"], a["labels"]["job"]) for r in got
                                             for a in r.json["alerts"]}) >= expected, timeout=60)
    finally:
        fleet.stop()
    got = _received(receiver, path)
    claims = _claims(db)
    statuses = collections.Counter(s for _, s, _ in got)
    assert statuses == {"firing": JOBS, "resolved": JOBS // 2} and len(got) == expected, (n, got)
    assert set(claims) == set(got), (n, set(claims) ^ set(got))
    for key, times in got.items():
        # Exactly once, unless the claim was taken over from a killed instance: then at most once per claim.
        assert times == 1 or times <= claims[key], (f"repetition {n} ({count} instances, kills at {kills}): "
                                                     f"{key} received {times} times, claimed {claims[key]}")
    return sum(got.values()), sum(c - 1 for c in claims.values())


def test_instances_of_one_group_send_one_notification_per_alert_state_change_across_kills(
        kafka_settings, topic_factory, postgres, tmp_path, http_receiver: HttpReceiver) -> None:  # noqa: ANN001
    seed = int(os.environ.get("LINEAGEWIRE_TEST_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    received = taken_over = 0
    for n in range(REPETITIONS):
        topic = topic_factory("alerting-ha", 6)
        settings = kafka_settings.model_copy(
            update={"topics": kafka_settings.topics.model_copy(update={"jobs": topic})})
        try:
            got, over = _repetition(n, rnd, settings, postgres, http_receiver, tmp_path / f"r{n}")
        except AssertionError as exc:
            raise AssertionError(f"seed {seed} (LINEAGEWIRE_TEST_SEED), repetition {n}: {exc}") from exc
        received += got
        taken_over += over
    assert received >= REPETITIONS * (JOBS + JOBS // 2)
    print(f"seed {seed}: {received} notifications, {taken_over} claim(s) taken over from killed instances")
