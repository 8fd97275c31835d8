"""Dated folders are one dataset (issue 39.4), through a real SparkSession and the emitter's own events."""

from __future__ import annotations

import json
import pathlib

import pytest

from lineagewire.producers.spark import job_run

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def _actions(path: pathlib.Path, run_id: str) -> list[dict]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in events if e["header"]["run_id"] == run_id
            and e["header"]["schema_name"].endswith("ActionLineageEvent")]


def _named(datasets: list[dict]) -> list[tuple[str, dict]]:
    return [(d["name"], d["partition_values"]) for d in datasets]


def test_a_daily_jobs_folders_are_one_dataset_with_the_day_as_partition(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path)})
    orders, daily, odd = tmp_path / "orders", tmp_path / "daily", tmp_path / "v20261129x"
    with job_run(spark, "daily orders") as run:
        df = spark.range(4).selectExpr("id", "id * 2.5 AS amount")
        df.write.parquet(str(orders / "20261129"))
        df.write.parquet(str(orders / "2026-11-30"))
        both = spark.read.parquet(str(orders / "20261129"), str(orders / "2026-11-30"))
        both.groupBy().sum("amount").withColumnRenamed("sum(amount)", "total") \
            .write.parquet(str(daily / "ds=2026-11-30"))
        spark.read.parquet(str(orders / "20261129")).write.parquet(str(odd))
    emitter.close(20)

    writes = [a for a in _actions(path, run.run_id) if a["outputs"]]
    assert [_named(a["outputs"]) for a in writes] == [
        [(str(orders), {"date": "20261129"})], [(str(orders), {"date": "2026-11-30"})],
        [(str(daily), {"ds": "2026-11-30"})], [(str(odd), {})]]
    # the read of two days is one input, and the column lineage names the same datasets as inputs and outputs
    aggregate = writes[2]
    assert _named(aggregate["inputs"]) == [(str(orders), {"date": "20261129,2026-11-30"})]
    [total] = aggregate["column_lineage"]
    assert (total["name"], total["field"]) == (str(daily), "total")
    assert {(i["name"], i["field"]) for i in total["inputs"]} == {(str(orders), "amount")}
    assert _named(writes[3]["inputs"]) == [(str(orders), {"date": "20261129"})]


def test_the_rule_turned_off_and_an_extra_pattern(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    off, extra = tmp_path / "off.jsonl", tmp_path / "extra.jsonl"
    folder = tmp_path / "orders"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(off), "dated_folders": "false"})
    with job_run(spark, "undated") as run:
        spark.range(2).write.parquet(str(folder / "20261129"))
    emitter.close(20)
    assert [_named(a["outputs"]) for a in _actions(off, run.run_id) if a["outputs"]] == [
        [(str(folder / "20261129"), {})]]

    emitter = make_emitter(listeners=["file"], config={"file_path": str(extra),
                                                       "dated_folder_patterns": r'["batch_\\d+"]'})
    with job_run(spark, "batches") as run:
        spark.range(2).write.parquet(str(folder / "batch_17"))
    emitter.close(20)
    assert [_named(a["outputs"]) for a in _actions(extra, run.run_id) if a["outputs"]] == [
        [(str(folder), {"date": "batch_17"})]]


def test_a_pattern_that_is_no_regex_is_refused_naming_the_setting(spark) -> None:  # noqa: ANN001
    from lineagewire.producers.spark import install
    from lineagewire.producers.spark.exceptions import EmitterConfigError

    with pytest.raises(EmitterConfigError, match=r"dated_folder_patterns.*'\(' is not a regular expression"):
        install(spark, listeners=["log"], config={"dated_folder_patterns": '["("]'})
