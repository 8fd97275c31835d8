"""Apache Iceberg (iceberg-spark-runtime through spark.jars.packages), on a Hadoop catalog ``ice`` in a
temporary folder, in a session of its own.

The scenario runs in a child process (see ``isolated.py``) at the emitter's shipped time budget.
Iceberg's CTAS runs an inner write action next to the command: the scenario picks the user's action
by its plan node. Each write's ``properties["version"]`` is checked against the table's own snapshot
list (``ice.db.t.snapshots``), which the scenario saves next to its results.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from .conftest import collect, inputs_of
from .isolated import Scenarios, scenario

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

MOR = ("'write.update.mode'='merge-on-read'", "'write.delete.mode'='merge-on-read'")


def _node(name: str) -> Any:
    return lambda r: r.plan_node == name


@scenario
def lake(spark: Any, capture: Any, folder: pathlib.Path) -> dict[str, Any]:
    from pyspark.sql.functions import col

    df = spark.createDataFrame([(1, "a", 2.0), (2, "b", 3.0)], "id int, k string, v double")
    out = {}
    out["create"] = capture.run(lambda: df.writeTo("ice.db.t").partitionedBy(col("k")).create(),
                                _node("CreateTableAsSelect"))
    out["append"] = capture.run(lambda: df.selectExpr("id + 10 AS id", "k", "v").writeTo("ice.db.t").append(),
                                _node("AppendData"))
    out["overwrite_partitions"] = capture.run(
        lambda: df.where("k = 'a'").writeTo("ice.db.t").overwritePartitions(), _node("OverwritePartitionsDynamic"))
    out["create_or_replace"] = capture.run(
        lambda: spark.table("ice.db.t").selectExpr("id + 1 AS id", "upper(k) AS k", "v")
        .writeTo("ice.db.s").createOrReplace(), _node("ReplaceTableAsSelect"))
    out["insert"] = capture.run(lambda: spark.sql("INSERT INTO ice.db.t SELECT id + 100, k, v FROM ice.db.s"),
                                _node("AppendData"))
    out["merge"] = capture.run(lambda: spark.sql(
        "MERGE INTO ice.db.t t USING ice.db.s s ON t.id = s.id "
        "WHEN MATCHED AND s.v > 0 THEN UPDATE SET t.v = s.v * 2 "
        "WHEN NOT MATCHED THEN INSERT (id, k, v) VALUES (s.id, lower(s.k), s.v)"), _node("ReplaceData"))
    out["update"] = capture.run(lambda: spark.sql("UPDATE ice.db.t SET v = v + 1 WHERE id < 100"),
                                _node("ReplaceData"))
    # `id + 0` is no filter Iceberg can decide on file statistics: the rows are rewritten (ReplaceData);
    # a partition's worth is dropped from the metadata alone (DeleteFromTableWithFilters).
    out["delete_rows"] = capture.run(lambda: spark.sql("DELETE FROM ice.db.t WHERE id + 0 = 12"),
                                     _node("ReplaceData"))
    out["delete_partition"] = capture.run(lambda: spark.sql("DELETE FROM ice.db.t WHERE k = 'a'"),
                                          _node("DeleteFromTableWithFilters"))
    out["ctas_mor"] = capture.run(lambda: spark.sql(
        f"CREATE TABLE ice.db.m USING iceberg TBLPROPERTIES ({', '.join(MOR)}) AS SELECT * FROM ice.db.s"),
        _node("CreateTableAsSelect"))
    out["update_mor"] = capture.run(lambda: spark.sql("UPDATE ice.db.m SET v = v * 10 WHERE id + 0 = 2"),
                                    _node("WriteDelta"))
    snapshots = [str(r[0]) for r in spark.sql(
        "SELECT snapshot_id FROM ice.db.t.snapshots ORDER BY committed_at").collect()]
    (folder / "snapshots.json").write_text(json.dumps(snapshots))
    read = _node("DataSourceV2ScanRelation")
    out["read"] = capture.run(lambda: collect(spark.table("ice.db.t")), read)
    out["snapshot_option"] = capture.run(
        lambda: collect(spark.read.option("snapshot-id", snapshots[0]).table("ice.db.t")), read)
    out["version_as_of"] = capture.run(
        lambda: collect(spark.sql(f"SELECT * FROM ice.db.t VERSION AS OF {snapshots[1]}")), read)
    # Reading and writing one table in one action: the input's version is the snapshot read.
    out["self_insert"] = capture.run(lambda: spark.sql("INSERT INTO ice.db.t SELECT * FROM ice.db.t WHERE id = 1"),
                                     _node("AppendData"))
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[str], pathlib.Path]:
    folder = tmp_path_factory.mktemp("iceberg")
    results = Scenarios.run(__name__, "iceberg", folder)["lake"]
    snapshots = json.loads((folder / "lake" / "snapshots.json").read_text())
    return results, snapshots, folder / "iceberg"


@pytest.fixture(scope="module")
def results(run: tuple[dict[str, Any], list[str], pathlib.Path]) -> dict[str, Any]:
    return run[0]


@pytest.fixture(scope="module")
def snapshots(run: tuple[dict[str, Any], list[str], pathlib.Path]) -> list[str]:
    return run[1]


@pytest.fixture(scope="module")
def warehouse(run: tuple[dict[str, Any], list[str], pathlib.Path]) -> pathlib.Path:
    return run[2]


def _only_output(result: Any) -> dict[str, Any]:
    assert result.complete, result.incomplete_reason
    (out,) = result.outputs
    assert out["format"] == "iceberg"
    return out  # type: ignore[no-any-return]


def _is_table(ds: dict[str, Any], warehouse: pathlib.Path, table: str = "t") -> None:
    """Named by its location (a folder of the Hadoop catalog's warehouse), with a TABLE symlink `db.<table>`
    in the warehouse's namespace, as openlineage-spark names a Hadoop catalog's table; the Spark catalog's name
    in ``properties["catalog"]`` (DataHub's platform instance of Iceberg tables)."""
    assert (ds["namespace"], ds["name"]) == ("file", str(warehouse / "db" / table)), ds
    (link,) = ds["symlinks"]
    assert link == {"namespace": f"file:{warehouse}", "name": f"db.{table}", "type": "TABLE"}
    assert ds["properties"]["catalog"] == "ice"


def test_write_to_create_names_the_table_and_its_first_snapshot(results: dict[str, Any], snapshots: list[str],
                                                                 warehouse: pathlib.Path) -> None:
    out = _only_output(results["create"])
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("CreateTableAsSelect", snapshots[0])
    assert [f["name"] for f in out["fields"]] == ["id", "k", "v"]


def test_write_to_append_and_overwrite_partitions(results: dict[str, Any], snapshots: list[str],
                                                 warehouse: pathlib.Path) -> None:
    out = _only_output(results["append"])
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("Append", snapshots[1])
    out = _only_output(results["overwrite_partitions"])
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("OverwritePartitionsDynamic", snapshots[2])


def test_write_to_create_or_replace_reads_the_source_snapshot(results: dict[str, Any], snapshots: list[str],
                                                            warehouse: pathlib.Path) -> None:
    result = results["create_or_replace"]
    out = _only_output(result)
    _is_table(out, warehouse, "s")
    assert out["operation"] == "CreateOrReplaceTableAsSelect" and out["properties"]["version"]
    (src,) = result.inputs
    _is_table(src, warehouse)
    assert src["properties"]["version"] == snapshots[2]
    assert inputs_of(result, "k") == {"k": {("DIRECT", "TRANSFORMATION")}}


def test_insert_into(results: dict[str, Any], snapshots: list[str], warehouse: pathlib.Path) -> None:
    result = results["insert"]
    out = _only_output(result)
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("Append", snapshots[3])
    (src,) = result.inputs
    _is_table(src, warehouse, "s")
    assert inputs_of(result, "id") == {"id": {("DIRECT", "TRANSFORMATION")}}
    assert inputs_of(result, "k") == {"k": {("DIRECT", "IDENTITY")}}


def test_merge_into_target_output_both_inputs_and_every_set_column(results: dict[str, Any], snapshots: list[str],
                                                                    warehouse: pathlib.Path) -> None:
    result = results["merge"]
    out = _only_output(result)
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("Merge", snapshots[4])
    names = {d["name"].rsplit("/", 1)[-1]: d for d in result.inputs}
    assert set(names) == {"t", "s"}
    assert names["t"]["properties"]["version"] == snapshots[3]  # the target as it was read
    assert {c["field"] for c in result.column_lineage} == {"id", "k", "v"}  # no metadata columns
    by_dataset: dict[str, set[tuple[str, str]]] = {}
    for c in result.column_lineage:
        for i in c["inputs"]:
            key = f"{c['field']}<-{i['name'].rsplit('/', 1)[-1]}.{i['field']}"
            by_dataset.setdefault(key, set()).update((t["type"], t["subtype"]) for t in i["transformations"])
    # SET t.v = s.v * 2 and INSERT ... s.v: a transformation and a copy of the source's v;
    # copy-on-write rewrites the target's other rows unchanged: a copy of t.v.
    assert {("DIRECT", "TRANSFORMATION"), ("DIRECT", "IDENTITY")} <= by_dataset["v<-s.v"]
    assert ("DIRECT", "IDENTITY") in by_dataset["v<-t.v"]
    assert ("DIRECT", "TRANSFORMATION") in by_dataset["k<-s.k"]  # lower(s.k)
    # The ON condition is INDIRECT/JOIN on both sides; the clause's condition (s.v > 0) INDIRECT/FILTER.
    assert ("INDIRECT", "JOIN") in by_dataset["k<-t.id"] and ("INDIRECT", "JOIN") in by_dataset["k<-s.id"]
    assert ("INDIRECT", "FILTER") in by_dataset["k<-s.v"]
    # The run-time file pruning on the target's `_file` is the optimizer's, not the user's filter.
    assert not any(k.endswith("._file") for k in by_dataset), sorted(by_dataset)


def test_update(results: dict[str, Any], snapshots: list[str], warehouse: pathlib.Path) -> None:
    result = results["update"]
    out = _only_output(result)
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("Update", snapshots[5])
    (src,) = result.inputs
    _is_table(src, warehouse)
    assert [f["name"] for f in src["fields"]] == ["id", "k", "v"]  # not the metadata columns it scanned
    assert inputs_of(result, "v")["v"] >= {("DIRECT", "TRANSFORMATION")}
    assert ("INDIRECT", "CONDITIONAL") in inputs_of(result, "v")["id"]


def test_delete_rewriting_rows_and_dropping_a_partition(results: dict[str, Any], snapshots: list[str],
                                                        warehouse: pathlib.Path) -> None:
    rows = results["delete_rows"]
    out = _only_output(rows)
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("Delete", snapshots[6])
    (src,) = rows.inputs  # the rows kept are read and rewritten
    _is_table(src, warehouse)
    assert rows.column_lineage == []  # no column gets a new value
    partition = results["delete_partition"]
    out = _only_output(partition)
    _is_table(out, warehouse)
    assert (out["operation"], out["properties"]["version"]) == ("Delete", snapshots[7])
    assert partition.inputs == []  # dropped from the metadata: nothing read


def test_sql_ctas_and_merge_on_read_update(results: dict[str, Any], warehouse: pathlib.Path) -> None:
    ctas = results["ctas_mor"]
    out = _only_output(ctas)
    _is_table(out, warehouse, "m")
    assert out["operation"] == "CreateTableAsSelect"
    assert ctas.sql and ctas.sql.startswith("CREATE TABLE ice.db.m")
    update = results["update_mor"]
    out = _only_output(update)
    _is_table(out, warehouse, "m")
    assert out["operation"] == "Update" and out["properties"]["version"] != ctas.outputs[0]["properties"]["version"]
    assert {c["field"] for c in update.column_lineage} == {"id", "k", "v"}
    assert inputs_of(update, "v")["v"] >= {("DIRECT", "TRANSFORMATION")}


def test_reads_name_the_snapshot_read(results: dict[str, Any], snapshots: list[str],
                                      warehouse: pathlib.Path) -> None:
    for name, version in (("read", snapshots[-1]), ("snapshot_option", snapshots[0]),
                          ("version_as_of", snapshots[1])):
        result = results[name]
        assert result.complete, result.incomplete_reason
        (src,) = result.inputs
        _is_table(src, warehouse)
        assert (name, src["format"], src["properties"].get("version")) == (name, "iceberg", version)
        assert [f["name"] for f in src["fields"]] == ["id", "k", "v"]


def test_reading_and_writing_one_table_in_one_action(results: dict[str, Any], snapshots: list[str]) -> None:
    result = results["self_insert"]
    out = _only_output(result)
    (src,) = result.inputs
    assert src["name"] == out["name"]
    assert src["properties"]["version"] == snapshots[-1]
    assert out["properties"]["version"] not in snapshots  # the new snapshot, after the list was taken
