"""The refresh statement and the completed-id store (no Spark needed)."""

from __future__ import annotations

import pathlib

from lineagewire.producers.refresh_runner import CompletedStore, insert_statement
from lineagewire.producers.refresh_runner.refresh import quote_ident, sql_string


def test_insert_overwrite_with_static_partitions_filters_and_options() -> None:
    sql = insert_statement("mart.daily", "SELECT a, b, dt FROM src", ["a", "b"], {"dt": "2026-01-31", "run": "x"},
                           ["a", "b", "dt"], {"compression": "zstd"})
    assert sql.splitlines()[0] == ("INSERT OVERWRITE TABLE `mart`.`daily` WITH ('compression' = 'zstd') "
                                   "PARTITION (`dt` = '2026-01-31', `run` = 'x')")
    # only partition columns the query produces are filtered; 'run' is purely static
    assert sql.splitlines()[1] == ("SELECT `a`, `b` FROM (SELECT a, b, dt FROM src) AS lw_refresh_source "
                                   "WHERE CAST(`dt` AS STRING) = '2026-01-31'")


def test_unpartitioned_refresh_overwrites_the_table() -> None:
    sql = insert_statement("t", "SELECT 1 AS x", ["x"], {}, ["x"])
    assert sql == "INSERT OVERWRITE TABLE `t`\nSELECT `x` FROM (SELECT 1 AS x) AS lw_refresh_source"


def test_quoting() -> None:
    assert quote_ident("db.we`ird") == "`db`.`we``ird`"
    assert sql_string("it's") == "'it\\'s'"


def test_completed_store_survives_reopen(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "state.db"
    store = CompletedStore(path)
    assert not store.completed("c1")
    store.mark("c1", 2)
    store.close()
    again = CompletedStore(path)
    assert again.completed("c1") and not again.completed("c2") and again.count() == 1
    again.close()
