"""Inputs a job's SQL reads from files in place (dbt-duckdb's ``read_parquet`` sources), named as the emitter names
the files (producers/ingest/file_reads.py), with no broker.

corpus/file_reads/ holds real events of ``dbt-ol run`` (openlineage-dbt 1.54, dbt-duckdb) on
examples/ingest/dbt_project, its paths rewritten to /data: they are kept apart from the corpus whose events come
back out unchanged, since these come back relocated.
"""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest

from lineagewire.producers.ingest.file_reads import relocate_file_reads
from lineagewire.producers.ingest.translate import OpenLineageTranslator
from lineagewire.producers.ingest.validation import SpecValidator
from lineagewire.schemas import Codec
from lineagewire.schemas.openlineage import restore

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
TRANSLATOR = OpenLineageTranslator()
CODEC = Codec()
DUCKDB = "duckdb:///data/warehouse/orders.duckdb"


def dbt_read_parquet() -> dict[str, Any]:
    return json.loads((CORPUS / "file_reads" / "dbt_duckdb_read_parquet_complete.json").read_text())


def with_sql(query: str, inputs: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    ev = dbt_read_parquet()
    ev["job"]["facets"]["sql"]["query"] = query
    if inputs is not None:
        ev["inputs"] = [{**copy.deepcopy(ev["inputs"][0]), "namespace": ns, "name": name} for ns, name in inputs]
    return ev


def input_names(ev: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in ev["inputs"]]


def test_a_dbt_source_read_with_read_parquet_is_the_folder_the_spark_job_wrote_at_column_level_too() -> None:
    ev = dbt_read_parquet()
    assert input_names(ev) == [(DUCKDB, "orders.main.orders")]
    *_, action = [CODEC.decode(CODEC.encode(e)) for e in TRANSLATOR.translate(ev)]
    (source,) = action["inputs"]
    # as the emitter (and openlineage-spark) names the Parquet folder: the glob of its part files cut off
    assert (source["namespace"], source["name"]) == ("file", "/data/lake/orders")
    assert source["symlinks"] == [{"namespace": DUCKDB, "name": "orders.main.orders", "type": "TABLE"}]
    assert [f["name"] for f in source["fields"]] == ["order_id", "customer_id", "amount"]  # its facets kept
    # dbt's column lineage named the table function ("read_parquet"): now the folder
    assert {(c["field"], i["namespace"], i["name"], i["field"]) for c in action["column_lineage"]
            for i in c["inputs"]} == {("customer_id", "file", "/data/lake/orders", "customer_id"),
                                      ("revenue", "file", "/data/lake/orders", "amount")}
    assert [(o["namespace"], o["name"]) for o in action["outputs"]] == [(DUCKDB, "orders.main.customer_revenue")]
    # the OpenLineage output gives the relocated event back: valid by the spec, everything else as it came
    back = restore(action)
    assert back == relocate_file_reads(ev) != ev
    assert SpecValidator().errors(back) == []
    assert {k: v for k, v in back.items() if k not in ("inputs", "outputs")} == {
        k: v for k, v in ev.items() if k not in ("inputs", "outputs")}
    assert back["inputs"][0]["facets"]["symlinks"]["identifiers"] == source["symlinks"]
    assert back["outputs"][0]["facets"]["schema"] == ev["outputs"][0]["facets"]["schema"]
    assert dbt_read_parquet() == ev  # the caller's event is not changed


@pytest.mark.parametrize(("query", "inputs", "expected"), [
    # two sources and a ref: each source paired with the read of its folder's name, the ref kept
    ("select * from read_csv_auto('/data/lake/customers.csv') c join parquet_scan('s3a://bucket/lake/orders/"
     "*/*.parquet') o using (customer_id) join \"orders\".\"main\".\"customer_revenue\" r using (customer_id)",
     [(DUCKDB, "orders.main.orders"), (DUCKDB, "orders.main.customers"), (DUCKDB, "orders.main.customer_revenue")],
     [("s3://bucket", "lake/orders"), ("file", "/data/lake/customers.csv"), (DUCKDB, "orders.main.customer_revenue")]),
    # one source and one read whose names differ: paired all the same
    ("create table t as (select * from read_json('file:/data/raw/events_2026/*.json', format = 'auto'))",
     [(DUCKDB, "orders.main.events")], [("file", "/data/raw/events_2026")]),
    # a list of folders: the one source is both
    ("select * from read_parquet(['/data/a/*.parquet', '/data/b/*.parquet'])",
     [(DUCKDB, "orders.main.orders")], [("file", "/data/a"), ("file", "/data/b")]),
])
def test_each_input_read_in_place_is_paired_with_its_read(query: str, inputs: list[tuple[str, str]],
                                                          expected: list[tuple[str, str]]) -> None:
    relocated = relocate_file_reads(with_sql(query, inputs))
    assert input_names(relocated) == expected
    assert SpecValidator().errors(relocated) == []


@pytest.mark.parametrize("query", [
    "select customer_id, sum(amount) as revenue from \"orders\".\"main\".\"orders\" group by 1",  # no file read
    "select * from read_parquet('lake/orders/*.parquet')",  # relative: where it points depends on dbt's folder
    "select * from read_parquet('/data/lake/orders/*.parquet' where",  # does not parse
    "select * from \"orders\".\"main\".\"orders\" join read_parquet('/data/lake/x/*.parquet') using (id)",  # named
])
def test_an_event_whose_inputs_are_not_read_in_place_is_given_back_as_it_came(query: str) -> None:
    ev = with_sql(query)
    assert relocate_file_reads(ev) is ev


def test_events_without_a_file_read_come_back_unchanged() -> None:
    for path in sorted(CORPUS.glob("*.json")):
        ev = json.loads(path.read_text())
        assert relocate_file_reads(ev) is ev, path.name
