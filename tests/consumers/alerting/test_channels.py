"""Each channel against a real receiver on 127.0.0.1, through the service handler (no broker needed):
Slack, PagerDuty and the webhook on a local HTTP server, mail on aiosmtpd, and Debian's Alertmanager."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import hashlib
import hmac
import itertools
import logging
import time

import pytest

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.service import AlertingHandler
from tests.helpers import wait_for

from .events import RunBuilder, at, error
from .fakes import Clock, record
from .receivers import HttpReceiver

_offsets = itertools.count()


def make(tmp_path, clock: Clock, channels: dict, **route) -> AlertingHandler:  # noqa: ANN001
    cfg = parse_config({"route": {"group_wait": "0s", "group_interval": "0s", "channels": sorted(channels), **route},
                        "channels": channels, "rules": [{"name": "failed", "kind": "run_failed",
                                                         "severity": "critical"}]})
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", clock=clock)
    h.open()
    return h


def tick(h: AlertingHandler, clock: Clock) -> None:
    """The runtime's clock call, then wait for the outbox worker's delivery round it asked for."""
    h.tick(clock())
    assert h.settle(), "the outbox worker did not finish a delivery round"


def feed(h: AlertingHandler, events: list[dict]) -> None:
    for ev in events:
        h.handle(record(ev, next(_offsets)))


def fail_then_recover(h: AlertingHandler, clock: Clock) -> None:
    feed(h, RunBuilder().life(at(0), 5, end="FAILED", error=error()))
    clock.advance(1)
    tick(h, clock)
    feed(h, RunBuilder().life(at(60), 5))
    clock.advance(1)
    tick(h, clock)


def test_slack_pagerduty_and_webhook_get_their_documented_payloads_and_the_resolve(
        tmp_path, http_receiver: HttpReceiver, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("LW_TEST_PD_KEY", "R0UTINGKEY0123456789012345678901")
    (tmp_path / "slack-url").write_text(f"{http_receiver.url}/services/T000/B000/XXXX\n")
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    h = make(tmp_path, clock, {
        "slack": {"type": "slack", "url": {"file": str(tmp_path / "slack-url")}},
        "pager": {"type": "pagerduty", "routing_key": {"env": "LW_TEST_PD_KEY"},
                  "url": f"{http_receiver.url}/v2/enqueue"},
        "hook": {"type": "webhook", "url": f"{http_receiver.url}/hook", "hmac_secret": "hmac-s3cret"},
    })
    fail_then_recover(h, clock)
    h.close()

    pd = [r.json for r in http_receiver.on("/v2/enqueue")]
    assert [e["event_action"] for e in pd] == ["trigger", "resolve"]
    fp = pd[0]["dedup_key"]
    assert pd[1]["dedup_key"] == fp and len(fp) == 16
    assert pd[0]["routing_key"] == "R0UTINGKEY0123456789012345678901"
    payload = pd[0]["payload"]
    assert payload["severity"] == "critical" and payload["source"] == "prod/nightly_orders"
    assert "SparkException" in payload["summary"] and payload["timestamp"].endswith("Z")

    slack = [r.json for r in http_receiver.on("/services/T000/B000/XXXX")]
    assert len(slack) == 2
    assert slack[0]["blocks"][0]["type"] == "header" and "FIRING" in slack[0]["blocks"][0]["text"]["text"]
    assert any("SparkException" in b.get("text", {}).get("text", "") for b in slack[0]["blocks"])
    assert "1 firing" in slack[0]["text"] and "resolved" in slack[1]["text"]

    hooks = http_receiver.on("/hook")
    assert [r.json["status"] for r in hooks] == ["firing", "resolved"]
    for r in hooks:
        expected = hmac.new(b"hmac-s3cret", r.body, hashlib.sha256).hexdigest()
        assert r.headers["x-lineagewire-signature"] == f"sha256={expected}"
    alert = hooks[0].json["alerts"][0]
    assert alert["fingerprint"] == fp and alert["labels"]["job"] == "nightly_orders"
    assert hooks[1].json["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z"

    logged = caplog.text
    for secret in ("R0UTINGKEY", "hmac-s3cret", "B000/XXXX"):
        assert secret not in logged


def test_pagerduty_400_is_not_retried_and_503_is_retried_until_accepted(tmp_path, http_receiver: HttpReceiver) -> None:
    clock = Clock()
    h = make(tmp_path, clock, {
        "bad": {"type": "pagerduty", "routing_key": "k", "url": f"{http_receiver.url}/v2/enqueue/bad"},
        "flaky": {"type": "pagerduty", "routing_key": "k", "url": f"{http_receiver.url}/v2/enqueue/flaky"},
    })
    http_receiver.codes["/v2/enqueue/bad"] = 400
    http_receiver.codes["/v2/enqueue/flaky"] = 503
    feed(h, RunBuilder().life(at(0), 5, end="FAILED", error=error()))
    tick(h, clock)
    assert [r.channel for r in h.store.outbox("failed")] == ["bad"]
    pending = h.store.outbox("pending")
    assert [r.channel for r in pending] == ["flaky"] and "HTTP 503" in (pending[0].last_error or "")
    del http_receiver.codes["/v2/enqueue/flaky"]
    clock.advance(10)
    tick(h, clock)
    assert [r.json["event_action"] for r in http_receiver.on("/v2/enqueue/flaky")] == ["trigger"]
    assert h.store.outbox("pending") == [] and len(h.store.outbox("failed")) == 1
    h.close()


def test_email_over_starttls_with_auth_has_text_and_html(tmp_path, smtp_server) -> None:  # noqa: ANN001
    clock = Clock()
    h = make(tmp_path, clock, {"mail": {
        "type": "email", "host": smtp_server["host"], "port": smtp_server["port"], "starttls": True,
        "username": "alerts", "password": "pw", "ca_file": smtp_server["ca_file"],
        "sender": "lineagewire@example.org", "to": ["oncall@example.org"]}})
    fail_then_recover(h, clock)
    h.close()
    assert smtp_server["logins"], "the client did not authenticate"
    mails = [email.message_from_bytes(m.content, policy=email.policy.default) for m in smtp_server["messages"]]
    assert len(mails) == 2
    first = mails[0]
    assert first["To"] == "oncall@example.org" and first["Subject"].startswith("[FIRING:1]")
    text = first.get_body(("plain",)).get_content()
    html = first.get_body(("html",)).get_content()
    assert "SparkException" in text and "job=nightly_orders" in text
    assert "<h2" in html and "SparkException" in html
    assert mails[1]["Subject"].startswith("[RESOLVED]")


def test_email_templates_can_be_overridden_per_file(tmp_path, smtp_server) -> None:  # noqa: ANN001
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "email_subject.txt.j2").write_text("ALERT {{ firing | length }} {{ n.group_labels['job'] }}")
    clock = Clock()
    cfg = parse_config({"templates": str(tpl), "route": {"group_wait": "0s", "channels": ["mail"]},
                        "channels": {"mail": {"type": "email", "host": smtp_server["host"],
                                              "port": smtp_server["port"], "username": "alerts", "password": "pw",
                                              "ca_file": smtp_server["ca_file"], "sender": "a@example.org",
                                              "to": ["b@example.org"]}},
                        "rules": [{"name": "failed", "kind": "run_failed"}]})
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'a.db'}", clock=clock)
    h.open()
    feed(h, RunBuilder().life(at(0), 5, end="FAILED", error=error()))
    h.close()
    mail = email.message_from_bytes(smtp_server["messages"][0].content, policy=email.policy.default)
    assert mail["Subject"] == "ALERT 1 nightly_orders"
    assert "SparkException" in mail.get_body(("plain",)).get_content()  # the other templates stay built in


@pytest.mark.slow
def test_a_real_alertmanager_receives_the_alert_then_sees_it_resolved(tmp_path, alertmanager,  # noqa: ANN001
                                                                     http_receiver: HttpReceiver) -> None:
    # Alertmanager judges startsAt/endsAt by its own clock: this test runs on the real one.
    clock = Clock(time.time())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=60)
    h = make(tmp_path, clock, {"am": {"type": "alertmanager", "url": alertmanager.url, "resend_interval": 30}})
    feed(h, RunBuilder().life(now, 5, end="FAILED", error=error()))
    tick(h, clock)

    active = wait_for(lambda: [a for a in alertmanager.alerts() if a["labels"].get("alertname") == "failed"])
    assert active[0]["labels"]["job"] == "nightly_orders" and active[0]["status"]["state"] == "active"
    assert "SparkException" in active[0]["annotations"]["summary"]
    # Alertmanager routes it on to its own receiver
    http_receiver.wait("/am-webhook", lambda got: any(r.json["status"] == "firing" for r in got))
    clock.advance(1)
    feed(h, RunBuilder().life(now + dt.timedelta(seconds=1), 5))
    tick(h, clock)
    wait_for(lambda: not [a for a in alertmanager.alerts() if a["labels"].get("alertname") == "failed"])
    http_receiver.wait("/am-webhook", lambda got: any(r.json["status"] == "resolved" for r in got))
    h.close()
