"""The UI in real Chromium, for where runs come from and whether data can be trusted: each run's producer (our
emitter or an OpenLineage producer, issue 42), a materialized table's inputs and why its refresh is held (from the
scheduler's REST API, a stand-in here), and a dataset's freshness promise (issue 41).

One registry for the module, filled with the store ``consume registry`` uses; one UI server over it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.freshness import load_promises
from lineagewire.schemas import dataset
from tests.consumers.audit.test_registry_ingested import DBT_OL, IngestedRun
from tests.consumers.openlineage.samples import app_run, refresh_run

from .conftest import TABLE, UiServer, scheduler_stand_in

pytestmark = [pytest.mark.integration, pytest.mark.browser]

from playwright.sync_api import expect  # noqa: E402 - dev installs it: missing fails, it does not skip


class Sources:
    """The module's UI and the runs it shows."""

    def __init__(self, url: str, upstream: dict[str, Any], dbt: IngestedRun) -> None:
        self.url, self.upstream, self.dbt = url, upstream, dbt


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sources]:
    tmp = tmp_path_factory.mktemp("ui-sources")
    # the upstream job that failed (the stand-in's hold names its run), the refresh it holds, a dbt model ingested
    # from OpenLineage, and a job that wrote ten minutes ago (a kept promise)
    failed = app_run("ingest_orders", fail=True)
    upstream = {"job_namespace": "spark", "job_name": "ingest_orders", "run_id": failed[0]["header"]["run_id"]}
    fresh = app_run("fresh_writer")
    shift = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10) - fresh[0]["header"]["event_time"]
    for e in fresh:
        e["header"]["event_time"] += shift
        if "transition_time" in e:
            e["transition_time"] += shift
    dbt = IngestedRun("orders_summary", DBT_OL)
    summary = dataset("duckdb://warehouse", "main.orders_summary")
    ingested = [dbt.start(0), dbt.lineage(5, [dataset("file", "/data/daily_orders_out")], [summary]),
                dbt.status(9, "FINISHED")]
    db = f"sqlite:///{tmp / 'registry.db'}"
    store = RegistryStore(db)
    for e in [*failed, *refresh_run(TABLE), *fresh, *ingested]:
        store.apply(e)
    store.close()
    (tmp / "promises.yaml").write_text(
        "datasets:\n"
        "  - {dataset: /data/fresh_writer_out, freshness: 1h, owner: sales-data}\n"
        "  - {dataset: sales.orders, freshness: 1d}\n"              # by its table name: read, never written
        "  - {dataset: 'file:/data/daily_orders_out', freshness: 1h}\n"  # written on 2026-11-01: stale
        "  - {dataset: raw.clicks, freshness: 1h}\n")  # a table the registry has never seen
    with scheduler_stand_in(upstream) as scheduler, \
            UiServer(db, scheduler_url=scheduler, promises=load_promises(tmp / "promises.yaml")) as srv:
        yield Sources(srv.url, upstream, dbt)


def test_each_run_says_which_producer_it_came_from(sources: Sources, page: Any) -> None:
    page.goto(sources.url + "/ui/jobs")
    ours = page.locator("table.jobs tbody tr", has_text="fresh_writer").locator(".producer")
    expect(ours).to_have_text("lineagewire")
    dbt = page.locator("table.jobs tbody tr", has_text="orders_summary")
    expect(dbt.locator(".producer")).to_have_text("dbt")
    expect(dbt.locator(".producer")).to_have_attribute("title", DBT_OL)  # the URI on hover
    dbt.get_by_role("link", name="orders_summary").click()
    run = page.locator("table.runs tbody tr")
    expect(run.locator(".producer")).to_have_text("dbt")
    run.locator("a").first.click()
    expect(page.locator("h1")).to_contain_text(sources.dbt.run_id)
    expect(page.locator("main > p").nth(1).locator(".producer")).to_have_text("dbt")


def test_a_tables_inputs_and_why_its_refresh_is_held(sources: Sources, page: Any) -> None:
    page.goto(sources.url + "/ui/jobs")
    page.locator("table.jobs tbody tr", has_text="spark").get_by_role("link", name=TABLE, exact=True).click()
    held = page.locator("section[aria-labelledby=refresh-h] p.held")
    expect(held).to_contain_text("HELD upstream failed (/data/orders): ingest_orders FAILED")
    held.get_by_role("link", name="inputs and why it is held").click()

    expect(page.locator("h1")).to_have_text(TABLE)
    rows = page.locator("table.inputs tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".status")).to_have_text(["FAILED", "failed"])
    expect(rows.nth(0)).to_contain_text("2026-10-31T03:00:02Z")  # its last write
    expect(rows.nth(1).locator(".status")).to_have_text("never written")
    hold = page.locator("section.held article.held-refresh")
    expect(hold.locator("h3")).to_contain_text("Refresh for 2026-11-01T06:00:00Z HELD")
    expect(hold.locator("li")).to_contain_text("upstream failed: input /data/orders, upstream spark/ingest_orders run")
    hold.locator("li a.mono").click()  # the upstream run, in the registry
    expect(page.locator("h1")).to_contain_text(sources.upstream["run_id"])
    expect(page.locator("main > p").nth(1).locator(".status").first).to_have_text("FAILED")
    page.go_back()
    page.locator("table.inputs tbody tr").nth(0).get_by_role("link", name="/data/orders").click()
    expect(page.locator("h1")).to_have_text("/data/orders")


def test_a_datasets_freshness_promise_and_whether_it_is_kept(sources: Sources, page: Any) -> None:
    for name, state, text in (("/data/fresh_writer_out", "kept", "written at least every 1h (owner sales-data)"),
                              ("sales.orders", "never written", "sales.orders written at least every 1d"),
                              ("/data/daily_orders_out", "not kept", "written at least every 1h")):
        page.goto(f"{sources.url}/ui/find?dataset={name}")
        promise = page.locator("section.promise")
        expect(promise.locator(".status")).to_have_text(state)
        expect(promise).to_contain_text(text)
    # the stale one names its last good write and since when it is stale
    expect(promise).to_contain_text("Last successful write 2026-11-01 03:00:02 UTC by spark/daily_orders run")
    expect(promise).to_contain_text("stale since 2026-11-01 04:00:02 UTC")
    page.goto(f"{sources.url}/ui/find?dataset=main.orders_summary")
    expect(page.locator("section.promise")).to_contain_text("No freshness promise names this dataset.")


def test_every_promise_and_whether_it_is_kept_an_unknown_dataset_too(sources: Sources, page: Any) -> None:
    page.goto(sources.url + "/ui/jobs")
    page.get_by_role("link", name="Promises").click()
    rows = page.locator("table.promises tbody tr")
    expect(rows.locator(".status")).to_have_text(["kept", "never written", "not kept", "never written"])
    expect(rows.nth(1)).to_contain_text("file /data/orders")  # sales.orders, found by its table name
    expect(rows.nth(3)).to_contain_text("raw.clicks (not in the registry)")
    rows.nth(0).get_by_role("link", name="spark/fresh_writer").click()
    expect(page.locator("h1")).to_have_text("fresh_writer")
