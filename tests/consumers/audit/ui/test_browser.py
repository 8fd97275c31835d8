"""The UI in real Chromium: a person clicks through jobs → run → dataset → graph → column view.

The registry is filled by the real ``consume registry`` from a real PySpark job's events (conftest);
the other tests apply events to a real SQLite registry with the store the consumer uses.
"""

from __future__ import annotations

import datetime as dt
import itertools
import pathlib
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from lineagewire.consumers.audit import registry_query as rq
from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.schemas import dataset
from tests.consumers.openlineage.samples import app_run

from .conftest import UiServer

pytestmark = [pytest.mark.integration, pytest.mark.browser]

from playwright.sync_api import expect  # noqa: E402 - dev installs it: missing fails, it does not skip


def graph_of(page: Any) -> tuple[dict[str, str], set[tuple[str, str, str]]]:
    """The drawn graph: {node id: its title}, {(source title, target title, edge class)}."""
    page.wait_for_selector(".graph[data-ready='1'] svg")
    nodes = dict(page.eval_on_selector_all(
        ".graph a.node", "els => els.map(e => [e.dataset.id, e.querySelector('title').textContent])"))
    edges = page.eval_on_selector_all(
        ".graph path.edge", "els => els.map(e => [e.dataset.source, e.dataset.target, e.getAttribute('class')])")
    return nodes, {(nodes[s], nodes[t], cls) for s, t, cls in edges}


@pytest.mark.spark
@pytest.mark.slow
def test_click_through_jobs_run_dataset_graph_and_column_view(spark_ui: UiServer, page: Any) -> None:
    page.goto(spark_ui.url + "/")
    row = page.locator("table.jobs tbody tr", has_text="e2e_orders")
    expect(row.locator(".status")).to_have_text("FINISHED")
    row.get_by_role("link", name="e2e_orders").click()

    expect(page.locator("h1")).to_have_text("e2e_orders")
    runs = page.locator("table.runs tbody tr")
    expect(runs).to_have_count(1)
    expect(runs.locator(".status")).to_have_text("FINISHED")
    runs.locator("a").first.click()

    expect(page.locator("table.transitions tbody tr")).to_have_count(2)
    expect(page.locator("table.transitions tbody tr").nth(0)).to_contain_text("CREATED")
    expect(page.locator("table.transitions tbody tr").nth(1)).to_contain_text("RUNNING")
    expect(page.locator("table.transitions tbody tr").nth(1)).to_contain_text("FINISHED")
    action = page.locator("article.action", has_text="/marts/revenue").first
    expect(action.locator("p.flow")).to_contain_text("/raw/orders")
    columns = action.locator("table.columns")
    expect(columns).to_contain_text("revenue")
    expect(columns).to_contain_text("DIRECT/AGGREGATION")
    raw_link = action.locator("a", has_text="raw event")
    event = page.request.get(spark_ui.url + raw_link.get_attribute("href")).json()
    assert event["header"]["job_name"] == "e2e_orders" and event["outputs"][0]["name"].endswith("/marts/revenue")
    complete = "yes" if event["lineage_complete"] else f"no — {event['incomplete_reason']}"
    expect(action).to_contain_text(f"lineage complete: {complete}")
    ol = page.request.get(spark_ui.url + action.locator("a", has_text="OpenLineage").get_attribute("href"))
    assert ol.ok and ol.json()[0]["job"]["name"].startswith("e2e_orders")

    page.locator("ul.io a", has_text="/marts/revenue").click()
    expect(page.locator("h1")).to_contain_text("/marts/revenue")
    expect(page.locator("table.schema")).to_contain_text("customer_id")
    expect(page.locator("table.schema")).to_contain_text("revenue")
    # the writer among the dataset's producers (its overwrite is also listed under Changes, with the same link)
    producers = page.locator("section[aria-labelledby=pc-h]")
    expect(producers.get_by_role("link", name="spark/e2e_orders")).to_be_visible()
    expect(page.locator("table.changes")).to_contain_text("OVERWRITE")
    page.get_by_role("link", name="Open the full graph page").click()

    nodes, edges = graph_of(page)
    names = sorted(nodes.values())
    assert len(names) == 3 and names[0].endswith("/marts/revenue") and names[1].endswith("/raw/orders")
    job = "spark e2e_orders (FINISHED)"
    assert names[2] == job
    raw, mart = names[1], names[0]
    assert {(s, t) for s, t, _ in edges} == {(raw, job), (job, mart)}

    page.select_option("select[name=column]", "revenue")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("h1")).to_contain_text("column revenue")
    nodes, edges = graph_of(page)
    by_field = {title.split()[-1]: title for title in nodes.values()}
    assert set(by_field) == {"revenue", "amount", "customer_id"}
    assert {(s.split()[-1], t.split()[-1], cls) for s, t, cls in edges} == {
        ("amount", "revenue", "edge DIRECT"), ("customer_id", "revenue", "edge INDIRECT")}
    dash = page.eval_on_selector_all(".graph path.edge", "els => els.map(e => getComputedStyle(e).strokeDasharray)")
    kinds = page.eval_on_selector_all(".graph path.edge", "els => els.map(e => e.getAttribute('class'))")
    drawn = dict(zip(kinds, dash, strict=True))
    assert drawn["edge DIRECT"] == "none" and drawn["edge INDIRECT"] != "none"


@pytest.mark.spark
@pytest.mark.slow
def test_graph_shows_the_node_set_the_registry_answers(spark_ui: UiServer, page: Any,
                                                       tmp_path: pathlib.Path) -> None:
    with spark_ui.store.engine.connect() as conn:
        raw = conn.execute(sa.text("SELECT id, name FROM datasets WHERE name LIKE '%/raw/orders'")).one()
        answer = set()
        jobs = set()
        for direction in ("downstream", "upstream"):
            got = rq.lineage(conn, raw.name, direction=direction, namespace="file", depth=2)
            answer.update(f"{n['namespace']} {n['name']}" for n in got["nodes"])
            jobs.update(j for e in got["edges"] for j in e["jobs"])
    page.goto(f"{spark_ui.url}/ui/graph?dataset={raw.id}&depth=2")
    nodes, _ = graph_of(page)
    shot = tmp_path / "graph.png"
    page.locator(".graph").screenshot(path=str(shot))
    assert shot.stat().st_size > 2000
    drawn_datasets = {t for i, t in nodes.items() if i.startswith("d")}
    drawn_jobs = {t.split(" (")[0].replace(" ", "/", 1) for i, t in nodes.items() if i.startswith("j")}
    assert drawn_datasets == answer and len(answer) == 2
    assert drawn_jobs == jobs == {"spark/e2e_orders"}


HOSTILE_DS = "<script>alert(1)</script>"
HOSTILE_JOB = "\"quoted\" 'job' — ünïcødé ✓ <img src=x onerror=alert(2)>"
LONG_PATH = "/" + "p" * 4999


def hostile_events() -> list[dict[str, Any]]:
    events = app_run(HOSTILE_JOB, actions=1)
    src, dst = dataset("file", HOSTILE_DS, format="parquet"), dataset("file", LONG_PATH, format="parquet")
    events[0]["lineage"]["sources"], events[0]["lineage"]["sinks"] = [src], [dst]
    events[0]["lineage"]["column_lineage"] = []
    events[2]["inputs"], events[2]["outputs"] = [src], [dst]
    events[2]["column_lineage"] = [{"namespace": "file", "name": LONG_PATH, "field": "x\"'<b>", "inputs": [
        {"namespace": "file", "name": HOSTILE_DS, "field": "<i>y</i>", "transformations": []}]}]
    return events


def test_hostile_names_render_as_text(tmp_path: pathlib.Path, page: Any) -> None:
    db = f"sqlite:///{tmp_path / 'hostile.db'}"
    store = RegistryStore(db)
    for e in hostile_events():
        store.apply(e)
    store.close()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    with UiServer(db) as srv:
        with srv.store.engine.connect() as conn:
            ids = dict(conn.execute(sa.text("SELECT name, id FROM datasets")).fetchall())
            run_id = conn.execute(sa.text("SELECT run_id FROM runs")).scalar_one()
        page.goto(srv.url + "/ui/jobs")
        expect(page.locator("table.jobs a.name")).to_have_text(HOSTILE_JOB)
        page.locator("table.jobs a.name").click()
        expect(page.locator("h1")).to_have_text(HOSTILE_JOB)
        page.goto(f"{srv.url}/ui/runs/{run_id}")
        expect(page.locator("article.action p.flow")).to_contain_text(HOSTILE_DS)
        expect(page.locator("article.action table.columns")).to_contain_text("<i>y</i>")
        page.goto(f"{srv.url}/ui/datasets/{ids[HOSTILE_DS]}")
        expect(page.locator("h1")).to_have_text(HOSTILE_DS)
        nodes, _ = graph_of(page)
        assert f"file {HOSTILE_DS}" in nodes.values() and f"file {LONG_PATH}" in nodes.values()
        page.goto(f"{srv.url}/ui/datasets/{ids[LONG_PATH]}")
        expect(page.locator("h1")).to_have_text(LONG_PATH)
        # the long name wraps: the page does not grow sideways
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        page.goto(f"{srv.url}/ui/search?q=script")
        expect(page.locator("main ul a.name").first).to_have_text(f"file {HOSTILE_DS}")
        page.goto(f"{srv.url}/ui/graph?dataset={ids[LONG_PATH]}&column=" + "x%22'%3Cb%3E")
        nodes, _ = graph_of(page)
        assert set(nodes.values()) == {f"file {LONG_PATH} · x\"'<b>", f"file {HOSTILE_DS} · <i>y</i>"}
        # no markup came from a name: only our own scripts and no element a name could have made
        assert page.evaluate("[...document.scripts].map(s => s.getAttribute('src'))") == [
            "/ui/static/live.js", "/ui/static/graph.js"]
        assert page.locator("img, b, i").count() == 0
    assert dialogs == []


def recent(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events moved to an hour ago (the samples happen in November 2026)."""
    shift = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1) - events[0]["header"]["event_time"]
    for e in events:
        e["header"]["event_time"] += shift
        if "transition_time" in e:
            e["transition_time"] += shift
    return events


def test_a_running_job_turns_finished_without_a_reload(tmp_path: pathlib.Path, page: Any) -> None:
    db = f"sqlite:///{tmp_path / 'live.db'}"
    events = app_run("live_job", actions=1)
    with UiServer(db) as srv:
        for e in events[:-1]:
            srv.store.apply(e)
        with srv.store.engine.connect() as conn:
            job_id = conn.execute(sa.text("SELECT id FROM jobs")).scalar_one()
        page.goto(f"{srv.url}/ui/jobs/{job_id}")
        status = page.locator("table.runs tbody tr .status")
        expect(status).to_have_text("RUNNING")
        page.evaluate("window.__notReloaded = true")
        srv.store.apply(events[-1])
        expect(status).to_have_text("FINISHED", timeout=10_000)
        expect(page.locator("table.runs tbody tr [data-field=duration]")).to_have_text("9.0 s")
        assert page.evaluate("window.__notReloaded") is True
        page.goto(srv.url + "/ui/jobs")
        expect(page.locator("table.jobs .status")).to_have_text("FINISHED")


def test_the_keyboard_reaches_every_link(tmp_path: pathlib.Path, page: Any) -> None:
    db = f"sqlite:///{tmp_path / 'keys.db'}"
    store = RegistryStore(db)
    for e in app_run("first") + app_run("second", fail=True):
        store.apply(e)
    store.close()
    with UiServer(db) as srv:
        for path in ("/ui/jobs", "/ui/graph?dataset=1"):
            page.goto(srv.url + path)
            if "graph" in path:
                graph_of(page)
            links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
            assert len(links) > 5
            reached = set()
            for _ in range(len(links) + 40):
                page.keyboard.press("Tab")
                href = page.evaluate("document.activeElement && document.activeElement.getAttribute('href')")
                if href:
                    reached.add(href)
            assert reached == set(links), set(links) - reached
        # status is a word as well as a colour
        labels = page.eval_on_selector_all(".graph a.node.job", "els => els.map(e => e.getAttribute('aria-label'))")
        assert sorted(labels) == ["job spark first, last status FINISHED", "job spark second, last status FAILED"]
        fills = page.eval_on_selector_all(".graph a.node.job rect", "els => els.map(e => e.style.fill)")
        assert sorted(fills) == ["rgb(207, 34, 46)", "rgb(26, 127, 55)"]  # red FAILED, green FINISHED
        page.goto(srv.url + "/ui/graph?dataset=1&color=namespace")
        graph_of(page)
        fills = page.eval_on_selector_all(".graph a.node rect", "els => els.map(e => e.style.fill)")
        assert len(fills) == 5 and len(set(fills)) == 2  # namespaces file and spark


def test_alerts_page_and_open_alerts_come_from_the_alerting_database(tmp_path: pathlib.Path, page: Any) -> None:
    from lineagewire.consumers.alerting.dispatch import Alert
    from lineagewire.consumers.alerting.store import AlertStore

    db = f"sqlite:///{tmp_path / 'reg.db'}"
    alerts_db = f"sqlite:///{tmp_path / 'alerts.db'}"
    store = RegistryStore(db)
    for e in recent(app_run("nightly", fail=True)) + app_run("nightly"):  # one failure now, one success long ago
        store.apply(e)
    store.close()
    now = dt.datetime.now(dt.UTC)
    astore = AlertStore(alerts_db)
    fp = uuid.uuid4().hex
    astore.save([Alert(fingerprint=fp, rule="nightly-failed", labels={"namespace": "spark", "job": "nightly",
                                                                       "severity": "critical"},
                       annotations={"summary": "nightly failed: <b>Job aborted</b>"}, channels=("chat",),
                       group_key="g1", starts_at=now, updated_at=now)], [], [("chat", {"text": "x"})], [], now)
    astore.add_silence({"job": "other_*"}, now + dt.timedelta(hours=2), comment="maintenance", created_by="ops")
    astore.close()
    with UiServer(db, alerts_db=alerts_db) as srv:
        page.goto(srv.url + "/ui/jobs")
        row = page.locator("table.jobs tbody tr", has_text="nightly")
        expect(row.locator(".status")).to_have_text("FAILED")
        expect(row.locator("td").nth(7)).to_have_text("1")   # failures in the last 24 h
        expect(row.locator("td").nth(8)).to_have_text("1")   # open alerts (the producer is column 5)
        page.get_by_role("link", name="Alerts").first.click()
        expect(page.locator("main")).to_contain_text("nightly failed: <b>Job aborted</b>")
        expect(page.locator("main")).to_contain_text("job=other_*")
        expect(page.locator("main")).to_contain_text("pending: 1")


def chain(names: list[str]) -> list[dict[str, Any]]:
    """A job per hop: names[0] -> names[1] -> ... (job i reads names[i] and writes names[i + 1])."""
    events = []
    for i, (src, dst) in enumerate(itertools.pairwise(names)):
        run = app_run(f"hop{i}", actions=1)
        a, b = dataset("file", src, format="parquet"), dataset("file", dst, format="parquet")
        run[0]["lineage"]["sources"], run[0]["lineage"]["sinks"], run[0]["lineage"]["column_lineage"] = [a], [b], []
        run[2]["inputs"], run[2]["outputs"], run[2]["column_lineage"] = [a], [b], []
        events += run
    return events


def test_the_depth_control_and_the_more_marker(tmp_path: pathlib.Path, page: Any) -> None:
    db = f"sqlite:///{tmp_path / 'chain.db'}"
    store = RegistryStore(db)
    for e in chain(["/a", "/b", "/c", "/d", "/e"]):
        store.apply(e)
    store.close()
    with UiServer(db) as srv:
        with srv.store.engine.connect() as conn:
            b = conn.execute(sa.text("SELECT id FROM datasets WHERE name = '/b'")).scalar_one()
        page.goto(f"{srv.url}/ui/graph?dataset={b}")  # depth 2 by default: /a ... /d, and /d leads on
        nodes, edges = graph_of(page)
        assert sorted(t for t in nodes.values() if t.startswith("file")) == ["file /a", "file /b", "file /c", "file /d"]
        assert ("file /c", "spark hop2 (FINISHED)", "edge DIRECT") in edges
        more = page.eval_on_selector_all(".graph a.node", "els => els.filter(e => e.querySelector('.more'))"
                                                          ".map(e => e.querySelector('title').textContent)")
        assert more == ["file /d"]
        page.fill("input[name=depth]", "3")
        page.get_by_role("button", name="Show").click()
        nodes, _ = graph_of(page)
        assert "file /e" in nodes.values() and page.locator(".graph .more").count() == 0
