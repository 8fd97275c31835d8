"""Several ``consume alerting`` instances in one group, sharing one PostgreSQL database, page once per alert
state change: the way an on-call team scales the service out.

Each repetition starts 2 or 3 real service processes on a fresh 6-partition topic of the real broker, with a fresh
database of a real PostgreSQL server and a webhook at a real HTTP receiver on 127.0.0.1, publishes failing runs
of a dozen jobs, SIGKILLs an instance (two, with three instances) at random points (while joining, reading,
claiming or posting), restarts it, and publishes good runs for half of the jobs. It then waits for every firing
and every resolve and stops the instances: each (fingerprint, status, startsAt) must have reached the receiver
exactly once, from exactly one outbox row. The one exception the docs allow is a notification whose claim was
taken over from a killed instance (its row's ``takeovers`` > 0): the dead one may have posted it before the
kill, so it may arrive once more per takeover. Kills happen when something was seen (the first firing at the
receiver, a number of notifications), not after a sleep. Ten repetitions in one run, about 90 s in all.

Each repetition also has a chain: a producer job whose output two consumer jobs read fails among the first
failures, and the consumers fail once its page arrived (so, under the same kills): that page is the one
notification of the incident and names both consumers; the consumers are attached, not paged, until the
producer's good run resolves the incident, and then they page on their own, each once.
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
from lineagewire.schemas import action_lineage, dataset, header
from tests.helpers import wait_for

from .events import RunBuilder, error
from .receivers import HttpReceiver

REPETITIONS = 10
JOBS = 6
#: a member killed holds its partitions until its session ends: the broker's least (6 s), not the runtime's 10 s
CONSUMER = ("--consumer-property", "session.timeout.ms=6000", "--consumer-property", "heartbeat.interval.ms=500")


def _rules(folder: pathlib.Path, url: str) -> pathlib.Path:
    rules = folder / "rules.yaml"
    rules.write_text(yaml.safe_dump({
        # a claim of a killed instance is taken over after 2 s (the webhook's attempts time out after 1 s)
        "claim_lease": "2s",
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
        self.logs: list[pathlib.Path] = []  # each running process's own stderr
        self.started = 0
        self.killed: list[int | None] = []

    def start(self, i: int | None = None) -> None:
        log = self.log.with_name(f"{self.log.stem}-{self.started}.log")
        self.started += 1
        with open(log, "ab") as err:
            proc = subprocess.Popen(self.cmd, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=err)
        if i is None:
            self.procs.append(proc)
            self.logs.append(log)
        else:
            self.procs[i], self.logs[i] = proc, log

    def kill(self, i: int) -> None:
        self.procs[i].kill()
        self.killed.append(self.procs[i].wait(30))

    def stop(self) -> None:
        """SIGTERM the running ones: each must exit 0 (only the ones this test killed may have died of -9)."""
        # A service takes SIGTERM as "stop gracefully" once it says it is consuming; before that, Python's default
        # ends it (-15). A restarted instance may still be starting when the others have done all the work.
        for proc, log in zip(self.procs, self.logs, strict=True):
            wait_for(lambda proc=proc, log=log: proc.poll() is not None or "consuming" in log.read_text(), timeout=60)
        codes = [stop_process(p, 60) for p in self.procs]
        said = "".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in self.logs)
        assert all(c == 0 for c in codes) and all(c == -9 for c in self.killed), (codes, self.killed, said)


def _publish(settings, events: list[dict]) -> None:  # noqa: ANN001
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
        pub.flush(60)


def _received(receiver: HttpReceiver, path: str) -> collections.Counter[tuple[str, str, str]]:
    return collections.Counter((a["fingerprint"], a["status"], a["startsAt"])
                               for r in receiver.on(path) for a in r.json["alerts"])


def _with_lineage(job: str, start: dt.datetime, *, inputs: tuple[str, ...] = (),
                  outputs: tuple[str, ...] = ()) -> list[dict]:
    """A good run of ``job`` with an action reading ``inputs`` and writing ``outputs`` (s3 datasets) after it."""
    b = RunBuilder(job, namespace="prod")
    events = b.life(start, 1)
    h = header("ActionLineageEvent", job_namespace=b.namespace, job_name=b.job, run_id=b.run_id,
               sequence=len(events), event_time=events[-1]["header"]["event_time"])
    return [*events, dict(action_lineage(h, "1", "save", inputs=[dataset("s3", n) for n in inputs],
                                         outputs=[dataset("s3", n) for n in outputs]))]


def _edges(db: str) -> int:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as c:
            return int(c.execute(sa.text("SELECT count(*) FROM alerting_lineage_edges")).scalar())
    except sa.exc.ProgrammingError:  # the table is not there before the first instance migrated the database
        return 0
    finally:
        engine.dispose()


def _undelivered(db: str) -> int:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as c:
            return int(c.execute(sa.text("SELECT count(*) FROM alerting_outbox WHERE state <> 'delivered'")).scalar())
    finally:
        engine.dispose()


def _rows(db: str) -> dict[tuple[str, str, str], list[tuple[int, int]]]:
    """(fingerprint, status, startsAt) -> (claims, takeovers) of each outbox row telling it."""
    engine = sa.create_engine(db)
    try:
        with engine.connect() as c:
            rows = c.execute(sa.text("SELECT payload, claims, takeovers, state FROM alerting_outbox")).all()
    finally:
        engine.dispose()
    assert all(r.state == "delivered" for r in rows), [(r.payload, r.state) for r in rows if r.state != "delivered"]
    out: dict[tuple[str, str, str], list[tuple[int, int]]] = {}
    for r in rows:
        for a in r.payload["alerts"]:
            out.setdefault((a["fingerprint"], a["status"], a["startsAt"]), []).append((int(r.claims), int(r.takeovers)))
    return out


def check(got: collections.Counter[tuple[str, str, str]], rows: dict[tuple[str, str, str], list[tuple[int, int]]],
          where: str) -> int:
    """Every state change received once, from one outbox row, or once more per takeover of that row's claim from
    a killed instance; how many takeovers there were."""
    assert set(rows) == set(got), (where, set(rows) ^ set(got))
    for key, times in got.items():
        assert len(rows[key]) == 1, f"{where}: {key} was written to the outbox {len(rows[key])} times: {rows[key]}"
        ((claims, takeovers),) = rows[key]
        assert times <= 1 + takeovers, f"{where}: {key} received {times} times, claims {claims}, " \
                                       f"taken over {takeovers} times"
    return sum(t for r in rows.values() for _, t in r)


def _repetition(n: int, rnd: random.Random, settings, postgres, receiver: HttpReceiver,  # noqa: ANN001
                folder: pathlib.Path) -> tuple[int, int]:
    """One run of the scenario; (notifications received, claims taken over)."""
    folder.mkdir()
    path = f"/hook/{n}"
    count = 2 if n % 2 == 0 else 3
    db, group = postgres.new_database(), f"alerting-ha-{uuid.uuid4().hex[:8]}"
    fleet = Instances(settings, _rules(folder, receiver.url + path), db, group, folder / "services.log")
    runs = {f"job{j:02d}": RunBuilder(f"job{j:02d}", namespace="prod") for j in range(JOBS)}
    consumers = [f"consumer{i}" for i in range(2)]
    try:
        for _ in range(count):
            fleet.start()
        now = dt.datetime.now(dt.UTC)
        # the chain's lineage first: the producer writes feed, the consumers read it (a good run of each)
        _publish(settings, _with_lineage("producer", now - dt.timedelta(seconds=60), outputs=("feed",))
                 + [e for c in consumers for e in _with_lineage(c, now - dt.timedelta(seconds=50), inputs=("feed",))])
        wait_for(lambda: _edges(db) >= 3, timeout=60)
        src = RunBuilder("producer", namespace="prod")
        failures = [e for j, b in enumerate(runs.values()) for e in b.life(now + dt.timedelta(milliseconds=j), 1,
                                                                          end="FAILED", error=error())]
        failures = src.life(now, 1, end="FAILED", error=error()) + failures
        # when to kill: after this many notifications reached the receiver (0: while the group forms); the first
        # kill comes before the second half of the failures is published, so within what the first half pages
        kills = [rnd.randrange(0, JOBS // 2)]
        if count == 3:
            kills.append(rnd.randrange(kills[0], JOBS))
        _publish(settings, failures[: len(failures) // 2])
        for k, seen in enumerate(kills):
            victim = rnd.randrange(count)
            if seen:
                receiver.wait(path, lambda got, seen=seen: sum(len(r.json["alerts"]) for r in got) >= seen,
                              timeout=60)
            fleet.kill(victim)
            if k == 0:
                _publish(settings, failures[len(failures) // 2:])
                # the consumers fail after the producer's failure was paged (saved, whoever paged it)
                receiver.wait(path, lambda got: ("firing", "producer") in {
                    (a["status"], a["labels"]["job"]) for r in got for a in r.json["alerts"]}, timeout=60)
                later = dt.datetime.now(dt.UTC)
                _publish(settings, [e for c in consumers for e in RunBuilder(c, namespace="prod").life(
                    later, 1, end="FAILED", error=error())])
            fleet.start(victim)
        firing = {("firing", job) for job in [*runs, "producer"]}
        receiver.wait(path, lambda got: {(a["status"], a["labels"]["job"]) for r in got
                                         for a in r.json["alerts"]} >= firing, timeout=60)
        later = dt.datetime.now(dt.UTC)
        good = [e for b in [*list(runs.values())[: JOBS // 2], src]
                for e in RunBuilder(b.job, namespace="prod").life(later, 1)]
        _publish(settings, good)
        expected = len(runs) + JOBS // 2 + 2 + len(consumers)
        receiver.wait(path, lambda got: len({(a["status"], a["labels"]["job"]) for r in got
                                             for a in r.json["alerts"]}) >= expected, timeout=60)
        # A row that a killed instance sent but did not mark delivered is taken over once its claim's lease (2 s)
        # runs out, and sent again: the fleet stops after that, not while the row is still claimed by the dead.
        wait_for(lambda: _undelivered(db) == 0, timeout=60)
    finally:
        fleet.stop()
    got = _received(receiver, path)
    statuses = collections.Counter(s for _, s, _ in got)
    assert statuses == {"firing": JOBS + 1 + len(consumers), "resolved": JOBS // 2 + 1} and len(got) == expected, \
        (n, got)
    told = [(a["status"], a["labels"]["job"], a["annotations"]) for r in receiver.on(path) for a in r.json["alerts"]]
    (page,) = [notes for s, job, notes in told if (s, job) == ("firing", "producer")]
    assert page["affects"] == "prod/consumer0, prod/consumer1", page
    # attached while the incident was open: the consumers page only after the producer's resolve
    resolved = next(i for i, (s, job, _) in enumerate(told) if (s, job) == ("resolved", "producer"))
    assert min(i for i, (_, job, _) in enumerate(told) if job in consumers) > resolved, (n, told)
    over = check(got, _rows(db), f"repetition {n} ({count} instances, kills after {kills} notifications)")
    return sum(got.values()), over


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.postgres
def test_instances_of_one_group_send_one_notification_per_alert_state_change_across_kills(
        kafka_settings, topic_factory, postgres, tmp_path, http_receiver: HttpReceiver) -> None:  # noqa: ANN001
    seed = int(os.environ.get("LINEAGEWIRE_TEST_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    received = taken_over = 0
    started = time.monotonic()
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
    print(f"seed {seed}: {received} notifications, {taken_over} claim(s) taken over from killed instances, "
          f"{time.monotonic() - started:.0f}s")


def test_the_check_fails_on_a_state_change_written_twice_or_received_more_often_than_taken_over() -> None:
    """What the stress test asserts, on made-up counts: two rows for one state change (two instances each paging
    it) fail even when each was claimed once; a second receipt passes only for a row taken over."""
    key = ("f1", "firing", "2026-11-23T12:00:00Z")
    assert check(collections.Counter({key: 1}), {key: [(1, 0)]}, "once") == 0
    assert check(collections.Counter({key: 2}), {key: [(2, 1)]}, "taken over") == 1
    with pytest.raises(AssertionError, match="written to the outbox 2 times"):
        check(collections.Counter({key: 2}), {key: [(1, 0), (1, 0)]}, "two rows")
    with pytest.raises(AssertionError, match="received 2 times"):
        check(collections.Counter({key: 2}), {key: [(2, 0)]}, "re-claimed after a failure, not taken over")
