"""The run diff's comparison (``run_diff``), on plain data: no database, no broker."""

from __future__ import annotations

import copy
from typing import Any

from lineagewire.consumers.audit.run_diff import compare, render_text, snapshot
from lineagewire.schemas import action_lineage, dataset, header, job_created, job_spec, schema_field

A, B, OUT = ("file", "/in/a"), ("file", "/in/b"), ("file", "/out/wide")


def action(run_id: str, seq: int, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]],
           fields: list[dict[str, Any]], lineage: dict[str, list[tuple[str, str, str]]], *,
           complete: bool = True, partition: str = "2026-11-01") -> dict[str, Any]:
    h = header("ActionLineageEvent", job_namespace="spark", job_name="wide", run_id=run_id, sequence=seq)
    ins = [dataset(ns, name, fields=[schema_field("x", "int")], partition_values={"date": partition},
                   properties={"version": f"v{seq}"}) for ns, name in inputs]
    outs = [dataset(ns, name, fields=fields, operation="Overwrite", partition_values={"date": partition})
            for ns, name in outputs]
    cols = [{"namespace": outputs[0][0], "name": outputs[0][1], "field": f,
             "inputs": [{"namespace": s[0], "name": s[1], "field": s[2], "transformations": []} for s in srcs]}
            for f, srcs in lineage.items()]
    return dict(action_lineage(h, "0", "save", inputs=ins, outputs=outs, column_lineage=cols,
                               lineage_complete=complete, incomplete_reason=None if complete else "plan timed out"))


COLS = [schema_field("a", "int", False), schema_field("b", "string"), schema_field("c", "double")]
LINEAGE = {"a": [("file", "/in/a", "x")], "b": [("file", "/in/a", "y")], "c": [("file", "/in/a", "z")]}
SPEC = dict(job_spec("wide", "4.0.0", application_id="local-1", conf={"spark.sql.shuffle.partitions": "2",
                                                                       "spark.lineagewire.run_id": "r1"}))


def snap(run_id: str, events: list[dict[str, Any]], *, spec: dict[str, Any] | None = None, duration: int = 1000,
         changes: list[dict[str, Any]] = (), status: str = "FINISHED"):  # noqa: ANN201
    return snapshot(run_id, "spark/wide", events, status=status, duration_ms=duration,
                    spec=SPEC if spec is None else spec, changes=changes)


def base(run_id: str, **kw: Any):  # noqa: ANN201
    return snap(run_id, [action(run_id, 2, [A], [OUT], COLS, LINEAGE, **kw)])


def test_an_identical_run_changed_nothing_whatever_differs_on_every_run() -> None:
    spec = {**SPEC, "application_id": "local-2", "conf": {**SPEC["conf"], "spark.lineagewire.run_id": "r2"}}
    after = snap("r2", [action("r2", 7, [A], [OUT], COLS, LINEAGE, partition="2026-11-02")], spec=spec, duration=1500)
    diff = compare(after, base("r1"))
    assert diff["changed"] is False and diff["against"] == "r1" and diff["lineage_complete"] is True
    assert diff["inputs"] == diff["outputs"] == {"added": [], "removed": []}
    assert diff["schemas"] == diff["column_lineage"] == diff["lifecycle"] == [] and diff["spec"] is None
    assert diff["duration"] == {"before_ms": 1000, "after_ms": 1500, "ratio": 1.5}
    assert render_text(diff)[-2:] == ["nothing changed since run r1", "duration: 1500 ms against 1000 ms (1.5x)"]


def test_inputs_outputs_schema_and_column_lineage_changes() -> None:
    cols = [schema_field("a", "bigint", True), schema_field("b", "string"),
            schema_field("s", "struct", fields=[schema_field("n", "int")])]
    lineage = {"a": [("file", "/in/a", "x")], "b": [("file", "/in/a", "y"), ("file", "/in/b", "k")]}
    after = snap("r2", [action("r2", 2, [A, B], [OUT], cols, lineage),
                        action("r2", 3, [A], [("file", "/out/new")], COLS[:1], {"a": [("file", "/in/a", "x")]})])
    diff = compare(after, base("r1"))
    assert diff["changed"] is True
    assert diff["inputs"] == {"added": [{"namespace": "file", "name": "/in/b"}], "removed": []}
    assert diff["outputs"] == {"added": [{"namespace": "file", "name": "/out/new"}], "removed": []}
    [schema] = diff["schemas"]
    assert (schema["namespace"], schema["name"]) == OUT
    assert [f["field"] for f in schema["added"]] == ["s", "s.n"]
    assert schema["removed"] == [{"field": "c", "type": "double", "nullable": True}]
    assert schema["retyped"] == [{"field": "a", "before": "int", "after": "bigint"}]
    assert schema["nullability"] == [{"field": "a", "before": False, "after": True}]
    # c was removed (a schema change, not a lineage one); b gained a source; a kept its own
    assert diff["column_lineage"] == [{"namespace": "file", "name": "/out/wide", "field": "b",
                                       "added": [{"namespace": "file", "name": "/in/b", "field": "k"}],
                                       "removed": []}]
    text = render_text(diff)
    assert "input added: file /in/b" in text and "schema of file /out/wide: column removed: c double" in text
    assert "column lineage of file /out/wide b: +file /in/b k" in text
    assert not any(line.startswith("nothing changed") for line in text)
    back = compare(base("r1"), after)  # the other way round: what was added is removed
    assert back["inputs"]["removed"] == [{"namespace": "file", "name": "/in/b"}]
    assert back["outputs"]["removed"] == [{"namespace": "file", "name": "/out/new"}]


def test_spec_changes_key_by_key_with_the_unified_diff() -> None:
    spec = copy.deepcopy(SPEC)
    spec["conf"]["spark.sql.shuffle.partitions"] = "8"
    spec["engine_version"] = "4.0.1"
    diff = compare(snap("r2", [action("r2", 2, [A], [OUT], COLS, LINEAGE)], spec=spec), base("r1"))
    assert diff["changed"] is True
    assert diff["spec"]["changed"] == [{"key": "conf.spark.sql.shuffle.partitions", "before": "2", "after": "8"},
                                       {"key": "engine_version", "before": "4.0.0", "after": "4.0.1"}]
    assert '-  "spark.sql.shuffle.partitions": "2"' in diff["spec"]["diff"]
    assert "application_id" not in diff["spec"]["diff"] and "run_id" not in diff["spec"]["diff"]
    assert "spec: conf.spark.sql.shuffle.partitions: '2' -> '8'" in render_text(diff)


def test_lifecycle_changes_this_run_made_that_the_previous_did_not() -> None:
    renamed = {"change": "RENAME", "namespace": "file", "name": "/out/v2",
               "previous": {"namespace": "file", "name": "/out/v1"}}
    every_run = [{"change": "CREATE", "namespace": "file", "name": "/tmp/t", "previous": None},
                 {"change": "OVERWRITE", "namespace": "file", "name": "/out/wide", "previous": None}]
    before = snap("r1", [action("r1", 2, [A], [OUT], COLS, LINEAGE)], changes=every_run)
    after = snap("r2", [action("r2", 2, [A], [OUT], COLS, LINEAGE)], changes=[*every_run, renamed])
    diff = compare(after, before)
    assert diff["changed"] is True and diff["lifecycle"] == [renamed]
    assert "lifecycle: RENAME file /out/v2 (was file /out/v1)" in render_text(diff)
    assert compare(before, before)["changed"] is False  # the CREATE every run makes is no change


def test_incomplete_lineage_of_either_run_is_said() -> None:
    diff = compare(base("r2"), base("r1", complete=False))
    assert diff["lineage_complete"] is False and diff["incomplete"] == {"r1": ["action 0: plan timed out"]}
    assert diff["changed"] is False
    assert any("lineage incomplete in run r1 (action 0: plan timed out)" in line for line in render_text(diff))
    assert compare(base("r2", complete=False), None)["lineage_complete"] is False


def test_no_previous_successful_run() -> None:
    diff = compare(base("r1"), None)
    assert diff["against"] is None and diff["changed"] is False
    assert render_text(diff) == ["run r1 of spark/wide (FINISHED)", "no previous successful run of spark/wide to "
                                 "compare with"]


def test_a_run_that_said_no_schema_or_spec_is_no_schema_or_spec_change() -> None:
    bare = snap("r2", [action("r2", 2, [A], [OUT], [], LINEAGE)], spec={})
    without = snapshot("r3", "spark/wide", [action("r3", 2, [A], [OUT], [], LINEAGE)])
    assert compare(bare, base("r1"))["schemas"] == [] and compare(without, base("r1"))["spec"] is None


def test_job_created_lineage_counts_too() -> None:
    h = header("JobCreatedEvent", job_namespace="spark", job_name="wide", run_id="r2", sequence=0)
    created = dict(job_created(h, job_spec("wide", "4.0.0"), {
        "sources": [dataset(*B)], "sinks": [], "relations": [], "column_lineage": []}))
    after = snap("r2", [created, action("r2", 2, [A], [OUT], COLS, LINEAGE)])
    assert compare(after, base("r1"))["inputs"]["added"] == [{"namespace": "file", "name": "/in/b"}]
