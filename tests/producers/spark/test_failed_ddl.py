"""A DDL action that fails is a failed action carrying Spark's error, never a lifecycle change (issue 39.2's bad
input): its outputs are named, as any failed action's are, without ``lifecycle_change``."""

from __future__ import annotations

import json

import pytest

from lineagewire.producers.spark import job_run

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_ctas_whose_query_fails_names_its_table_without_a_create(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    @F.udf("int")
    def boom(x):  # noqa: ANN001, ANN202
        raise ValueError(f"no row {x}")

    spark.udf.register("boom", boom)
    spark.sql("DROP TABLE IF EXISTS failed_ctas")
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "time_budget_ms": "20000"})
    with pytest.raises(Exception, match="no row"), job_run(spark, "failing ctas") as run:
        spark.sql("CREATE TABLE failed_ctas USING parquet AS SELECT boom(id) AS v FROM range(3)")
    emitter.close(20)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    actions = [e for e in events if e["header"]["run_id"] == run.run_id
               and e["header"]["schema_name"].endswith("ActionLineageEvent")]
    failed = [a for a in actions if a["action_status"] == "FAILED" and a["outputs"]]
    assert failed, [(a["action_name"], a["action_status"], a["outputs"]) for a in actions]
    assert any(o["name"].endswith("/failed_ctas") for a in failed for o in a["outputs"])
    assert [o for a in actions for o in a["outputs"] if o.get("lifecycle_change")] == []
    assert all("no row" in a["error"]["message"] for a in failed)
    assert [(o["row_count"], o["byte_count"]) for a in failed for o in a["outputs"]] == [(None, None)] * sum(
        len(a["outputs"]) for a in failed)  # it committed nothing: no counts, not Spark's 0
