"""Dated folders are one dataset (issue 39.4): the rule on names, then on a whole action's lineage."""

from __future__ import annotations

import pytest

from lineagewire.producers.spark.lineage.dated import DatedFolders
from lineagewire.producers.spark.lineage.model import ActionLineage
from lineagewire.schemas.events import dataset

RULE = DatedFolders()


@pytest.mark.parametrize(("name", "trimmed", "values"), [
    ("/data/orders/20261129", "/data/orders", {"date": "20261129"}),
    ("/data/orders/2026-11-29", "/data/orders", {"date": "2026-11-29"}),
    ("/data/orders/2026/11/29", "/data/orders", {"date": "2026/11/29"}),
    ("/data/orders/2026/11/29/13", "/data/orders", {"date": "2026/11/29/13"}),
    ("/data/orders/2026112913", "/data/orders", {"date": "2026112913"}),
    ("/data/orders/2026-11-29T13", "/data/orders", {"date": "2026-11-29T13"}),
    ("/data/orders/2026-11-29T13:05:00Z", "/data/orders", {"date": "2026-11-29T13:05:00Z"}),
    ("/data/orders/20261129T1305Z", "/data/orders", {"date": "20261129T1305Z"}),
    ("/data/orders/2026-11", "/data/orders", {"date": "2026-11"}),
    ("/data/orders/ds=2026-11-29", "/data/orders", {"ds": "2026-11-29"}),
    ("/data/orders/ds=2026-11-29/hour=13", "/data/orders", {"ds": "2026-11-29", "hour": "13"}),
    ("/data/orders/2026-11-29/region=eu", "/data/orders", {"region": "eu", "date": "2026-11-29"}),
    ("warehouse/orders/20261129", "warehouse/orders", {"date": "20261129"}),
])
def test_a_dated_or_key_value_leaf_is_named_by_the_folder_above(name: str, trimmed: str,
                                                                values: dict[str, str]) -> None:
    assert RULE.trim("file", name) == (trimmed, values)
    assert RULE.trim("s3://bucket", name.lstrip("/")) == (trimmed.lstrip("/"), values)


@pytest.mark.parametrize("name", [
    "/data/v20261129x",   # only looks like a date
    "/data/orders/20261399",  # no 13th month
    "/data/orders/2026-02-30",
    "/data/orders/12345678",  # an id, not a year we would see
    "/data/orders/202611",  # yyyymm without a dash is an id as often as a month
    "/data/orders/2026-11-2913",
    "/data/orders/2026/11/29/25",  # no 25th hour: the whole tail stays (2026/11/29/25 is no date)
    "/20261129",  # never trimmed to the root
    "/data/orders",
])
def test_a_name_that_is_not_dated_stays_as_it_is(name: str) -> None:
    assert RULE.trim("file", name) == (name, {})


def test_names_outside_file_systems_and_the_rule_turned_off_stay_as_they_are() -> None:
    assert RULE.trim("postgres://db:5432", "db.orders/20261129") == ("db.orders/20261129", {})
    assert RULE.trim("kafka://broker:9092", "orders/20261129") == ("orders/20261129", {})
    assert DatedFolders(enabled=False).trim("file", "/data/orders/20261129") == ("/data/orders/20261129", {})


def test_extra_patterns_trim_whole_folder_names_only() -> None:
    rule = DatedFolders(extra=(r"batch_\d+",))
    assert rule.trim("file", "/data/orders/batch_17") == ("/data/orders", {"date": "batch_17"})
    assert rule.trim("file", "/data/orders/xbatch_17") == ("/data/orders/xbatch_17", {})


def test_a_bad_extra_pattern_says_which_and_what_is_expected() -> None:
    with pytest.raises(ValueError, match=r"dated_folder_patterns: '\(' is not a regular expression.*expected"):
        DatedFolders(extra=("(",))


def _col(name: str, field: str, *inputs: tuple[str, str]) -> dict:
    return {"namespace": "file", "name": name, "field": field,
            "inputs": [{"namespace": "file", "name": n, "field": f, "transformations": []} for n, f in inputs]}


def test_an_action_reading_two_days_has_one_input_and_renamed_column_lineage() -> None:
    result = ActionLineage(
        inputs=[dataset("file", "/in/orders/20261128"), dataset("file", "/in/orders/20261129"),
                dataset("file", "/in/customers")],
        outputs=[dataset("file", "/out/daily/ds=2026-11-29", partition_values={"region": "eu"})],
        column_lineage=[_col("/out/daily/ds=2026-11-29", "total", ("/in/orders/20261128", "amount"),
                             ("/in/orders/20261129", "amount"), ("/in/customers", "id"))])
    out = RULE.apply(result)
    assert [(d["name"], d["partition_values"]) for d in out.inputs] == [
        ("/in/orders", {"date": "20261128,20261129"}), ("/in/customers", {})]
    assert [(d["name"], d["partition_values"]) for d in out.outputs] == [
        ("/out/daily", {"region": "eu", "ds": "2026-11-29"})]
    [col] = out.column_lineage
    assert (col["name"], col["field"]) == ("/out/daily", "total")
    assert [(i["name"], i["field"]) for i in col["inputs"]] == [("/in/orders", "amount"), ("/in/customers", "id")]


def test_an_action_without_dated_datasets_is_left_as_it_was() -> None:
    result = ActionLineage(inputs=[dataset("file", "/in/orders")], outputs=[dataset("file", "/out/x")],
                           column_lineage=[_col("/out/x", "a", ("/in/orders", "a"))])
    before = (list(result.inputs), list(result.outputs), list(result.column_lineage))
    assert (lambda r: (r.inputs, r.outputs, r.column_lineage))(RULE.apply(result)) == before
