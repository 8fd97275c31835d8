"""The run diff's rows and bytes written (contract v2 ``row_count``, ``byte_count``), on plain data."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from lineagewire.cli import main
from lineagewire.consumers.audit import registry_model as m
from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.consumers.audit.run_diff import UNUSUAL_ABOVE, UNUSUAL_BELOW, compare, render_text, snapshot
from lineagewire.schemas import action_lineage, dataset, header, schema_field
from tests.consumers.openlineage.samples import app_run

OUT, LOG = ("file", "/out/orders"), ("file", "/out/log")
FIELDS = [schema_field("id", "bigint", False)]


def action(run_id: str, action_id: str, writes: dict[tuple[str, str], tuple[int | None, int | None]], *,
           status: str = "SUCCEEDED", part: int = 0, parts: int = 1) -> dict[str, Any]:
    h = header("ActionLineageEvent", job_namespace="spark", job_name="orders", run_id=run_id)
    outs = [dataset(ns, name, fields=FIELDS, row_count=rows, byte_count=size)
            for (ns, name), (rows, size) in writes.items()]
    return dict(action_lineage(h, action_id, "save", action_status=status, outputs=outs,  # type: ignore[arg-type]
                               part=part, parts=parts))


def run(run_id: str, *events: dict[str, Any]):  # noqa: ANN201
    return snapshot(run_id, "spark/orders", list(events), status="FINISHED", duration_ms=1000)


def counts(rows: int | None, size: int | None, before: tuple[int | None, int | None] = (1000, 50_000)) -> dict:
    return compare(run("r2", action("r2", "a", {OUT: (rows, size)})), run("r1", action("r1", "a", {OUT: before})))


def test_counts_within_the_usual_are_reported_with_their_ratio_and_change_nothing() -> None:
    diff = counts(1200, 61_000)
    assert diff["changed"] is False
    assert diff["written"] == [{"namespace": "file", "name": "/out/orders",
                                "rows": {"before": 1000, "after": 1200, "ratio": 1.2},
                                "bytes": {"before": 50_000, "after": 61_000, "ratio": 1.22}, "unusual": False}]
    # The text leaves them out, as everything that does not change the run but the duration.
    assert render_text(diff)[-2:] == ["nothing changed since run r1", "duration: 1000 ms against 1000 ms (1.0x)"]


@pytest.mark.parametrize(("rows", "size"), [
    (499, 50_000),  # under half the rows
    (2001, 50_000),  # over twice the rows
    (1000, 24_000),  # the same rows in under half the bytes
    (0, 0),  # nothing written where the previous run wrote rows
])
def test_an_unusual_count_changes_the_run(rows: int, size: int) -> None:
    diff = counts(rows, size)
    assert diff["changed"] is True and diff["written"][0]["unusual"] is True
    text = render_text(diff)
    assert next(line for line in text if "written to" in line).endswith(" - unusual")
    assert not any(line.startswith("nothing changed") for line in text)


def test_the_bounds_themselves_are_usual() -> None:
    low, high = int(1000 * UNUSUAL_BELOW), int(1000 * UNUSUAL_ABOVE)
    assert [counts(n, 50_000)["changed"] for n in (low, high)] == [False, False]
    assert counts(5, 10, before=(0, 0))["changed"] is True  # rows where the previous run wrote none


def test_a_count_spark_did_not_give_is_no_change() -> None:
    diff = counts(None, None)
    assert diff["changed"] is False
    assert diff["written"][0]["rows"] == {"before": 1000, "after": None, "ratio": None}
    assert not [line for line in render_text(diff) if "written to" in line]
    neither = compare(run("r2", action("r2", "a", {OUT: (None, None)})),
                      run("r1", action("r1", "a", {OUT: (None, None)})))
    assert neither["written"] == [] and neither["changed"] is False


def test_a_runs_counts_sum_its_succeeded_actions_each_once() -> None:
    after = run("r2",
                action("r2", "a", {OUT: (600, 30_000)}, part=0, parts=2),
                action("r2", "a", {OUT: (600, 30_000)}, part=1, parts=2),  # a part repeats the action's outputs
                action("r2", "b", {OUT: (None, None)}),  # a CTAS: its own insert, action c, carries the counts
                action("r2", "c", {OUT: (500, 25_000)}),
                action("r2", "d", {OUT: (0, 0)}, status="FAILED"))  # a failed write committed nothing
    diff = compare(after, run("r1", action("r1", "a", {OUT: (1000, 50_000)})))
    assert diff["written"][0]["rows"] == {"before": 1000, "after": 1100, "ratio": 1.1}
    assert diff["written"][0]["bytes"]["after"] == 55_000


def test_only_outputs_of_both_runs_are_compared() -> None:
    after = run("r2", action("r2", "a", {OUT: (1000, 50_000), LOG: (3, 30)}))
    diff = compare(after, run("r1", action("r1", "a", {OUT: (1000, 50_000)})))
    assert diff["outputs"]["added"] == [{"namespace": "file", "name": "/out/log"}]
    assert [(w["name"], w["unusual"]) for w in diff["written"]] == [("/out/orders", False)]


def test_without_a_previous_run_and_in_diffs_stored_before_counts_nothing_is_said() -> None:
    diff = compare(run("r2", action("r2", "a", {OUT: (1000, 50_000)})), None)
    assert diff["written"] == []
    old = counts(1000, 50_000)
    del old["written"]  # a diff the registry stored before it compared counts
    assert render_text(old)[-2:] == ["nothing changed since run r1", "duration: 1000 ms against 1000 ms (1.0x)"]


def test_the_registry_stores_the_counts_with_the_diff_and_runs_diff_prints_them(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for day, rows in enumerate((1000, 300)):
        events = app_run("daily_orders", actions=1)
        for e in events:
            e["header"]["event_time"] += dt.timedelta(days=day)
        events[2]["outputs"] = [{**events[2]["outputs"][0], "row_count": rows, "byte_count": rows * 50}]
        runs.append(events)
    db = f"sqlite:///{tmp_path / 'reg.db'}"
    store = RegistryStore(db)
    try:
        for e in runs[0] + runs[1]:
            store.apply(e)
        with store.engine.connect() as conn:
            row = conn.execute(sa.select(m.run_diffs).where(
                m.run_diffs.c.run_id == runs[1][0]["header"]["run_id"])).one()
    finally:
        store.close()
    written = json.loads(row.diff_json)["written"]
    assert row.changed  # 300 rows where there were 1000: under half
    assert [(w["rows"], w["unusual"]) for w in written] == [({"before": 1000, "after": 300, "ratio": 0.3}, True)]
    main(["runs", "diff", runs[1][0]["header"]["run_id"], "--db-url", db])
    assert "rows written to file /data/daily_orders_out: 300 against 1000 (0.3x) - unusual" in capsys.readouterr().out
    from tests.consumers.audit.ui.conftest import UiServer

    with UiServer(db) as srv:
        panel = httpx.get(f"{srv.url}/ui/runs/{runs[1][0]['header']['run_id']}").text.split('id="diff-h"')[1]
    written_line = panel.split('class="written"')[1].split("</p>")[0]
    assert "300 rows against 1000 (0.3×)" in written_line and "<strong>unusual</strong>" in written_line
