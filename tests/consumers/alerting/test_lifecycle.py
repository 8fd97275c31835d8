"""The alert lifecycle through the service handler with a real SQLite database and recording channels:
grouping, repeat_interval, resolve, silences, inhibition, the outbox, and restarts."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid

import pytest

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.alerting.store import AlertStore

from .events import RunBuilder, at, error
from .fakes import Clock, Recorder, record

_offsets = itertools.count()


def handler(tmp_path, clock: Clock, channels: dict[str, Recorder], *, route: dict | None = None,
            rules: list[dict] | None = None) -> AlertingHandler:
    cfg = parse_config({
        "route": {"group_by": ["alertname", "job"], "group_wait": "30s", "group_interval": "5m",
                  "repeat_interval": "4h", "channels": sorted(channels), **(route or {})},
        "channels": {name: {"type": "webhook", "url": "http://127.0.0.1:9/unused"} for name in channels},
        "rules": rules or [{"name": "failed", "kind": "run_failed"}],
    })
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", channels=dict(channels), clock=clock)
    h.open()
    return h


def tick(h: AlertingHandler, clock: Clock) -> None:
    """The runtime's clock call, then wait for the outbox worker's delivery round it asked for."""
    h.tick(clock())
    assert h.settle(), "the outbox worker did not finish a delivery round"


def feed(h: AlertingHandler, events: list[dict]) -> None:
    for ev in events:
        h.handle(record(ev, next(_offsets)))


def fail(job: str = "nightly_orders", **kw) -> list[dict]:
    return RunBuilder(job, **kw).life(at(0), 5, end="FAILED", error=error())


def ok(job: str = "nightly_orders", **kw) -> list[dict]:
    return RunBuilder(job, **kw).life(at(0), 5)


def test_the_clock_call_decides_at_the_time_it_is_given(tmp_path) -> None:
    """``tick(now)`` is the runtime's time: group_wait runs out at the ``now`` it is handed, whatever the
    handler's own clock says (here it stands still)."""
    clock = Clock()
    h = handler(tmp_path, clock, {"rec": Recorder()})
    feed(h, fail())
    h.tick(clock() + 29)
    assert h.store.outbox() == []  # group_wait (30 s) is still running
    h.tick(clock() + 31)
    (row,) = h.store.outbox()
    assert (row.channel, row.created_at) == ("rec", dt.datetime.fromtimestamp(clock() + 31, dt.UTC))
    h.close()


def test_group_wait_collects_siblings_then_repeat_interval_holds_back_repeats(tmp_path) -> None:
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, {"rec": rec}, route={"group_by": ["alertname"]})
    feed(h, fail("a"))
    tick(h, clock)
    assert rec.sent == []  # group_wait: 30 s to collect the group
    clock.advance(10)
    feed(h, fail("b"))
    clock.advance(21)
    tick(h, clock)
    assert len(rec.sent) == 1 and sorted(a.labels["job"] for a in rec.sent[0].alerts) == ["a", "b"]
    feed(h, fail("a"))  # the same condition again: no new notification
    clock.advance(3600)
    tick(h, clock)
    assert len(rec.sent) == 1
    clock.advance(3 * 3600 + 1)  # repeat_interval (4 h) after the last notification
    tick(h, clock)
    assert len(rec.sent) == 2 and {a.status for a in rec.sent[1].alerts} == {"firing"}
    h.close()


def test_resolve_goes_to_the_same_channels_after_group_interval(tmp_path) -> None:
    clock, pager, chat, other = Clock(), Recorder("pager"), Recorder("chat"), Recorder("other")
    h = handler(tmp_path, clock, {"pager": pager, "chat": chat, "other": other},
                rules=[{"name": "failed", "kind": "run_failed", "channels": ["pager", "chat"]}])
    feed(h, fail())
    clock.advance(31)
    tick(h, clock)
    fp = pager.sent[0].alerts[0].fingerprint
    assert pager.statuses() == chat.statuses() == [("failed", "firing")]
    feed(h, ok())
    tick(h, clock)
    assert len(pager.sent) == 1  # group_interval (5 m) since the last notification of the group
    clock.advance(300)
    tick(h, clock)
    assert pager.statuses() == chat.statuses() == [("failed", "firing"), ("failed", "resolved")]
    assert pager.sent[1].alerts[0].fingerprint == fp
    assert other.sent == []
    h.close()


def test_an_alert_cleared_within_group_wait_is_never_sent(tmp_path) -> None:
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, {"rec": rec})
    feed(h, fail())
    clock.advance(5)
    feed(h, ok())
    clock.advance(600)
    tick(h, clock)
    assert rec.sent == [] and rec.attempts == 0
    assert [a.state for a in h.store.list_alerts(include_resolved=True)] == ["resolved"]
    h.close()


def test_a_silence_mutes_matching_alerts_only_and_its_end_lets_them_through(tmp_path) -> None:
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, {"rec": rec})
    now = dt.datetime.fromtimestamp(clock(), dt.UTC)
    AlertStore(h.database).add_silence({"job": "nightly_*"}, now + dt.timedelta(hours=2), comment="maintenance",
                                       created_by="test", starts_at=now)
    tick(h, clock)  # re-reads silences
    feed(h, fail("nightly_orders") + fail("hourly_clicks"))
    clock.advance(31)
    tick(h, clock)
    assert [a.labels["job"] for n in rec.sent for a in n.alerts] == ["hourly_clicks"]
    clock.advance(2 * 3600)
    tick(h, clock)
    assert sorted(a.labels["job"] for n in rec.sent for a in n.alerts) == ["hourly_clicks", "nightly_orders"]
    h.close()


def test_refresh_missed_inhibits_the_run_failed_of_the_same_table_only(tmp_path) -> None:
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, {"rec": rec}, rules=[
        {"name": "failed", "kind": "run_failed"},
        {"name": "missed", "kind": "refresh_missed", "max_attempts": 1}])
    cid = str(uuid.uuid4())
    sched = {"workflow_id": "wf", "command_id": cid, "nominal_time": at(0), "attempt": 1}
    feed(h, RunBuilder("refresh sales.daily", "lake", tags={"table": "sales.daily"}, schedule=sched)
         .life(at(0), 5, end="FAILED", error=error()))
    feed(h, fail("unrelated", tags={"table": "other.table"}))
    clock.advance(31)
    tick(h, clock)
    got = sorted((a.labels["alertname"], a.labels.get("table")) for n in rec.sent for a in n.alerts)
    assert got == [("failed", "other.table"), ("missed", "sales.daily")]
    assert {a.labels["alertname"] for a in h.store.list_alerts()} == {"failed", "missed"}  # muted, not dropped
    h.close()


def test_a_down_channel_keeps_the_notification_in_the_outbox_and_retries_with_backoff(tmp_path) -> None:
    clock, rec, fine = Clock(), Recorder("rec"), Recorder("fine")
    rec.down = True
    h = handler(tmp_path, clock, {"rec": rec, "fine": fine})
    feed(h, fail())
    clock.advance(31)
    tick(h, clock)
    assert fine.statuses() == [("failed", "firing")] and rec.sent == [] and rec.attempts == 1
    tick(h, clock)
    assert rec.attempts == 1  # backing off
    pending = h.store.outbox("pending")
    assert [r.channel for r in pending] == ["rec"] and "receiver down" in (pending[0].last_error or "")
    rec.down = False
    clock.advance(5)
    tick(h, clock)
    assert rec.statuses() == [("failed", "firing")]
    assert h.store.outbox("pending") == []
    h.close()


def test_after_a_restart_an_open_alert_is_not_renotified_and_its_resolve_is_not_forgotten(tmp_path) -> None:
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, {"rec": rec})
    feed(h, fail())
    clock.advance(31)
    tick(h, clock)
    h.close()
    assert rec.statuses() == [("failed", "firing")]

    rec2 = Recorder()
    h2 = handler(tmp_path, clock, {"rec": rec2})
    feed(h2, fail())  # the same failure again (e.g. a replay)
    clock.advance(60)
    tick(h2, clock)
    feed(h2, ok())
    tick(h2, clock)
    h2.close()  # the resolve is due only after group_interval (5 m after the firing): it waits in the database
    assert rec2.sent == []

    rec3 = Recorder()
    h3 = handler(tmp_path, clock, {"rec": rec3})
    clock.advance(301)
    tick(h3, clock)
    assert rec3.statuses() == [("failed", "resolved")]
    h3.close()


def test_a_wrong_channel_setting_names_the_channel_and_field_without_echoing_secrets() -> None:
    from lineagewire.consumers.alerting.exceptions import RulesError

    # Checked when the rules are loaded, not when the service opens its channels.
    with pytest.raises(RulesError) as info:
        parse_config({"channels": {"pager": {"type": "pagerduty", "routing_key": "s3cr3t-key", "urll": "x"}}})
    assert "channels.pager" in str(info.value) and "urll" in str(info.value)
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(RulesError, match="environment variable LW_TEST_UNSET_VAR is not set"):
        parse_config({"channels": {"hook": {"type": "webhook", "url": {"env": "LW_TEST_UNSET_VAR"}}}})


def test_a_batch_is_saved_once_and_only_saved_notifications_are_delivered_before_offsets_count(tmp_path) -> None:
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, {"rec": rec}, route={"group_wait": "0s"})
    feed(h, fail("a") + fail("b"))
    assert h.settle()
    # Handled but not saved: nothing in the outbox, nothing sent, no offset may be committed.
    assert h.store.outbox() == [] and rec.sent == [] and h.durable_offsets() == {}
    h.batch_done()  # the runtime's call after the poll batch: one transaction
    assert sorted(r.channel for r in h.store.outbox()) == ["rec", "rec"]
    assert list(h.durable_offsets()) == [("lineage.jobs", 0)]
    assert h.settle()
    assert sorted(a.labels["job"] for n in rec.sent for a in n.alerts) == ["a", "b"]
    assert h.store.outbox("pending") == []
    h.close()


def test_an_outbox_row_is_sent_by_the_instance_that_claimed_it_and_taken_over_after_its_lease(tmp_path) -> None:
    """Two instances' outboxes on one database: a row claimed by one that then died (never marked) is not sent by
    the other until the claim's lease ended, then once, with its claims counted; a group's later row waits for its
    earlier one, whoever holds that."""
    from lineagewire.consumers.alerting.outbox import Outbox

    store = AlertStore(f"sqlite:///{tmp_path / 'alerts.db'}")
    now = at(0)
    payload = {"group_key": "g1", "group_labels": {}, "sent_at": "2026-11-23T12:00:00Z", "alerts": []}
    first, second = store.save([], [], [("rec", payload), ("rec", {**payload, "sent_at": "2026-11-23T12:00:01Z"})],
                               [], now)
    dead = store.claim_outbox("dead", now, lease=30)
    assert dead is not None and dead.id == first
    rec = Recorder()
    with Outbox(store, {"rec": rec}, owner="alive", lease=30) as alive:
        assert alive.deliver(now + dt.timedelta(seconds=29)) == 0  # the first is claimed, the second waits
        assert alive.deliver(now + dt.timedelta(seconds=31)) == 2
        assert [n.sent_at for n in rec.sent] == [at(0), at(1)]
        rows = {r.id: r for r in store.outbox()}
        assert rows[first].state == rows[second].state == "delivered"
        assert (rows[first].claims, rows[second].claims) == (2, 1)
        assert alive.deliver(now + dt.timedelta(seconds=120)) == 0
    store.close()


def test_a_claim_lease_no_longer_than_a_channel_timeout_is_refused() -> None:
    from lineagewire.consumers.alerting.exceptions import RulesError

    doc = {"claim_lease": "5s", "channels": {"hook": {"type": "webhook", "url": "http://127.0.0.1:9/x", "timeout": 5}},
           "route": {"channels": ["hook"]}, "rules": [{"name": "failed", "kind": "run_failed"}]}
    with pytest.raises(RulesError, match=r"claim_lease=5s: expected more than the 5s timeout of channels.hook"):
        parse_config(doc)
    assert parse_config({**doc, "claim_lease": "6s"}).claim_lease == 6.0
