"""Unit tests of the pure parts: naming, schema strings, plan JSON, Kafka strategies (no Spark)."""

from __future__ import annotations

import json

import pytest

from lineagewire.producers.spark.lineage import PlanFormatError, extract_from_plan
from lineagewire.producers.spark.lineage.connectors.kafka import kafka_topics as _kafka_topics
from lineagewire.producers.spark.lineage.naming import file_dataset_id, jdbc_dataset_id, kafka_namespace
from lineagewire.producers.spark.lineage.plan import parse_plan_json
from lineagewire.producers.spark.lineage.schema import fields_of_catalog_string, fields_of_struct_json


@pytest.mark.parametrize(("uri", "expected"), [
    ("file:/tmp/data/orders", ("file", "/tmp/data/orders")),
    ("/tmp/data/orders/", ("file", "/tmp/data/orders")),
    ("hdfs://nn:8020/warehouse/t", ("hdfs://nn:8020", "/warehouse/t")),
    ("s3a://bucket/path/to/t", ("s3://bucket", "path/to/t")),
    ("gs://bucket/t", ("gs://bucket", "t")),
    ("abfss://c@acct.dfs.core.windows.net/dir/t", ("abfss://c@acct.dfs.core.windows.net", "dir/t")),
])
def test_file_naming(uri: str, expected: tuple[str, str]) -> None:
    assert file_dataset_id(uri) == expected


@pytest.mark.parametrize(("url", "table", "expected"), [
    ("jdbc:postgresql://db.host:5432/shop?user=u&password=p", "public.orders", ("postgres://db.host:5432",
                                                                               "shop.public.orders")),
    ("jdbc:mysql://u:p@h:3306/shop", "orders", ("mysql://h:3306", "shop.orders")),
    ("jdbc:derby:memory:lw;create=true", "APP.T", ("derby:memory:lw", "APP.T")),
    ("jdbc:sqlserver://h:1433;databaseName=x;password=p", "dbo.t", ("sqlserver://h:1433", "dbo.t")),
])
def test_jdbc_naming_drops_credentials_and_parameters(url: str, table: str, expected: tuple[str, str]) -> None:
    assert jdbc_dataset_id(url, table) == expected


def test_kafka_namespace_takes_first_server() -> None:
    assert kafka_namespace("PLAINTEXT://a:9092, b:9092") == "kafka://a:9092"


@pytest.mark.parametrize(("strategy", "topics"), [
    ("Subscribe[a, b]", ["a", "b"]),
    ("Assign[t-0, t-1, u-0]", ["t", "u"]),
    ("SubscribePattern[lw\\..*]", ["lw\\..*"]),
])
def test_kafka_strategy_topics(strategy: str, topics: list[str]) -> None:
    assert [t for t, _ in _kafka_topics(strategy)] == topics


def test_catalog_string_with_quoted_names_and_nesting() -> None:
    fields = fields_of_catalog_string("struct<a:int,`b:c`:array<struct<x:decimal(10,2)>>,m:map<string,bigint>>",
                                      [False, True, True])
    assert [(f["name"], f["type"], f["nullable"]) for f in fields] == [
        ("a", "int", False), ("b:c", "array", True), ("m", "map", True)]
    assert fields[1]["fields"][0]["fields"][0]["type"] == "decimal(10,2)"
    assert [(f["name"], f["type"]) for f in fields[2]["fields"]] == [("key", "string"), ("value", "bigint")]


def test_struct_json_keeps_comments() -> None:
    struct = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {"comment": "the key"}}]}
    (f,) = fields_of_struct_json(json.dumps(struct))
    assert (f["name"], f["type"], f["nullable"], f["description"]) == ("id", "bigint", False, "the key")


def _attr(name: str, ident: int, data_type: str = "integer") -> dict:
    return {"class": "org.apache.spark.sql.catalyst.expressions.AttributeReference", "num-children": 0,
            "name": name, "dataType": data_type, "nullable": True, "metadata": {},
            "exprId": {"product-class": "org.apache.spark.sql.catalyst.expressions.ExprId", "id": ident}}


def test_plan_json_rebuilds_children_and_nested_plans() -> None:
    plan = [
        {"class": "org.apache.spark.sql.execution.command.SomeCommand", "num-children": 0,
         "query": [{"class": "org.apache.spark.sql.catalyst.plans.logical.Filter", "num-children": 1,
                    "condition": [_attr("a", 1)], "child": 0},
                   {"class": "org.apache.spark.sql.execution.LogicalRDD", "num-children": 0,
                    "output": [[_attr("a", 1)]]}]},
    ]
    root = parse_plan_json(json.dumps(plan))
    query = root.nested["query"]
    assert query.simple == "Filter" and query.path == (("f", "query"),)
    assert query.children[0].path == (("f", "query"), ("c", 0))
    assert query.expressions("condition")[0].simple == "AttributeReference"


def _compact_doc() -> dict:
    """A projection over a relation in PlanJson's compact form: each attribute once in "attrs", ~i where used."""
    e = "org.apache.spark.sql.catalyst.expressions."
    a, b = _attr("a", 1), {**_attr("b", 2), "nullable": False}
    total = [{"class": e + "Alias", "num-children": 1, "child": 0, "name": "total", "exprId": {"id": 3}},
             {"class": e + "Add", "num-children": 2, "left": 0, "right": 1, "dataType": "integer"}, -1, -2]
    return {"attrs": [a, b], "tree": [
        {"class": "org.apache.spark.sql.catalyst.plans.logical.Project", "num-children": 1,
         "projectList": [[-1], total], "child": 0},
        {"class": "org.apache.spark.sql.catalyst.plans.logical.Filter", "num-children": 1, "condition": [-2],
         "child": 0},
        {"class": "org.apache.spark.sql.execution.datasources.LogicalRelation", "output": [[-1], [-2]]}]}


def _expand(value: object, attrs: list) -> object:
    if isinstance(value, list):
        return [attrs[~v] if type(v) is int and v < 0 else _expand(v, attrs) for v in value]
    return {k: _expand(v, attrs) for k, v in value.items()} if isinstance(value, dict) else value


@pytest.mark.parametrize("form", ["compact", "toJSON"])
def test_compact_attribute_references_read_as_the_attributes_they_name(form: str) -> None:
    from lineagewire.producers.spark.lineage.columns import ColumnGraph

    doc = _compact_doc()
    root = parse_plan_json(json.dumps(doc if form == "compact" else _expand(doc["tree"], doc["attrs"])))
    relation = root.children[0].children[0]
    assert (form == "compact") == bool(root.attrs)
    assert [x.simple for x in root.children[0].expressions("condition")] == ["AttributeReference"]
    graph = ColumnGraph()
    assert [(x.expr_id, x.name, x.nullable) for x in graph.output(relation)] == [(1, "a", True), (2, "b", False)]
    graph.add_source(graph.output(relation), "file", "/t")
    graph.add_plan(root)
    lineage = graph.lineage("file", "/out", [(x.name, x.expr_id) for x in graph.output(root)])
    found = {c["field"]: {(i["field"], t["type"], t["subtype"]) for i in c["inputs"] for t in i["transformations"]}
             for c in lineage}
    assert found == {"a": {("a", "DIRECT", "IDENTITY"), ("b", "INDIRECT", "FILTER")},
                     "total": {("a", "DIRECT", "TRANSFORMATION"), ("b", "DIRECT", "TRANSFORMATION"),
                               ("b", "INDIRECT", "FILTER")}}


def test_plan_json_errors_name_what_was_expected() -> None:
    with pytest.raises(PlanFormatError, match="expected a non-empty list"):
        parse_plan_json("{}")
    with pytest.raises(PlanFormatError, match="num-children asks for more"):
        parse_plan_json('[{"class": "X", "num-children": 2}]')


def test_extract_from_plan_without_jvm_reports_lookups_as_incomplete() -> None:
    plan = [{"class": "org.apache.spark.sql.execution.datasources.LogicalRelation", "num-children": 0,
             "relation": None, "output": [[_attr("a", 1)]], "isStreaming": True}]
    result = extract_from_plan(json.dumps(plan))
    assert result.plan_node == "LogicalRelation"
    assert result.job_type == "STREAMING"
    assert not result.complete and "JVM" in (result.incomplete_reason or "")


def test_deadline_lets_dataset_naming_run_into_the_grace_period() -> None:
    from lineagewire.producers.spark.lineage import BudgetExceededError
    from lineagewire.producers.spark.lineage.jvm import Deadline

    deadline = Deadline(10.0, grace=2.0)
    assert not deadline.expired()
    deadline.check("optional work")
    deadline.end = deadline.start - 1  # the budget is spent, the grace period is not
    assert deadline.expired()
    with pytest.raises(BudgetExceededError, match=r"time budget of 10000 ms exceeded .* while tracing"):
        deadline.check("tracing")
    deadline.check_essential("naming datasets")
    deadline.hard_end = deadline.start - 1
    with pytest.raises(BudgetExceededError, match="while naming datasets"):
        deadline.check_essential("naming datasets")


def test_jdbc_query_tables() -> None:
    from lineagewire.producers.spark.lineage.connectors.jdbc import query_tables as _query_tables

    wrapped = '(SELECT a.id FROM APP.ITEMS a JOIN app."Other T" o ON a.id = o.id ' \
              'WHERE x IN (SELECT y FROM s.t)) SPARK_GEN_SUBQ_3'
    assert _query_tables(wrapped) == ["APP.ITEMS", 'app."Other T"', "s.t"]
    assert _query_tables("APP.ITEMS") is None
