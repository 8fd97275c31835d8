"""A DROP that is the first thing a job does after the emitter starts is read before the table is gone (issue
39.2): the emitter watches the session catalog from install on, not from its first extraction."""

from __future__ import annotations

import json
import weakref

import pytest

from lineagewire.producers.spark import job_run

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_drop_as_the_first_statement_names_the_table_with_its_columns(spark, make_emitter, tmp_path,  # noqa: ANN001
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from lineagewire.producers.spark.lineage.connectors import lifecycle

    spark.sql("DROP TABLE IF EXISTS first_drop")
    spark.sql("CREATE TABLE first_drop (id INT, name STRING) USING parquet")
    # As in a new driver: no watcher yet (the shared session's earlier extractions made one).
    monkeypatch.setattr(lifecycle, "_WATCHERS", weakref.WeakKeyDictionary())
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "time_budget_ms": "20000"})
    with job_run(spark, "drops first") as run:
        spark.sql("DROP TABLE first_drop")
    emitter.close(20)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    outputs = [o for e in events if e["header"]["run_id"] == run.run_id
               and e["header"]["schema_name"].endswith("ActionLineageEvent") for o in e["outputs"]]
    [dropped] = [o for o in outputs if o.get("lifecycle_change") == "DROP"]
    assert dropped["name"].endswith("/first_drop")
    assert [(f["name"], f["type"]) for f in dropped["fields"]] == [("id", "int"), ("name", "string")]
