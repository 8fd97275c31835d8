"""Run diffs in the registry (issue 40.1): stored once when a run ends, read by ``runs diff``, the REST API and the
UI's run page; and ``datasets show`` (issue 39's leftover). Events shaped like the emitter's, applied directly."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from lineagewire.cli import COMMANDS, main
from lineagewire.consumers.audit import registry_model as m
from lineagewire.consumers.audit.registry_query import dataset_detail
from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.schemas import dataset
from tests.consumers.audit.ui.conftest import UiServer
from tests.consumers.openlineage.samples import app_run, lifecycle_run

from .conftest import registry_api

#: until lineagewire/cli.py lists it, the command the tests reach through the top-level group
DATASETS = "lineagewire.consumers.audit.registry_cli:datasets"


def on_day(events: list[dict[str, Any]], day: int) -> list[dict[str, Any]]:
    for e in events:
        e["header"]["event_time"] += dt.timedelta(days=day)
    return events


def runs() -> list[list[dict[str, Any]]]:
    """daily_orders: a first run; a second with a changed conf and a new input; a third like the second, failed;
    then another job's run."""
    first = on_day(app_run("daily_orders"), 0)
    second = on_day(app_run("daily_orders"), 1)
    second[0]["spec"]["conf"] = {"spark.sql.shuffle.partitions": "8"}
    second[3]["inputs"].append(dataset("file", "/data/customers", format="parquet"))
    third = on_day(app_run("daily_orders", fail=True), 2)
    third[0]["spec"]["conf"] = {"spark.sql.shuffle.partitions": "8"}
    third[3]["inputs"].append(dataset("file", "/data/customers", format="parquet"))
    return [first, second, third, on_day(app_run("report"), 3)]


def run_id(events: list[dict[str, Any]]) -> str:
    return str(events[0]["header"]["run_id"])


@pytest.fixture
def store(tmp_path) -> Iterator[RegistryStore]:  # noqa: ANN001
    st = RegistryStore(f"sqlite:///{tmp_path / 'reg.db'}")
    yield st
    st.close()


def stored(store: RegistryStore) -> dict[str, Any]:
    with store.engine.connect() as conn:
        return {r.run_id: (r.against_run_id, r.changed, json.loads(r.diff_json))
                for r in conn.execute(sa.select(m.run_diffs))}


def test_the_diff_is_stored_when_the_run_ends(store: RegistryStore) -> None:
    first, second, third, report = runs()
    for e in first[:-1]:  # not ended yet: nothing stored
        store.apply(e)
    assert stored(store) == {}
    for e in [first[-1], *second, *third, *report]:
        store.apply(e)
    diffs = stored(store)
    assert set(diffs) == {run_id(first), run_id(second), run_id(third), run_id(report)}
    assert diffs[run_id(first)][:2] == (None, False) and diffs[run_id(report)][:2] == (None, False)
    against, changed, diff = diffs[run_id(second)]
    assert (against, changed) == (run_id(first), True)
    assert diff["inputs"] == {"added": [{"namespace": "file", "name": "/data/customers"}], "removed": []}
    assert diff["spec"]["changed"] == [{"key": "conf.spark.sql.shuffle.partitions", "before": None, "after": "8"}]
    assert diff["outputs"] == {"added": [], "removed": []} and diff["schemas"] == diff["column_lineage"] == []
    assert diff["duration"] == {"before_ms": 9000, "after_ms": 9000, "ratio": 1.0}
    # the failed run against the previous successful one (the second), not the first
    against, changed, diff = diffs[run_id(third)]
    assert (against, changed, diff["status"]) == (run_id(second), False, "FAILED")


def test_an_action_after_the_end_updates_the_diff(store: RegistryStore) -> None:
    first, second, _, _ = runs()
    for e in first + second[:3] + second[4:] + [second[3]]:  # the action with the new input comes last
        store.apply(e)
    against, changed, diff = stored(store)[run_id(second)]
    assert against == run_id(first) and changed
    assert diff["inputs"]["added"] == [{"namespace": "file", "name": "/data/customers"}]


def cli(capsys: pytest.CaptureFixture[str], db: str, *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main([*args, "--db-url", db])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def filled(store: RegistryStore, events: list[list[dict[str, Any]]]) -> None:
    for run in events:
        for e in run:
            store.apply(e)


def test_runs_diff_command(store: RegistryStore, capsys: pytest.CaptureFixture[str]) -> None:
    first, second, third, report = runs()
    filled(store, [first, second, third, report])
    db = store.db_url
    code, out, _ = cli(capsys, db, "runs", "diff", run_id(second))
    assert code == 0
    assert out.splitlines() == [
        f"run {run_id(second)} of spark/daily_orders (FINISHED) against run {run_id(first)} (FINISHED)",
        "input added: file /data/customers", "spec: conf.spark.sql.shuffle.partitions: None -> '8'",
        "duration: 9000 ms against 9000 ms (1.0x)"]
    code, out, _ = cli(capsys, db, "runs", "diff", run_id(third), "--format", "json")
    body = json.loads(out)
    assert code == 0 and body["stored"] is True and body["changed"] is False and body["against"] == run_id(second)
    code, out, _ = cli(capsys, db, "runs", "diff", run_id(third))
    assert f"nothing changed since run {run_id(second)}" in out.splitlines()
    code, out, _ = cli(capsys, db, "runs", "diff", run_id(first))
    assert out.splitlines()[-1] == "no previous successful run of spark/daily_orders to compare with"
    # against a chosen run of the job: computed now
    code, out, _ = cli(capsys, db, "runs", "diff", run_id(third), "--against", run_id(first), "--format", "json")
    body = json.loads(out)
    assert body["stored"] is False and body["against"] == run_id(first) and body["changed"] is True
    code, out, err = cli(capsys, db, "runs", "diff", run_id(third), "--against", run_id(report))
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "spark/daily_orders" in err and "spark/report" in err
    code, out, err = cli(capsys, db, "runs", "diff", "no-such-run")
    assert code == 2 and err.splitlines() == [
        "error: run 'no-such-run' is not in the registry; expected a run id (see: lineagewire jobs show JOB)"]
    code, _, err = cli(capsys, db, "runs", "diff", run_id(first), "--against", "nor-this")
    assert code == 2 and "'nor-this'" in err


@pytest.fixture
def api(store: RegistryStore) -> Iterator[str]:
    with registry_api(store) as url:
        yield url


def test_rest_gives_the_same_diff(store: RegistryStore, api: str, capsys: pytest.CaptureFixture[str]) -> None:
    first, second, third, report = runs()
    filled(store, [first, second, third, report])
    r = httpx.get(f"{api}/runs/{run_id(second)}/diff")
    assert r.status_code == 200, r.text
    _, out, _ = cli(capsys, store.db_url, "runs", "diff", run_id(second), "--format", "json")
    assert r.json() == json.loads(out) and r.json()["changed"] is True
    r = httpx.get(f"{api}/runs/{run_id(third)}/diff", params={"against": run_id(first)})
    assert r.status_code == 200 and r.json()["against"] == run_id(first)
    r = httpx.get(f"{api}/runs/{run_id(third)}/diff", params={"against": run_id(report)})
    assert r.status_code == 422 and "spark/report" in r.json()["detail"]
    r = httpx.get(f"{api}/runs/no-such-run/diff")
    assert r.status_code == 404 and "'no-such-run'" in r.json()["detail"]


def test_the_run_page_opens_with_what_changed(store: RegistryStore) -> None:
    first, second, third, _ = runs()
    running = on_day(app_run("daily_orders"), 3)[:3]  # not ended, one action so far: computed when the page asks
    running[0]["spec"]["conf"] = {"spark.sql.shuffle.partitions": "8"}
    filled(store, [first, second, third, running])
    with UiServer(store.db_url) as srv, httpx.Client(base_url=srv.url) as client:
        page = client.get(f"/ui/runs/{run_id(second)}").text
        panel = page.split('id="diff-h"')[1].split("</section>")[0]
        assert page.index('id="diff-h"') < page.index('id="tr-h"')  # the page opens with it
        assert "input added: <a class=\"name\" href=\"/ui/find?dataset=/data/customers&amp;namespace=file\">" \
               "file /data/customers</a>" in panel
        assert '<span class="mono">conf.spark.sql.shuffle.partitions</span>: – → 8' in panel
        assert "Nothing changed" not in panel
        panel = client.get(f"/ui/runs/{run_id(third)}").text.split('id="diff-h"')[1].split("</section>")[0]
        assert f'Nothing changed since run <a class="mono" href="/ui/runs/{run_id(second)}">' in panel
        assert "<li>" not in panel
        panel = client.get(f"/ui/runs/{run_id(first)}").text.split('id="diff-h"')[1].split("</section>")[0]
        assert "No previous successful run of this job to compare with." in panel
        panel = client.get(f"/ui/runs/{run_id(running)}").text.split('id="diff-h"')[1].split("</section>")[0]
        assert f'Since run <a class="mono" href="/ui/runs/{run_id(second)}">' in panel
        assert panel.count("<li>") == 1 and "input removed: " in panel


def test_datasets_show(store: RegistryStore, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(COMMANDS, "datasets", DATASETS)
    events = lifecycle_run()
    ddl = run_id(events)
    filled(store, [events[:-2]])  # up to the DROP
    code, out, _ = cli(capsys, store.db_url, "datasets", "show", "sales.orders_v2")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].startswith(f"file /warehouse/sales.db/orders_v2: dropped by run {ddl} of spark/ddl at ")
    assert lines[1].startswith(f"previously named file /warehouse/sales.db/orders (renamed 2026-11-02T03:00:04Z by "
                               f"run {ddl}")
    assert [x.split()[1] for x in lines[3:]] == ["CREATE", "ALTER", "RENAME", "TRUNCATE", "DROP"]
    assert "RENAME from file /warehouse/sales.db/orders" in lines[5]
    assert lines[3].split()[2:4] == ["as", "/warehouse/sales.db/orders"]  # under its old name
    code, out, _ = cli(capsys, store.db_url, "datasets", "show", "/warehouse/sales.db/orders_v2", "--namespace",
                       "file", "--format", "json")
    with store.engine.connect() as conn:
        assert json.loads(out) == dataset_detail(conn, "sales.orders_v2")
    code, out, _ = cli(capsys, store.db_url, "datasets", "show", "sales.orders")
    assert code == 0 and out.splitlines()[0].startswith(
        "file /warehouse/sales.db/orders: renamed to file /warehouse/sales.db/orders_v2 by run ")
    code, out, err = cli(capsys, store.db_url, "datasets", "show", "/no/such")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "'/no/such'" in err


def test_lifecycle_changes_come_from_the_registrys_dataset_changes(store: RegistryStore) -> None:
    full = on_day(lifecycle_run(), 1)
    only_create = on_day(lifecycle_run(), 0)
    only_create = only_create[:3] + only_create[-1:]  # CREATE sales.orders, then FINISHED
    filled(store, [only_create, full])
    against, changed, diff = stored(store)[run_id(full)]
    assert against == run_id(only_create) and changed
    v2 = "/warehouse/sales.db/orders_v2"
    assert [(c["change"], c["name"], c["previous"]) for c in diff["lifecycle"]] == [
        ("CREATE", v2, None), ("DROP", v2, None),
        ("RENAME", v2, {"namespace": "file", "name": "/warehouse/sales.db/orders"}), ("TRUNCATE", v2, None)]
