"""The dataset page of a table dropped after a rename, in Debian's chromium: the state, the changes, and the way
back to the old name."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from lineagewire.consumers.audit.registry_store import RegistryStore
from tests.consumers.openlineage.samples import lifecycle_run

from .conftest import UiServer

pytestmark = [pytest.mark.integration, pytest.mark.browser]

from playwright.sync_api import expect  # noqa: E402 - dev installs it: missing fails, it does not skip


def test_a_dropped_renamed_table_shows_who_dropped_it_and_links_to_its_old_name(tmp_path: pathlib.Path,
                                                                                 page: Any) -> None:
    events = lifecycle_run()
    db = f"sqlite:///{tmp_path / 'reg.db'}"
    store = RegistryStore(db)
    for e in events[:-2]:  # up to the DROP
        store.apply(e)
    store.close()
    with UiServer(db) as srv:
        page.goto(f"{srv.url}/ui/find?dataset=sales.orders_v2")
        expect(page.get_by_role("status")).to_contain_text(f"Dropped by run {events[0]['header']['run_id']}")
        rows = page.locator("table.changes tbody tr")
        expect(rows).to_have_count(5)
        expect(rows.first.locator("td.change")).to_have_text("DROP")
        page.get_by_role("link", name="/warehouse/sales.db/orders", exact=True).first.click()
        expect(page.locator("h1")).to_have_text("/warehouse/sales.db/orders")
        expect(page.get_by_role("status")).to_contain_text("Renamed to /warehouse/sales.db/orders_v2")
