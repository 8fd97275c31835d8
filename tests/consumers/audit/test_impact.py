"""Impact (issue 40.2): the walks alone (depth, cycles, DIRECT/INDIRECT, owners), then ``impact`` over a registry
filled by ``RegistryStore.apply`` with runs shaped like the emitter's, through the CLI and ``GET /impact``."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from lineagewire import cli as top
from lineagewire.consumers.audit.impact import edge_type, impact, owners_of, walk_columns, walk_datasets
from lineagewire.consumers.audit.impact_cli import impact as impact_command
from lineagewire.consumers.audit.registry_api import create_app
from lineagewire.consumers.audit.registry_query import NotFoundError
from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.schemas import dataset, schema_field
from tests.consumers.openlineage.samples import app_run

# -- the walks over plain edges ------------------------------------------------------------------------------------


def dataset_edges(edges: list[tuple[int, int, int]]) -> Any:
    """``edges_from`` over (source, sink, job) triples, recording each level asked for."""
    def edges_from(ids: Iterable[int]) -> list[tuple[int, int]]:
        wanted = set(ids)
        edges_from.levels.append(sorted(wanted))  # type: ignore[attr-defined]
        return [(t, j) for s, t, j in edges if s in wanted]
    edges_from.levels = []  # type: ignore[attr-defined]
    return edges_from


def test_datasets_keep_their_fewest_hops_and_the_depth_stops_the_walk() -> None:
    # 1 -> 2 -> 3 -> 4 and a shortcut 1 -> 4; job 30 reads 3, job 10 reads 1 (twice)
    edges = [(1, 2, 10), (2, 3, 20), (3, 4, 30), (1, 4, 10)]
    walk = walk_datasets(dataset_edges(edges), 1, None)
    assert walk.hops == {1: 0, 2: 1, 3: 2, 4: 1}
    assert walk.job_from == {10: 0, 20: 1, 30: 2}
    assert walk.frontier == []
    limited = walk_datasets(dataset_edges(edges), 1, 1)
    assert limited.hops == {1: 0, 2: 1, 4: 1} and set(limited.frontier) == {2, 4}
    assert 20 not in limited.job_from


def test_a_cycle_ends_where_it_meets_a_dataset_already_reached() -> None:
    edges = [(1, 2, 10), (2, 3, 20), (3, 1, 30), (3, 4, 40)]
    source = dataset_edges(edges)
    walk = walk_datasets(source, 1, None)
    assert walk.hops == {1: 0, 2: 1, 3: 2, 4: 3}
    assert source.levels == [[1], [2], [3], [4]]  # 1 is not walked again from 3
    assert walk.job_from[30] == 2  # the job of the edge back to the root is still found


def column_edges(edges: list[tuple[tuple[int, str], tuple[int, str], int, str]]) -> Any:
    def edges_from(ids: Iterable[int]) -> list[tuple[tuple[int, str], tuple[int, str], int, str]]:
        wanted = set(ids)
        return [e for e in edges if e[0][0] in wanted]
    return edges_from


DIR, IND = "DIRECT/IDENTITY", "INDIRECT/FILTER"


def test_a_column_is_indirect_when_every_path_to_it_has_an_indirect_edge() -> None:
    c = column_edges([
        ((1, "c"), (2, "x"), 10, DIR), ((2, "x"), (3, "y"), 20, IND),      # c -> x DIRECT, x -> y INDIRECT
        ((1, "c"), (4, "z"), 30, IND), ((4, "z"), (5, "w"), 40, DIR),      # reached through a filter: INDIRECT after
        ((1, "a"), (6, "q"), 50, DIR),                                   # another column of the root: not followed
        ((1, "c"), (7, "v"), 60, IND), ((1, "c"), (8, "u"), 61, DIR), ((8, "u"), (7, "v"), 62, DIR),
    ])
    walk = walk_columns(c, [(1, "c")], None)
    assert walk.hops == {(1, "c"): 0, (2, "x"): 1, (3, "y"): 2, (4, "z"): 1, (5, "w"): 2, (7, "v"): 1, (8, "u"): 1}
    # (7, v): 1 hop through a filter, 2 hops through DIRECT edges: DIRECT, with its fewest hops
    assert walk.direct == {(1, "c"), (2, "x"), (7, "v"), (8, "u")}
    assert walk.job_direct == {10, 61, 62}  # 40 carries a DIRECT edge, but from an INDIRECT column
    assert walk.job_from == {10: 0, 20: 1, 30: 0, 40: 1, 60: 0, 61: 0, 62: 1}


def test_columns_on_a_cycle_and_the_depth_limit() -> None:
    c = column_edges([((1, "c"), (2, "c"), 10, DIR), ((2, "c"), (1, "c"), 20, DIR), ((2, "c"), (3, "c"), 30, DIR)])
    assert walk_columns(c, [(1, "c")], None).hops == {(1, "c"): 0, (2, "c"): 1, (3, "c"): 2}
    limited = walk_columns(c, [(1, "c")], 1)
    assert limited.hops == {(1, "c"): 0, (2, "c"): 1} and limited.frontier == [(2, "c")]


def test_edge_types_and_owners() -> None:
    assert edge_type(None) == "DIRECT" and edge_type("DIRECT/AGGREGATION,INDIRECT/GROUP_BY") == "DIRECT"
    assert edge_type("INDIRECT/FILTER,INDIRECT/JOIN") == "INDIRECT"
    assert owners_of({"owner": "ana", "owners": "bo, ana,cy", "team": "data", "other": "x"}) == [
        "ana", "bo", "cy", "data"]
    assert owners_of({}) == []


# -- impact over a registry ------------------------------------------------------------------------------------------

def _field(name: str) -> dict[str, Any]:
    return schema_field(name, "int")


def chain_run(job: str, reads: dict[str, list[str]], writes: str | None, lineage: list[tuple[str, str, str, str]],
              *, tags: dict[str, str] | None = None, incomplete: str | None = None,
              schedule: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A run of ``job`` reading ``reads`` (path -> its columns) and writing ``writes``; ``lineage``: (source path,
    source column, output column, transformation type) of the output's column lineage."""
    events = app_run(job, actions=1, schedule=schedule)
    ins = [dataset("file", p, format="parquet", fields=[_field(f) for f in fs]) for p, fs in reads.items()]
    outs = [dataset("file", writes, format="parquet",
                    fields=[_field(f) for f in sorted({x[2] for x in lineage})])] if writes else []
    cl: dict[str, dict[str, Any]] = {}
    for src, src_field, out_field, kind in lineage:
        assert writes is not None
        item = cl.setdefault(out_field, {"namespace": "file", "name": writes, "field": out_field, "inputs": []})
        item["inputs"].append({"namespace": "file", "name": src, "field": src_field, "transformations": [
            {"type": kind, "subtype": "IDENTITY" if kind == "DIRECT" else "FILTER", "description": "",
             "masking": False}]})
    created, action = events[0], events[2]
    created["spec"]["tags"] = dict(tags or {})
    created["lineage"].update(sources=ins, sinks=outs, column_lineage=list(cl.values()))
    action.update(inputs=ins, outputs=outs, column_lineage=list(cl.values()))
    if incomplete:
        action.update(lineage_complete=False, incomplete_reason=incomplete)
    return events


ABC = {"/data/abc": ["a", "b", "c"]}


def registry(tmp_path) -> str:  # noqa: ANN001
    """producer writes /data/abc (a, b, c); job1 reads a, b (and filters on c) into t1; job2 reads c into t2;
    job3 reads t1 into t3 and is the scheduler's refresh of db.t3; counter reads t2 and writes nothing."""
    url = f"sqlite:///{tmp_path / 'reg.db'}"
    store = RegistryStore(url)
    sched = {"workflow_id": "wf-t3", "command_id": "cmd-1", "nominal_time": app_run()[0]["header"]["event_time"],
             "attempt": 1}
    runs = [
        chain_run("producer", {"/data/raw": ["a", "b", "c"]}, "/data/abc",
                  [("/data/raw", f, f, "DIRECT") for f in "abc"], tags={"owner": "pat"}),
        chain_run("job1", ABC, "/data/t1", [("/data/abc", "a", "a", "DIRECT"), ("/data/abc", "b", "b", "DIRECT"),
                                            ("/data/abc", "c", "a", "INDIRECT")], tags={"owners": "ann,bob"}),
        chain_run("job2", ABC, "/data/t2", [("/data/abc", "c", "c2", "DIRECT")], tags={"team": "sales"},
                  incomplete="a Python UDF's inputs are unknown"),
        chain_run("refresh db.t3", {"/data/t1": ["a", "b"]}, "/data/t3", [("/data/t1", "a", "a", "DIRECT")],
                  tags={"table": "db.t3", "command_id": "cmd-1"}, schedule=sched),
        chain_run("counter", {"/data/t2": ["c2"]}, None, []),
    ]
    for run in runs:
        for e in run:
            store.apply(e)
    store.close()
    return url


def ask(url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    store = RegistryStore(url)
    try:
        with store.engine.connect() as conn:
            return impact(conn, *args, **kwargs)
    finally:
        store.close()


def test_impact_of_a_dataset_lists_jobs_owners_hops_tables_and_incomplete_lineage(tmp_path) -> None:  # noqa: ANN001
    url = registry(tmp_path)
    out = ask(url, "/data/abc")
    assert [(d["name"], d["hops"]) for d in out["datasets"]] == [("/data/t1", 1), ("/data/t2", 1), ("/data/t3", 2)]
    jobs = {j["job"]: j for j in out["jobs"]}
    assert {k: (j["hops"], j["owners"]) for k, j in jobs.items()} == {
        "spark/job1": (1, ["ann", "bob"]), "spark/job2": (1, ["sales"]), "spark/refresh db.t3": (2, []),
        "spark/counter": (2, [])}  # counter wrote nothing: found through its run's inputs
    assert jobs["spark/job2"]["lineage_complete"] is False
    assert jobs["spark/job2"]["incomplete_reason"] == "a Python UDF's inputs are unknown"
    assert out["incomplete_jobs"] == ["spark/job2"]
    assert out["materialized_tables"] == [{"table": "db.t3", "job": "spark/refresh db.t3", "workflow_id": "wf-t3",
                                           "hops": 2, "datasets": ["file /data/t3"]}]
    cols = {(c["name"], c["field"]): (c["hops"], c["type"]) for c in out["columns"]}
    assert cols == {("/data/t1", "a"): (1, "DIRECT"), ("/data/t1", "b"): (1, "DIRECT"),
                    ("/data/t2", "c2"): (1, "DIRECT"), ("/data/t3", "a"): (2, "DIRECT")}
    assert out["more"] is False and "producer" not in {j["job"].split("/")[1] for j in out["jobs"]}

    one = ask(url, "/data/abc", depth=1)
    assert [d["name"] for d in one["datasets"]] == ["/data/t1", "/data/t2"] and one["more"] is True
    assert {j["job"] for j in one["jobs"]} == {"spark/job1", "spark/job2"}


def test_impact_of_a_column_keeps_only_what_reads_it(tmp_path) -> None:  # noqa: ANN001
    url = registry(tmp_path)
    c = ask(url, "/data/abc", column="c")
    assert [(x["name"], x["field"], x["hops"], x["type"]) for x in c["columns"]] == [
        ("/data/t1", "a", 1, "INDIRECT"), ("/data/t2", "c2", 1, "DIRECT"), ("/data/t3", "a", 2, "INDIRECT")]
    assert [(j["job"], j["hops"], j["type"]) for j in c["jobs"]] == [
        ("spark/job1", 1, "INDIRECT"), ("spark/job2", 1, "DIRECT"), ("spark/refresh db.t3", 2, "INDIRECT")]
    b = ask(url, "/data/abc", column="b")
    assert [(x["name"], x["field"], x["type"]) for x in b["columns"]] == [("/data/t1", "b", "DIRECT")]
    assert [j["job"] for j in b["jobs"]] == ["spark/job1"] and [d["name"] for d in b["datasets"]] == ["/data/t1"]


def test_unknown_dataset_or_column_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    url = registry(tmp_path)
    with pytest.raises(NotFoundError, match=r"column 'nope' of dataset file /data/abc.*expected one of: a, b, c"):
        ask(url, "/data/abc", column="nope")
    # the top-level command as users run it (registered here in case lineagewire.cli does not list it yet)
    monkeypatch.setitem(top.COMMANDS, "impact", "lineagewire.consumers.audit.impact_cli:impact")
    for args in (["/no/such"], ["/data/abc", "--column", "nope"]):
        with pytest.raises(SystemExit) as info:
            top.main(["impact", *args, "--db-url", url])
        assert info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and args[-1] in err[0]


def test_cli_formats_and_the_rest_endpoint_agree(tmp_path) -> None:  # noqa: ANN001
    url = registry(tmp_path)
    runner = CliRunner()
    as_json = json.loads(runner.invoke(impact_command, ["/data/abc", "--format", "json", "--db-url", url],
                                       catch_exceptions=False).stdout)
    assert as_json == ask(url, "/data/abc")
    text = runner.invoke(impact_command, ["/data/abc", "--column", "c", "--db-url", url]).stdout
    assert "  1  spark/job2  (DIRECT; owners sales; lineage INCOMPLETE" in text
    assert "  2  db.t3  (workflow wf-t3, job spark/refresh db.t3)" in text
    rows = list(csv.DictReader(io.StringIO(runner.invoke(
        impact_command, ["/data/abc", "--format", "csv", "--depth", "1", "--db-url", url]).stdout)))
    assert {(r["kind"], r["job"] or r["name"], r["hops"]) for r in rows if r["kind"] != "column"} == {
        ("job", "spark/job1", "1"), ("job", "spark/job2", "1"), ("dataset", "/data/t1", "1"),
        ("dataset", "/data/t2", "1")}
    bad = runner.invoke(impact_command, ["/data/abc", "--depth", "0", "--db-url", url])
    assert bad.exit_code == 2 and "expected a number of hops" in bad.output

    store = RegistryStore(url)
    try:
        client = TestClient(create_app(store, "t" * 16))
        assert client.get("/impact", params={"dataset": "/data/abc"}).json() == as_json
        got = client.get("/impact", params={"dataset": "abc", "namespace": "file", "column": "c", "depth": 5})
        assert got.status_code == 404 and "dataset 'abc'" in got.json()["detail"]
        got = client.get("/impact", params={"dataset": "/data/abc", "column": "c", "format": "csv"})
        assert got.headers["content-type"].startswith("text/csv")
        assert [r["job"] for r in csv.DictReader(io.StringIO(got.text)) if r["kind"] == "job"] == [
            "spark/job1", "spark/job2", "spark/refresh db.t3"]
        assert client.get("/impact", params={"dataset": "/data/abc", "column": "zz"}).status_code == 404
    finally:
        store.close()
