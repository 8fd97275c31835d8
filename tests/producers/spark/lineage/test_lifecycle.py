"""Table lifecycle (issue 39.2): CREATE, ALTER, RENAME, TRUNCATE, DROP and overwrites name the table they change
as an output with ``lifecycle_change``, its columns after the change and, for a RENAME, the dataset it was.

The session catalog (parquet tables) runs in the shared session; Hive, Delta and Iceberg each in a child
session of their own (``isolated.py``), where the scenario below picks its statements by the session's kind.
The Hive session also writes directories through Hive SerDes (issue 39.3).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lineagewire.producers.spark.lineage import ActionLineage

from ..listening import query_listener
from .conftest import Capture, inputs_of
from .isolated import Scenarios, scenario

pytestmark = pytest.mark.spark


class FailureCapture(Capture):
    """A capture that also keeps the error of each failed action, by the identity of its result."""

    def __init__(self, spark: Any) -> None:
        super().__init__(spark)
        self.errors: dict[int, str] = {}

    def onFailure(self, func_name: str, qe: Any, exception: Any) -> None:  # noqa: N802 - Java interface
        with self._cond:
            start = len(self.results)
        self._add(func_name, qe)
        with self._cond:
            for _, result in self.results[start:]:
                self.errors[id(result)] = str(exception.getMessage())


@pytest.fixture
def lifecycle_capture(spark: Any, jvm_writer: None) -> Iterator[FailureCapture]:
    with query_listener(spark, FailureCapture(spark)) as listener:
        yield listener


@pytest.fixture
def tables(spark: Any) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    for name in created:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def _warehouse(spark: Any) -> str:
    return str(spark.conf.get("spark.sql.warehouse.dir")).removeprefix("file:").rstrip("/")


def _node(*names: str) -> Callable[[ActionLineage], bool]:
    return lambda r: r.plan_node in names


def _changed(result: ActionLineage, change: str) -> dict[str, Any]:
    assert result.complete, result.incomplete_reason
    (out,) = result.outputs
    assert out["lifecycle_change"] == change, out
    return out  # type: ignore[no-any-return]


def _columns(ds: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in ds["fields"]]


#: (statement after ``CREATE TABLE lc_t (id INT, name STRING) USING parquet`` and one row, its plan nodes
#: (Spark 4, Spark 3.5), the change, the columns after it)
SESSION_DDL = [
    ("ALTER TABLE lc_t ADD COLUMNS (x DOUBLE)", ("AlterTableAddColumnsCommand",), "ALTER",
     [("id", "int"), ("name", "string"), ("x", "double")]),
    ("ALTER TABLE lc_t CHANGE COLUMN name name STRING COMMENT 'who'", ("AlterTableChangeColumnCommand",), "ALTER",
     [("id", "int"), ("name", "string")]),
    ("ALTER TABLE lc_t SET TBLPROPERTIES ('team'='ops')", ("AlterTableSetPropertiesCommand",), "ALTER",
     [("id", "int"), ("name", "string")]),
    ("TRUNCATE TABLE lc_t", ("TruncateTableCommand",), "TRUNCATE", [("id", "int"), ("name", "string")]),
    ("INSERT OVERWRITE lc_t SELECT 2, 'b'", ("InsertIntoHadoopFsRelationCommand",), "OVERWRITE",
     [("id", "int"), ("name", "string")]),
    ("DROP TABLE lc_t", ("DropTable", "DropTableCommand"), "DROP", [("id", "int"), ("name", "string")]),
]


@pytest.mark.parametrize(("statement", "nodes", "change", "columns"), SESSION_DDL,
                         ids=["add_columns", "change_column", "set_properties", "truncate", "insert_overwrite",
                              "drop"])
def test_session_catalog_ddl_names_the_table_with_its_change_and_columns_after(
        spark: Any, lifecycle_capture: FailureCapture, tables: list[str], statement: str, nodes: tuple[str, ...],
        change: str, columns: list[tuple[str, str]]) -> None:
    tables.append("lc_t")
    created = lifecycle_capture.run(lambda: spark.sql("CREATE TABLE lc_t (id INT, name STRING) USING parquet"),
                                    _node("CreateDataSourceTableCommand"))
    assert _changed(created, "CREATE")["operation"] == "CreateTable"
    spark.sql("INSERT INTO lc_t VALUES (1, 'a')")
    result = lifecycle_capture.run(lambda: spark.sql(statement), _node(*nodes))
    out = _changed(result, change)
    assert (out["namespace"], out["name"]) == ("file", f"{_warehouse(spark)}/lc_t")
    assert out["symlinks"][0]["name"] == "default.lc_t" and out["format"] == "parquet"
    assert _columns(out) == columns
    assert out["previous_identifier"] is None
    if "COMMENT" in statement:
        assert out["fields"][1]["description"] == "who"


def test_set_location_names_the_new_folder(spark: Any, lifecycle_capture: FailureCapture, tables: list[str],
                                          tmp_path: pathlib.Path) -> None:
    tables.append("lc_loc")
    spark.sql("CREATE TABLE lc_loc (id INT) USING parquet")
    result = lifecycle_capture.run(lambda: spark.sql(f"ALTER TABLE lc_loc SET LOCATION '{tmp_path / 'moved'}'"),
                                   _node("AlterTableSetLocationCommand"))
    out = _changed(result, "ALTER")
    assert (out["name"], out["operation"]) == (str(tmp_path / "moved"), "AlterTableSetLocation")


def test_ctas_and_save_as_table_overwrite_are_create_and_overwrite(spark: Any, lifecycle_capture: FailureCapture,
                                                                   tables: list[str]) -> None:
    tables.append("lc_ctas")
    ctas = _node("CreateDataSourceTableAsSelectCommand")
    created = lifecycle_capture.run(lambda: spark.sql("CREATE TABLE lc_ctas USING parquet AS SELECT 1 AS id"), ctas)
    assert _changed(created, "CREATE")["operation"] == "CreateTableAsSelect"
    df = spark.createDataFrame([(2, "x")], "id int, tag string")
    replaced = lifecycle_capture.run(lambda: df.write.mode("overwrite").saveAsTable("lc_ctas"), ctas)
    out = _changed(replaced, "OVERWRITE")
    assert _columns(out) == [("id", "int"), ("tag", "string")]


def test_a_file_overwrite_is_an_overwrite_and_an_append_no_change(spark: Any, lifecycle_capture: FailureCapture,
                                                                  tmp_path: pathlib.Path) -> None:
    df = spark.createDataFrame([(1,)], "id int")
    path = str(tmp_path / "out")
    written = lifecycle_capture.run(lambda: df.write.mode("overwrite").parquet(path))
    assert _changed(written, "OVERWRITE")["name"] == path
    appended = lifecycle_capture.run(lambda: df.write.mode("append").parquet(path))
    assert appended.outputs[0]["lifecycle_change"] is None


def test_rename_names_the_new_table_and_the_dataset_it_was(spark: Any, lifecycle_capture: FailureCapture,
                                                           tables: list[str]) -> None:
    tables += ["lc_old", "lc_new"]
    spark.sql("CREATE TABLE lc_old (id INT, name STRING) USING parquet")
    result = lifecycle_capture.run(lambda: spark.sql("ALTER TABLE lc_old RENAME TO lc_new"),
                                   _node("AlterTableRenameCommand"))
    out = _changed(result, "RENAME")
    assert (out["namespace"], out["name"]) == ("file", f"{_warehouse(spark)}/lc_new")
    assert out["symlinks"][0]["name"] == "default.lc_new"
    assert out["previous_identifier"] == {"namespace": "file", "name": f"{_warehouse(spark)}/lc_old"}
    assert _columns(out) == [("id", "int"), ("name", "string")]


def test_a_rename_to_a_taken_name_and_a_drop_of_no_table_are_failures_without_a_change(
        spark: Any, lifecycle_capture: FailureCapture, tables: list[str]) -> None:
    tables += ["lc_a", "lc_b"]
    spark.sql("CREATE TABLE lc_a (id INT) USING parquet")
    spark.sql("CREATE TABLE lc_b (id INT) USING parquet")
    for statement, nodes in (("ALTER TABLE lc_a RENAME TO lc_b", ("AlterTableRenameCommand",)),
                             ("DROP TABLE lc_missing", ("DropTable", "DropTableCommand"))):
        def run(statement: str = statement) -> None:
            with pytest.raises(Exception, match=r"already exists|cannot be found"):
                spark.sql(statement)
        result = lifecycle_capture.run(run, _node(*nodes))
        assert "already exists" in lifecycle_capture.errors[id(result)] or \
            "cannot be found" in lifecycle_capture.errors[id(result)]
        assert [o for o in result.outputs if o.get("lifecycle_change")] == [], result.outputs
    # A DROP TABLE IF EXISTS of no table succeeds and drops nothing: no change either.
    nothing = lifecycle_capture.run(lambda: spark.sql("DROP TABLE IF EXISTS lc_missing"),
                                    _node("DropTable", "DropTableCommand"))
    assert nothing.outputs == []


# -- Hive, Delta, Iceberg: one child session each ------------------------------------------------------------


def _kind(spark: Any) -> str:
    extensions = str(spark.conf.get("spark.sql.extensions", ""))
    if "delta" in extensions:
        return "delta"
    if "iceberg" in extensions:
        return "iceberg"
    return "hive"


def _run(capture: Any, out: dict[str, Any], key: str, fn: Callable[[], Any], *nodes: str) -> None:
    out[key] = capture.run(fn, lambda r: r.plan_node in nodes)


def _failing(spark: Any, statement: str) -> Callable[[], None]:
    def run() -> None:
        try:
            spark.sql(statement)
        except Exception:  # noqa: BLE001 - the failure is the point: its action is checked
            return
        raise AssertionError(f"{statement} did not fail")
    return run


@scenario
def lifecycle(spark: Any, capture: Any, folder: pathlib.Path) -> dict[str, Any]:
    kind = _kind(spark)
    t = {"hive": "lc_h", "delta": "lc_d", "iceberg": "ice.db.lc_i"}[kind]
    using = {"hive": "STORED AS TEXTFILE", "delta": "USING delta", "iceberg": "USING iceberg"}[kind]
    out: dict[str, Any] = {}
    # The session's first catalog command starts the metastore (Derby) and loads the catalog's classes, which once
    # took over the 5 s budget on a loaded machine (load 12 on 2 cores): this checks lineage, not a cold start.
    spark.sql("SHOW TABLES").collect()
    _run(capture, out, "create", lambda: spark.sql(f"CREATE TABLE {t} (id INT, name STRING) {using}"),
         "CreateTableCommand", "CreateTable")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a')")
    if kind != "hive":
        _run(capture, out, "replace", lambda: spark.sql(f"CREATE OR REPLACE TABLE {t} (id INT, name STRING) {using}"),
             "ReplaceTable")
        spark.sql(f"INSERT INTO {t} VALUES (1, 'a')")
    alter = ("AlterTableAddColumnsCommand", "AddColumns")
    _run(capture, out, "add_columns", lambda: spark.sql(f"ALTER TABLE {t} ADD COLUMNS (x DOUBLE)"), *alter)
    _run(capture, out, "set_properties", lambda: spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('team'='ops')"),
         "AlterTableSetPropertiesCommand", "SetTableProperties")
    if kind == "delta":  # Delta renames and replaces columns once they are mapped by name
        spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.columnMapping.mode'='name', "
                  "'delta.minReaderVersion'='2', 'delta.minWriterVersion'='5')")
    if kind != "hive":  # Spark's V1 tables (Hive's) refuse these
        _run(capture, out, "rename_column", lambda: spark.sql(f"ALTER TABLE {t} RENAME COLUMN name TO nm"),
             "RenameColumn")
        _run(capture, out, "replace_columns", lambda: spark.sql(f"ALTER TABLE {t} REPLACE COLUMNS (id INT, nm STRING)"),
             "ReplaceColumns")
    column = "name" if kind == "hive" else "nm"
    _run(capture, out, "comment", lambda: spark.sql(f"ALTER TABLE {t} ALTER COLUMN {column} COMMENT 'who'"),
         "AlterTableChangeColumnCommand", "AlterColumns", "AlterColumn")
    if kind == "iceberg":
        _run(capture, out, "type", lambda: spark.sql(f"ALTER TABLE {t} ALTER COLUMN id TYPE BIGINT"),
             "AlterColumns", "AlterColumn")
    if kind == "hive":
        _run(capture, out, "truncate", lambda: spark.sql(f"TRUNCATE TABLE {t}"), "TruncateTableCommand")
    _run(capture, out, "overwrite", lambda: spark.sql(f"INSERT OVERWRITE {t} SELECT * FROM {t}"),
         "InsertIntoHiveTable", "OverwriteByExpression")
    if kind != "iceberg":  # Iceberg's Hadoop catalog cannot rename tables
        spark.sql(f"CREATE TABLE {t}_taken (id INT) {using}")
        _run(capture, out, "rename_taken", _failing(spark, f"ALTER TABLE {t} RENAME TO {t}_taken"),
             "AlterTableRenameCommand", "RenameTable")
        _run(capture, out, "rename", lambda: spark.sql(f"ALTER TABLE {t} RENAME TO {t}_new"),
             "AlterTableRenameCommand", "RenameTable")
        t = f"{t}_new"
    _run(capture, out, "drop", lambda: spark.sql(f"DROP TABLE {t}"), "DropTable", "DropTableCommand")
    _run(capture, out, "drop_missing", _failing(spark, f"DROP TABLE {t}"), "DropTable", "DropTableCommand")
    ctas = f"{t}_ctas"
    _run(capture, out, "ctas", lambda: spark.sql(f"CREATE TABLE {ctas} {using} AS SELECT 1 AS id"),
         "CreateHiveTableAsSelectCommand", "CreateTableAsSelect")
    if kind == "hive":
        spark.sql("CREATE TABLE lc_src (id INT, name STRING) STORED AS TEXTFILE")
        spark.sql("INSERT INTO lc_src VALUES (1, 'a')")
        for key, statement in (
                ("dir_stored_as", f"INSERT OVERWRITE DIRECTORY '{folder / 'dir1'}' STORED AS TEXTFILE "
                                  "SELECT id, upper(name) AS uname FROM lc_src"),
                # Spark writes ORC and Parquet directories with its own writer (convertMetastoreInsertDir)
                ("dir_stored_as_orc", f"INSERT OVERWRITE DIRECTORY '{folder / 'dir4'}' STORED AS ORC "
                                      "SELECT id, upper(name) AS uname FROM lc_src"),
                ("dir_local_row_format", f"INSERT OVERWRITE LOCAL DIRECTORY '{folder / 'dir2'}' "
                                         "ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' "
                                         "SELECT id, upper(name) AS uname FROM lc_src"),
                ("dir_using_hive", f"INSERT OVERWRITE DIRECTORY '{folder / 'dir3'}' USING hive "
                                   "OPTIONS (fileFormat 'parquet') SELECT id, upper(name) AS uname FROM lc_src")):
            _run(capture, out, key, lambda statement=statement: spark.sql(statement), "InsertIntoHiveDirCommand",
                 "InsertIntoDataSourceDirCommand")
    return out


def _scenarios(kind: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, ActionLineage], pathlib.Path]:
    folder = tmp_path_factory.mktemp(kind)
    return Scenarios.run(__name__, kind, folder)["lifecycle"], folder


@pytest.fixture(scope="module", params=["hive", "delta", "iceberg"])
def lake(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, ActionLineage], pathlib.Path]:
    results, folder = _scenarios(request.param, tmp_path_factory)
    return request.param, results, folder


def _table(kind: str, folder: pathlib.Path, ds: dict[str, Any], table: str) -> None:
    """Named by the table's folder with a TABLE symlink, as every other action names it."""
    assert ds["namespace"] == "file", ds
    (link,) = ds["symlinks"]
    assert link["type"] == "TABLE"
    if kind == "iceberg":
        assert ds["name"] == str(folder / "iceberg" / "db" / table)
        assert link["name"] == f"db.{table}"
    else:
        assert ds["name"] == str(folder / "warehouse" / table)
        assert link["name"] == f"default.{table}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_hive_delta_and_iceberg_ddl_names_the_table_with_its_change(
        lake: tuple[str, dict[str, ActionLineage], pathlib.Path]) -> None:
    kind, results, folder = lake
    t = {"hive": "lc_h", "delta": "lc_d", "iceberg": "lc_i"}[kind]
    fmt = {"hive": "textfile", "delta": "delta", "iceberg": "iceberg"}[kind]
    column = "name" if kind == "hive" else "nm"
    expected = [("create", "CREATE", [("id", "int"), ("name", "string")]),
                ("add_columns", "ALTER", [("id", "int"), ("name", "string"), ("x", "double")]),
                ("set_properties", "ALTER", [("id", "int"), ("name", "string"), ("x", "double")])]
    if kind != "hive":
        expected += [("replace", "OVERWRITE", [("id", "int"), ("name", "string")]),
                     ("rename_column", "ALTER", [("id", "int"), ("nm", "string"), ("x", "double")]),
                     ("replace_columns", "ALTER", [("id", "int"), ("nm", "string")])]
    after = [("id", "bigint" if kind == "iceberg" else "int"), (column, "string")]
    if kind == "hive":
        after.append(("x", "double"))
        expected.append(("truncate", "TRUNCATE", after))
    else:
        expected.append(("type", "ALTER", after) if kind == "iceberg" else ("comment", "ALTER", after))
    expected.append(("overwrite", "OVERWRITE", after))
    for key, change, columns in expected:
        out = _changed(results[key], change)
        _table(kind, folder, out, t)
        assert out["format"] == fmt, (key, out)
        assert _columns(out) == columns, (key, out["fields"])
    comment = _changed(results["comment"], "ALTER")
    assert [f["description"] for f in comment["fields"] if f["name"] == column] == ["who"]
    if kind != "iceberg":
        renamed = _changed(results["rename"], "RENAME")
        _table(kind, folder, renamed, f"{t}_new")
        assert renamed["previous_identifier"] == {"namespace": "file", "name": str(folder / "warehouse" / t)}
        t = f"{t}_new"
        taken = results["rename_taken"]
        assert [o for o in taken.outputs if o.get("lifecycle_change")] == []
    dropped = _changed(results["drop"], "DROP")
    _table(kind, folder, dropped, t)
    assert _columns(dropped) == after
    assert [o for o in results["drop_missing"].outputs if o.get("lifecycle_change")] == []
    ctas = [o for o in results["ctas"].outputs if o["lifecycle_change"] == "CREATE"]
    assert len(ctas) == 1 and ctas[0]["operation"] == "CreateTableAsSelect", results["ctas"].outputs
    _table(kind, folder, ctas[0], f"{t}_ctas")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_hive_directory_writes_name_the_directory_with_column_lineage(
        lake: tuple[str, dict[str, ActionLineage], pathlib.Path]) -> None:
    kind, results, folder = lake
    if kind != "hive":
        pytest.skip("Hive SerDe directories need the Hive session")
    for key, sub, fmt in (("dir_stored_as", "dir1", "textfile"), ("dir_local_row_format", "dir2", "textfile"),
                          ("dir_using_hive", "dir3", "parquet"), ("dir_stored_as_orc", "dir4", "orc")):
        result = results[key]
        assert result.complete, (key, result.incomplete_reason)
        assert result.plan_node == ("InsertIntoDataSourceDirCommand" if key.endswith("orc")
                                    else "InsertIntoHiveDirCommand"), key
        (out,) = result.outputs
        assert (out["namespace"], out["name"]) == ("file", str(folder / "lifecycle" / sub)), key
        assert (out["format"], out["operation"], out["lifecycle_change"]) == (fmt, "Overwrite", "OVERWRITE"), key
        assert _columns(out) == [("id", "int"), ("uname", "string")], key
        (src,) = result.inputs
        assert src["symlinks"][0]["name"] == "default.lc_src"
        assert inputs_of(result, "uname") == {"name": {("DIRECT", "TRANSFORMATION")}}, key
        assert inputs_of(result, "id") == {"id": {("DIRECT", "IDENTITY")}}, key
