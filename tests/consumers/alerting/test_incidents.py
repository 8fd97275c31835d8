"""One page per root cause (incidents.py): the grouping decision alone (upstream failures, lineage edges and a
downstream alert in, an incident or none out), then through the service with a real SQLite database and a
recording channel: one page for the upstream failure, the downstream failures attached, and after the root's
resolve the downstream failures still firing page on their own."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from typing import Any

import pytest

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.exceptions import RulesError
from lineagewire.consumers.alerting.incidents import (
    Candidate,
    Edge,
    EdgeGraph,
    Incident,
    IncidentBook,
    Member,
    choose,
    edges_of,
    hops,
)
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.schemas import action_lineage, dataset, header, job_created, job_spec, job_status_changed

from .events import at, error
from .fakes import Clock, Recorder, record

H = 3600.0
P, C1, C2, C3, X = ("prod", "producer"), ("prod", "consumer_a"), ("prod", "consumer_b"), ("prod", "mart"), \
    ("prod", "unrelated")


def chain() -> EdgeGraph:
    """producer writes orders; consumer_a and consumer_b read it; consumer_a writes daily, which mart reads."""
    return EdgeGraph().add(Edge(P, "s3/orders", True), Edge(C1, "s3/orders", False), Edge(C2, "s3/orders", False),
                           Edge(C1, "s3/daily", True), Edge(C3, "s3/daily", False), Edge(X, "s3/other", False))


def incident(job: tuple[str, str], started: dt.datetime, fp: str = "root") -> Incident:
    return Incident(f"inc-{fp}", Member(fp, job, started), started)


# -- the decision, pure -----------------------------------------------------------------------------------


def test_hops_follow_reads_and_writes_up_to_the_depth() -> None:
    g = chain()
    assert hops(P, g.downstream, 5) == {C1: 1, C2: 1, C3: 2}
    assert hops(P, g.downstream, 1) == {C1: 1, C2: 1}
    assert hops(C3, g.upstream, 5) == {C1: 1, P: 2}
    assert hops(X, g.upstream, 5) == {}


def test_a_downstream_alert_within_the_window_after_the_upstream_failure_joins_its_incident() -> None:
    g, window = chain(), dt.timedelta(hours=2)
    inc = incident(P, at(0))
    assert choose(C1, at(60), [inc], hops(C1, g.upstream, 5), window) is inc
    assert choose(C3, at(60), [inc], hops(C3, g.upstream, 5), window) is inc  # two hops down
    assert choose(C3, at(60), [inc], hops(C3, g.upstream, 1), window) is None  # beyond the depth
    assert choose(X, at(60), [inc], hops(X, g.upstream, 5), window) is None  # reads nothing of it
    assert choose(C1, at(3 * H), [inc], hops(C1, g.upstream, 5), window) is None  # after the window
    assert choose(C1, at(-60), [inc], hops(C1, g.upstream, 5), window) is None  # failed before it
    assert choose(P, at(60), [inc], hops(P, g.upstream, 5), window) is None  # its own job is not downstream
    inc.state = "resolved"
    assert choose(C1, at(60), [inc], hops(C1, g.upstream, 5), window) is None


def test_the_root_is_the_most_upstream_failure() -> None:
    g, window = chain(), dt.timedelta(hours=2)
    upstream, middle = incident(P, at(10), "p"), incident(C1, at(0), "c1")  # consumer_a's failure came first
    assert choose(C3, at(60), [middle, upstream], hops(C3, g.upstream, 5), window) is upstream
    # a failure attached to an incident counts as one of its failures: mart joins through consumer_a's
    upstream.members["c1"] = Member("c1", C1, at(20))
    assert choose(C3, at(60), [upstream], hops(C3, g.upstream, 1), window) is upstream


def test_the_book_opens_an_incident_for_a_failure_others_read_and_attaches_what_follows() -> None:
    book = IncidentBook([], chain(), window=2 * H, depth=5)

    def alert(fp: str, job: tuple[str, str], t: float, kind: str = "run_failed", **kw: Any) -> Candidate:
        return Candidate(fp, kind, job, at(t), {"job": job[1]}, firing=kw.get("firing", True),
                         notified=kw.get("notified", False))

    assert book.decide(alert("x", X, 0), at(0)) is None  # nothing reads what it writes: an alert as before
    root = book.decide(alert("p", P, 0), at(0))
    assert root is not None and root.affects == [C1, C2, C3] and root.annotations()["affects_count"] == "3"
    assert book.decide(alert("c1", C1, 30), at(30)) is root and book.muted("c1")
    assert book.decide(alert("c3", C3, 40, kind="run_stuck"), at(40)) is root
    assert book.decide(alert("c2", C2, 50, notified=True), at(50)) is None  # paged already: stays paged
    assert book.decide(alert("c2s", C2, 50, kind="duration_anomaly"), at(50)) is None  # not a downstream kind
    assert [m.fingerprint for _, m in book.attached] == ["c1", "c3"]
    assert book.resolve("p", at(100)) is root and root.state == "resolved"
    assert not book.muted("c1") and not book.muted("c3")


def test_an_incident_opened_for_a_failure_before_its_upstream_was_known_is_merged_into_the_upstream_one() -> None:
    book = IncidentBook([], chain(), window=2 * H, depth=5)
    own = book.decide(Candidate("c1", "run_failed", C1, at(30), {}, firing=True, notified=False), at(30))
    assert own is not None and own.affects == [C3]
    root = book.decide(Candidate("p", "run_failed", P, at(0), {}, firing=True, notified=False), at(31))
    # decided again before its first notification, consumer_a's failure now follows from the producer's
    assert book.decide(Candidate("c1", "run_failed", C1, at(30), {}, firing=True, notified=False), at(32)) is root
    assert own.state == "merged" and book.muted("c1")


def test_edges_are_read_from_action_lineage_events_only() -> None:
    h = header("ActionLineageEvent", job_namespace="prod", job_name="consumer_a", run_id="r", sequence=1)
    ev = dict(action_lineage(h, "1", "save", inputs=[dataset("s3", "orders")], outputs=[dataset("s3", "daily")]))
    assert edges_of(ev) == [Edge(C1, "s3/orders", False), Edge(C1, "s3/daily", True)]
    status = dict(job_status_changed(header("JobStatusChangedEvent", job_namespace="prod", job_name="p", run_id="r"),
                                     "RUNNING", "CREATED"))
    assert edges_of(status) == []


# -- through the service ------------------------------------------------------------------------------------

_offsets = itertools.count()


class Run:
    """The events of one run of a job that reads ``inputs`` and writes ``outputs`` (dataset names in s3)."""

    def __init__(self, job: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = ()) -> None:
        self.job, self.inputs, self.outputs = job, inputs, outputs
        self.run_id, self.seq = str(uuid.uuid4()), itertools.count()

    def _h(self, kind: str, when: dt.datetime) -> Any:
        return header(kind, job_namespace="prod", job_name=self.job, run_id=self.run_id, sequence=next(self.seq),
                      event_time=when)

    def events(self, start: float, end: str = "FINISHED") -> list[dict[str, Any]]:
        t0, t1 = at(start), at(start + 5)
        out = [dict(job_created(self._h("JobCreatedEvent", t0), job_spec(self.job, "4.0.0"))),
               dict(job_status_changed(self._h("JobStatusChangedEvent", t0), "RUNNING", "CREATED"))]
        if self.inputs or self.outputs:
            out.append(dict(action_lineage(self._h("ActionLineageEvent", t0), "1", "save",
                                           inputs=[dataset("s3", n) for n in self.inputs],
                                           outputs=[dataset("s3", n) for n in self.outputs])))
        out.append(dict(job_status_changed(self._h("JobStatusChangedEvent", t1), end, "RUNNING",
                                           error=error() if end == "FAILED" else None,
                                           duration_ms=5000 if end == "FINISHED" else None)))
        return out


JOBS = {"producer": ((), ("orders",)), "consumer_a": (("orders",), ("daily",)), "consumer_b": (("orders",), ()),
        "unrelated": (("other",), ())}


def run(job: str, start: float, end: str = "FINISHED") -> list[dict[str, Any]]:
    return Run(job, *JOBS[job]).events(start, end)


def handler(tmp_path, clock: Clock, rec: Recorder, *, rules: list[dict] | None = None,  # noqa: ANN001
            incidents: dict | None = None) -> AlertingHandler:
    cfg = parse_config({
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "0s", "channels": ["rec"]},
        "channels": {"rec": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}},
        "rules": rules or [{"name": "failed", "kind": "run_failed"}],
        **({"incidents": incidents} if incidents is not None else {}),
    })
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", channels={"rec": rec}, clock=clock)
    h.open()
    return h


def feed(h: AlertingHandler, clock: Clock, events: list[dict]) -> None:
    for ev in events:
        h.handle(record(ev, next(_offsets)))
    h.batch_done()
    h.tick(clock())
    assert h.settle(), "the outbox worker did not finish a delivery round"


def told(rec: Recorder) -> list[tuple[str, str]]:
    """(job, firing|resolved) of every alert of every notification, in order."""
    return [(a.labels["job"], a.status) for n in rec.sent for a in n.alerts]


def lineage(h: AlertingHandler, clock: Clock) -> None:
    """One good run of each job: the service learns who reads what."""
    feed(h, clock, [e for job in JOBS for e in run(job, -3600)])


def test_one_page_for_the_upstream_failure_and_the_downstream_failures_attached_then_paged_after_its_resolve(
        tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec)
    lineage(h, clock)
    feed(h, clock, run("producer", 0, "FAILED"))
    assert told(rec) == [("producer", "firing")]
    page = rec.sent[0].alerts[0].annotations
    assert page["affects"] == "prod/consumer_a, prod/consumer_b" and page["affects_count"] == "2"
    clock.advance(60)
    feed(h, clock, run("consumer_a", 60, "FAILED") + run("consumer_b", 70, "FAILED") + run("unrelated", 80, "FAILED"))
    assert told(rec) == [("producer", "firing"), ("unrelated", "firing")]  # the consumers are attached, not paged
    (inc,) = h.store.incidents()
    assert inc.id == page["incident"] and inc.root.job == ("prod", "producer")
    assert sorted(m.job[1] for m in inc.members.values()) == ["consumer_a", "consumer_b"]

    clock.advance(60)
    feed(h, clock, run("producer", 120) + run("consumer_b", 125))  # the producer is back; so is consumer_b
    assert h.store.incidents() == []  # resolved with its root
    (ended,) = h.store.incidents(open_only=False)
    assert ended.state == "resolved" and len(ended.members) == 2
    # consumer_a still fails: it pages on its own now; consumer_b cleared while attached and is never told
    assert told(rec)[2:] == [("producer", "resolved"), ("consumer_a", "firing")]
    h.close()


def test_an_open_incident_keeps_muting_its_attached_alerts_across_a_restart(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec)
    lineage(h, clock)
    feed(h, clock, run("producer", 0, "FAILED"))
    h.close()
    h = handler(tmp_path, clock, rec)  # a new instance on the same database: the edges and the incident are there
    clock.advance(30)
    feed(h, clock, run("consumer_a", 30, "FAILED"))
    clock.advance(3600)
    h.tick(clock())
    assert h.settle()
    assert told(rec) == [("producer", "firing")]
    feed(h, clock, run("producer", 4000))
    assert told(rec) == [("producer", "firing"), ("producer", "resolved"), ("consumer_a", "firing")]
    h.close()


@pytest.mark.parametrize(("rules", "incidents", "why"), [
    ([{"name": "failed", "kind": "run_failed", "incident": False}], None, "the rule opts out"),
    (None, {"enabled": False}, "incidents are off"),
    (None, {"window": "1m"}, "the downstream failure came after the window"),
])
def test_a_downstream_failure_pages_on_its_own_when(tmp_path, rules, incidents, why) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec, rules=rules, incidents=incidents)
    lineage(h, clock)
    feed(h, clock, run("producer", 0, "FAILED"))
    clock.advance(120)
    feed(h, clock, run("consumer_a", 120, "FAILED"))
    assert told(rec) == [("producer", "firing"), ("consumer_a", "firing")], why
    h.close()


def test_a_rule_of_another_kind_in_the_chain_is_attached_too_and_settings_are_checked(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec, rules=[{"name": "failed", "kind": "run_failed"},
                                             {"name": "stuck", "kind": "run_stuck", "max_duration": "10m"}])
    lineage(h, clock)
    feed(h, clock, run("producer", 0, "FAILED"))
    stuck = Run("consumer_b", ("orders",)).events(30)[:3]  # started, read orders, never ended
    feed(h, clock, stuck)
    clock.advance(700)
    h.tick(clock())
    assert h.settle()
    assert told(rec) == [("producer", "firing")]
    (inc,) = h.store.incidents()
    assert [m.labels["alertname"] for m in inc.members.values()] == ["stuck"]
    h.close()
    with pytest.raises(RulesError, match=r"incidents\.window"):
        parse_config({"rules": [], "incidents": {"window": "soon"}})
    with pytest.raises(RulesError, match="depth"):
        parse_config({"rules": [], "incidents": {"depth": 0}})
