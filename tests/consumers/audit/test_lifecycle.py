"""Lifecycle changes in the registry (issue 39.2): each change stored with its run and action, a dropped dataset
dropped by its run until re-created, a renamed one's history joined to its old name; through ``consume registry``
on the real broker, the REST API and the UI's dataset page."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from lineagewire.consumers.audit import registry_model as m
from lineagewire.consumers.audit.registry import RegistryHandler
from lineagewire.consumers.audit.registry_query import dataset_lifecycle, resolve_dataset
from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from tests.consumers.audit.ui.conftest import UiServer
from tests.consumers.openlineage.samples import LIFECYCLE_STEPS, app_run, lifecycle_run

from .conftest import registry_api

OLD, NEW = "/warehouse/sales.db/orders", "/warehouse/sales.db/orders_v2"


def lifecycle(store: RegistryStore, name: str) -> dict:
    with store.engine.connect() as conn:
        return dataset_lifecycle(conn, resolve_dataset(conn, name)[0])


def filled(tmp_path, events: list[dict]) -> RegistryStore:  # noqa: ANN001
    store = RegistryStore(f"sqlite:///{tmp_path / 'reg.db'}")
    for e in events:
        store.apply(e)
    return store


def test_each_change_is_stored_with_its_run_and_action_once(tmp_path) -> None:  # noqa: ANN001
    events = lifecycle_run()
    store = filled(tmp_path, events + events)  # the second time: already applied, nothing changes
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(m.dataset_changes.c.action_id, m.dataset_changes.c.change)
                            .order_by(m.dataset_changes.c.sequence)).fetchall()
    assert [tuple(r) for r in rows] == [(str(i), c) for i, (_, _, c, _) in enumerate(LIFECYCLE_STEPS)]
    store.close()


def test_a_dropped_dataset_is_dropped_by_its_run_until_it_is_created_again(tmp_path) -> None:  # noqa: ANN001
    events = lifecycle_run()
    run_id = events[0]["header"]["run_id"]
    store = filled(tmp_path, events[:-2])  # up to the DROP
    life = lifecycle(store, NEW)
    assert life["state"] == "dropped"
    assert life["dropped_by"]["run_id"] == run_id and life["dropped_by"]["action_id"] == "4"
    assert life["dropped_by"]["job"] == "spark/ddl"
    store.apply(events[-2])  # CREATE again
    assert lifecycle(store, NEW)["state"] == "present" and lifecycle(store, NEW)["dropped_by"] is None
    store.close()


def test_a_renamed_datasets_history_goes_on_from_its_old_name(tmp_path) -> None:  # noqa: ANN001
    events = lifecycle_run()
    store = filled(tmp_path, events)
    new, old = lifecycle(store, NEW), lifecycle(store, "sales.orders")
    assert [p["name"] for p in new["previous_names"]] == [OLD]
    assert [(c["change"], c["dataset"]["name"]) for c in new["changes"]] == [
        ("CREATE", OLD), ("ALTER", OLD), ("RENAME", NEW), ("TRUNCATE", NEW), ("DROP", NEW), ("CREATE", NEW)]
    assert new["changes"][2]["previous"]["name"] == OLD
    assert old["state"] == "renamed" and old["renamed_to"]["name"] == NEW
    assert [c["change"] for c in old["changes"]] == ["CREATE", "ALTER"]
    # A new table under the old name later: the renamed one's history keeps only what came before the rename.
    again = app_run("later", actions=1)[2]
    again["header"]["event_time"] += dt.timedelta(days=30)
    again["outputs"][0].update(name=OLD, lifecycle_change="CREATE", symlinks=[])
    store.apply(again)
    assert lifecycle(store, OLD)["state"] == "present"
    assert len(lifecycle(store, NEW)["changes"]) == 6
    store.close()


def test_events_without_changes_store_none(tmp_path) -> None:  # noqa: ANN001
    store = filled(tmp_path, app_run())
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(m.dataset_changes)).scalar_one() == 0
    assert lifecycle(store, "/data/daily_orders_out")["state"] is None
    store.close()


@pytest.fixture
def api(tmp_path) -> Iterator[tuple[str, RegistryStore]]:  # noqa: ANN001
    store = RegistryStore(f"sqlite:///{tmp_path / 'api.db'}")
    try:
        with registry_api(store) as url:
            yield url, store
    finally:
        store.close()


@pytest.mark.integration
def test_consume_registry_then_ask_the_rest_api_and_the_ui(settings, group_id, api, tmp_path) -> None:  # noqa: ANN001
    url, store = api
    events = lifecycle_run()
    with Publisher(settings) as pub:
        for e in events[:-2]:  # up to the DROP
            pub.publish(e)
    h = RegistryHandler(store.db_url, store=store)
    ConsumerRuntime(settings, h, group_id=group_id).run(max_events=len(events) - 2)
    assert h.applied == len(events) - 2
    r = httpx.get(f"{url}/datasets", params={"dataset": "sales.orders_v2"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == NEW and body["state"] == "dropped"
    assert body["dropped_by"]["run_id"] == events[0]["header"]["run_id"]
    assert [p["name"] for p in body["previous_names"]] == [OLD]
    assert httpx.get(f"{url}/datasets", params={"dataset": "/no/such"}).status_code == 404
    with UiServer(store.db_url) as srv, httpx.Client(base_url=srv.url) as client:
        where = client.get("/ui/find", params={"dataset": NEW}).headers["location"]
        page = client.get(where).text
        assert re.search(r"<strong>Dropped</strong> by run <a class=\"mono\" href=\"/ui/runs/[^\"]+\">"
                         + events[0]["header"]["run_id"], page)
        changes = page.split('id="changes-h"')[1].split("</table>")[0]
        assert re.findall(r'<td class="change">(\w+)', changes) == ["DROP", "TRUNCATE", "RENAME", "ALTER", "CREATE"]
        old_id = client.get("/ui/find", params={"dataset": OLD}).headers["location"].rsplit("/", 1)[1]
        assert f'Previously named <a class="name" href="/ui/datasets/{old_id}">{OLD}</a>' in page
        assert f'RENAME from <a class="name" href="/ui/datasets/{old_id}">{OLD}</a>' in changes
        history = page.split("Schema history")[1].split("</table>")[0]
        assert f"as {OLD}" in history  # the old name's first schema, joined
        old_page = client.get(f"/ui/datasets/{old_id}").text
        assert re.search(r"<strong>Renamed</strong> to <a class=\"name\" href=\"" + where + f'">{NEW}</a>', old_page)
        store.apply(events[-2])  # CREATE again: no longer dropped
        assert "<strong>Dropped</strong>" not in client.get(where).text
