"""DataFrames cut from their plans by ``checkpoint()`` / ``localCheckpoint()`` keep their sources (issue 22.2)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from .conftest import Capture, by_name, inputs_of

pytestmark = pytest.mark.spark


@pytest.fixture
def sources(spark: Any, tmp_path: pathlib.Path) -> dict[str, str]:
    orders, customers = str(tmp_path / "orders"), str(tmp_path / "customers")
    spark.createDataFrame([(1, 10, 5.0), (2, 20, 7.0), (3, 10, -1.0)], "id int, cust int, amount double") \
        .write.parquet(orders)
    spark.createDataFrame([(10, "ann"), (20, "bob")], "cust int, name string").write.parquet(customers)
    return {"orders": orders, "customers": customers}


@pytest.mark.parametrize("how", ["checkpoint", "localCheckpoint"])
def test_checkpointed_side_of_a_join_names_its_files(spark: Any, capture: Capture, sources: dict[str, str],
                                                      tmp_path: pathlib.Path, how: str) -> None:
    spark.sparkContext.setCheckpointDir(str(tmp_path / "checkpoints"))
    paid = spark.read.parquet(sources["orders"]).where("amount > 0") \
        .selectExpr("cust", "amount * 2 AS doubled")
    # The checkpoint is an action of its own: the extraction sees the plan it cuts off.
    cut = capture.run(lambda: getattr(paid, how)(), lambda r: r.plan_node is not None and bool(r.inputs))
    assert [d["name"] for d in cut.inputs] == [sources["orders"]]

    joined = getattr(paid, how)().join(spark.read.parquet(sources["customers"]), "cust")
    out = str(tmp_path / "out")
    result = capture.run(lambda: joined.write.parquet(out))
    assert result.complete, result.incomplete_reason
    got = by_name(result.inputs)
    assert set(got) == {sources["orders"], sources["customers"]}
    assert got[sources["orders"]]["properties"]["via"] == how
    assert got[sources["orders"]]["format"] == "parquet"
    # Column lineage goes through the cut: doubled is amount * 2, filtered on amount before the checkpoint.
    doubled = inputs_of(result, "doubled")
    assert doubled["amount"] == {("DIRECT", "TRANSFORMATION"), ("INDIRECT", "FILTER")}
    assert ("INDIRECT", "JOIN") in doubled["cust"]
    assert inputs_of(result, "name")["name"] == {("DIRECT", "IDENTITY")}
