"""The alerts page of the web UI shows an incident the alerting service decided: its root, the jobs its page
named, and the alerts attached to it with their state now."""

from __future__ import annotations

import html

import httpx
import pytest

from tests.consumers.audit.ui.conftest import UiServer

from .fakes import Clock, Recorder
from .test_incidents import feed, handler, lineage, run

pytestmark = [pytest.mark.integration]


def test_the_alerts_page_shows_an_incident_with_its_attached_alerts(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    h = handler(tmp_path, clock, rec)
    lineage(h, clock)
    feed(h, clock, run("producer", 0, "FAILED"))
    clock.advance(60)
    feed(h, clock, run("consumer_a", 60, "FAILED") + run("unrelated", 70, "FAILED"))
    (inc,) = h.store.incidents()
    h.close()
    with UiServer(f"sqlite:///{tmp_path / 'reg.db'}", alerts_db=f"sqlite:///{tmp_path / 'alerts.db'}") as srv:
        page = html.unescape(httpx.get(f"{srv.url}/ui/alerts", timeout=30).text)
    section = page[page.index('id="in-h"'):page.index('id="al-h"')]
    assert f'id="incident-{inc.id}"' in section and "prod/producer: failed" in section
    assert "Affects: <span class=\"name\">prod/consumer_a</span>, <span class=\"name\">prod/consumer_b</span>" \
        in section
    attached = section[section.index("Attached alerts"):]
    assert "prod/consumer_a" in attached and "firing" in attached
    assert "prod/unrelated" not in section  # paged on its own: not part of the incident


def test_the_alerts_page_says_when_there_is_no_incident(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(), Recorder()
    handler(tmp_path, clock, rec).close()
    with UiServer(f"sqlite:///{tmp_path / 'reg.db'}", alerts_db=f"sqlite:///{tmp_path / 'alerts.db'}") as srv:
        page = httpx.get(f"{srv.url}/ui/alerts", timeout=30).text
    assert "No incident." in page
