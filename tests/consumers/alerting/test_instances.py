"""Several instances on one database, without a broker: partitions handed over between handlers, claims of
outbox rows held by a slow send, a failed reload on assignment (issue 33)."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.exceptions import StoreError
from lineagewire.consumers.alerting.model import Notification
from lineagewire.consumers.alerting.outbox import Outbox
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.alerting.store import AlertStore
from tests.helpers import latency, wait_for

from .events import RunBuilder, at
from .fakes import Clock, Recorder, record

TOPIC = "lineage.jobs"


def handler(tmp_path, clock: Clock, rec: Recorder) -> AlertingHandler:  # noqa: ANN001
    cfg = parse_config({
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "1s",
                  "repeat_interval": "4h", "channels": ["rec"]},
        "channels": {"rec": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}},
        "rules": [{"name": "stuck", "kind": "run_stuck", "max_duration": "60s"}],
    })
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", channels={"rec": rec}, clock=clock)
    h.open()
    return h


def test_an_instance_neither_pages_for_nor_overwrites_a_run_whose_partition_went_to_another(tmp_path) -> None:
    """A owns partitions 0 and 1 and reads the start of a run on 1; a rebalance gives 1 to B, which reads the run's
    end. A must not page run_stuck for it later (it never sees it end), nor save its "running" copy over B's."""
    clock = Clock()
    rec_a, rec_b = Recorder(), Recorder()
    a = handler(tmp_path, clock, rec_a)
    a.on_assign([(TOPIC, 0), (TOPIC, 1)])
    run = RunBuilder("job1")
    a.handle(record(run.created(at(0)), 0, partition=1))
    a.handle(record(run.status("RUNNING", "CREATED", at(0)), 1, partition=1))
    a.batch_done()
    # an eager rebalance: everything revoked, then A gets 0 back and B gets 1
    a.on_revoke([(TOPIC, 0), (TOPIC, 1)])
    a.on_assign([(TOPIC, 0)])
    b = handler(tmp_path, clock, rec_b)
    b.on_assign([(TOPIC, 1)])
    clock.advance(30)
    b.handle(record(run.status("FINISHED", "RUNNING", at(30), duration_ms=30_000), 2, partition=1))
    b.batch_done()
    for _ in range(3):
        clock.advance(60)
        for h in (a, b):
            h.tick(clock())
            assert h.settle()
    assert rec_a.sent == [] and rec_b.sent == []
    assert [al for al in a.store.list_alerts()] == []
    row = {key: value for kind, key, value in b.store.facts([f"{TOPIC}[1]"]) if kind == "run"}[run.run_id]
    assert row["status"] == "FINISHED"
    # B, owner of the run, still pages a run of its own that is stuck
    other = RunBuilder("job2")
    b.handle(record(other.created(at(clock() - at(0).timestamp())), 3, partition=1))
    b.batch_done()
    clock.advance(61)
    b.tick(clock())
    assert b.settle()
    assert [a.labels["job"] for n in rec_b.sent for a in n.alerts] == ["job2"] and rec_a.sent == []
    a.close()
    b.close()


def test_a_failed_reload_on_assignment_blocks_handling_and_saving_until_it_succeeds(tmp_path) -> None:
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec)
    store = h.store
    real = store.facts
    calls = []

    def down(*partitions):  # noqa: ANN002, ANN202
        calls.append(partitions)
        raise StoreError("database unreachable")

    store.facts = down  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        h.on_assign([(TOPIC, 0)])
    run = RunBuilder("job1")
    with pytest.raises(StoreError):
        h.handle(record(run.created(at(0)), 0, partition=0))
    with pytest.raises(StoreError):
        h.batch_done()
    store.facts = real  # type: ignore[method-assign]
    h.handle(record(run.created(at(0)), 0, partition=0))
    h.batch_done()
    assert [k for kind, k, _ in store.facts([f"{TOPIC}[0]"]) if kind == "run"] == [run.run_id]
    assert len(calls) == 3
    h.close()


class Slow(Recorder):
    def __init__(self, seconds: float) -> None:
        super().__init__("rec")
        self.seconds = seconds

    def send(self, notification: Notification) -> None:
        latency(self.seconds)  # a slow channel: the simulated time of its send
        super().send(notification)


def test_a_live_instances_send_longer_than_the_lease_keeps_its_claim(tmp_path) -> None:
    """A channel's timeout bounds each phase of a send, not the send: one may outlast claim_lease. The sender
    renews its claim meanwhile, so another instance does not take the row over and send it again."""
    store = AlertStore(f"sqlite:///{tmp_path / 'alerts.db'}")
    payload = {"group_key": "g1", "group_labels": {}, "sent_at": "2026-11-23T12:00:00Z", "alerts": []}
    store.save([], [], [("rec", payload)], [], dt.datetime.now(dt.UTC))
    slow, other = Slow(2.0), Recorder()
    before = set(threading.enumerate())
    with Outbox(store, {"rec": slow}, owner="a", lease=0.9) as a, \
            Outbox(store, {"rec": other}, owner="b", lease=0.9) as b:
        sending = threading.Thread(target=lambda: a.deliver(dt.datetime.now(dt.UTC)))
        sending.start()
        wait_for(lambda: store.outbox()[0].claims, timeout=10, every=0.01)  # A claimed it and is sending
        while sending.is_alive():  # B looks again and again while A's send lasts twice the lease
            b.deliver(dt.datetime.now(dt.UTC))
            sending.join(0.1)
        renewers = [t for t in set(threading.enumerate()) - before if t.name == "lineagewire-alerting-claim"]
    assert len(slow.sent) == 1 and other.sent == []
    (row,) = store.outbox()
    assert (row.state, row.claims, row.takeovers) == ("delivered", 1, 0)
    assert renewers and not any(t.is_alive() for t in renewers)  # the outboxes' threads end with them
    store.close()


def test_a_stuck_renewal_holds_the_sender_up_for_one_lease_at_most(tmp_path, caplog) -> None:  # noqa: ANN001
    """A renewal that does not return (a locked database) must not stop the outbox's worker for good: once the
    send is over, the sender waits for it one lease at most, says so naming the row, and marks the row."""
    store = AlertStore(f"sqlite:///{tmp_path / 'alerts.db'}")
    payload = {"group_key": "g1", "group_labels": {}, "sent_at": "2026-11-23T12:00:00Z", "alerts": []}
    (rid,) = store.save([], [], [("rec", payload)], [], dt.datetime.now(dt.UTC))
    renewing, unstuck, renew = threading.Event(), threading.Event(), store.renew_claim

    def stuck_renewal(*args: object) -> bool:
        renewing.set()
        unstuck.wait(60)
        return renew(*args)  # type: ignore[arg-type]

    store.renew_claim = stuck_renewal  # type: ignore[method-assign]
    slow = Slow(0.4)  # longer than a third of the lease: a renewal starts while it sends
    with Outbox(store, {"rec": slow}, owner="a", lease=0.3) as a:
        sending = threading.Thread(target=lambda: a.deliver(dt.datetime.now(dt.UTC)), daemon=True)
        sending.start()
        try:
            wait_for(lambda: not sending.is_alive(), timeout=10, every=0.05)
        finally:
            unstuck.set()
    assert renewing.is_set() and len(slow.sent) == 1
    assert [row.state for row in store.outbox()] == ["delivered"]
    assert f"outbox row {rid}: renewing its claim has not returned" in caplog.text
    store.close()


def test_an_instance_whose_claim_was_taken_over_does_not_mark_the_row(tmp_path, caplog) -> None:  # noqa: ANN001
    store = AlertStore(f"sqlite:///{tmp_path / 'alerts.db'}")
    now = at(0)
    payload = {"group_key": "g1", "group_labels": {}, "sent_at": "2026-11-23T12:00:00Z", "alerts": []}
    (rid,) = store.save([], [], [("rec", payload)], [], now)
    assert store.claim_outbox("frozen", now, lease=30).id == rid
    later = now + dt.timedelta(seconds=31)
    taken = store.claim_outbox("alive", later, lease=30)
    assert taken is not None and (taken.claims, taken.takeovers) == (2, 1)
    assert store.mark_delivered([(rid, 1)], later, owner="frozen") is False
    (row,) = store.outbox()
    assert row.state == "pending"  # still alive's to send and mark
    assert store.mark_delivered([(rid, 1)], later, owner="alive") is True
    store.close()
