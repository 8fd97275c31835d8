"""Materialized-table declarations: loading, validation messages, partition formatters."""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest

from lineagewire.producers.scheduler import (
    TableCatalog,
    TableDeclarationError,
    UnknownTableError,
    format_partition,
    load_tables,
    parse_tables,
)
from lineagewire.producers.scheduler.tables import MaterializedTable, parse_freshness, strftime_pattern

GOOD = """
tables:
  - identifier: mart.daily_orders
    query: SELECT id, amount, dt FROM raw.orders;
    partition_fields: {dt: yyyy-MM-dd, hr: HH}
    cron: "0 0 * * * *"
    time_zone: Asia/Tokyo
    owner: data@example.com
    misfire_policy: catch_up
    catchup_cap: 5
    dynamic_options: {compression: zstd}
    execution_config: {spark.sql.shuffle.partitions: 4}
  - identifier: mart.fresh
    query: SELECT 1 AS x
    freshness: 15min
"""


def test_load_good_file(tmp_path: pathlib.Path) -> None:
    f = tmp_path / "tables.yaml"
    f.write_text(GOOD)
    a, b = load_tables(f)
    assert a.identifier == "mart.daily_orders" and a.query == "SELECT id, amount, dt FROM raw.orders"
    assert a.execution_config == {"spark.sql.shuffle.partitions": "4"}
    assert a.job_name == "refresh mart.daily_orders"
    # 2026-01-01 20:30Z is 05:30 on Jan 2 in Tokyo
    assert a.static_partitions(dt.datetime(2026, 1, 1, 20, 30, tzinfo=dt.UTC)) == {"dt": "2026-01-02", "hr": "05"}
    assert b.cron == "0 */15 * * * *" and b.time_zone == "UTC"


@pytest.mark.parametrize(("doc", "words"), [
    ({"tables": [{"query": "select 1"}]}, ["identifier=None"]),
    ({"tables": [{"identifier": "a b", "query": "select 1"}]}, ["identifier='a b'"]),
    ({"tables": [{"identifier": "db.t"}]}, ["(db.t)", "query=None"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1", "cron": "99 * * * *"}]}, ["(db.t)", "cron='99 * * * *'"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1", "time_zone": "Nowhere/X"}]}, ["Nowhere/X"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1", "partition_fields": {"dt": "yyyy-QQ"}}]},
     ["partition_fields.dt.date-formatter='yyyy-QQ'", "'Q'"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1", "misfire_policy": "later"}]}, ["misfire_policy='later'"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1", "cron": "0 * * * *", "freshness": "1h"}]},
     ["both cron"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1", "freshness": "7min"}]}, ["freshness", "divide 60"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1", "colour": "red"}]}, ["unknown field(s) colour"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1"}, {"identifier": "db.t", "query": "select 2"}]},
     ["declared twice"]),
    ({"tables": [{"identifier": "db.t", "query": "select 1; drop table x"}]}, ["more than one statement"]),
])
def test_errors_name_table_field_and_value(doc: dict, words: list[str]) -> None:
    with pytest.raises(TableDeclarationError) as info:
        parse_tables(doc, "t.yaml")
    for w in words:
        assert w in str(info.value)


KNOWN = ("catchup_cap, cron, debounce, description, dynamic_options, execution_config, format, freshness, hold_on, "
         "identifier, max_staleness, min_interval, misfire_policy, namespace, owner, partition_fields, query, "
         "time_zone, trigger")


@pytest.mark.parametrize(("raw", "message"), [
    (["db.t"], "t.yaml: tables[0]: expected a mapping with identifier and query, got ['db.t']"),
    ({"identifier": "a b", "zz": 1}, "t.yaml: tables[0]: identifier='a b'; expected [catalog.]db.table made of "
                                     "letters, digits and _"),
    ({"identifier": "db.t", "query": None, "zz": 1, "aa": 2},
     f"t.yaml: tables[0] (db.t): unknown field(s) aa, zz; expected some of {KNOWN}"),
    ({"identifier": "db.t", "query": "select 1", 1: "x"},  # the old code crashed (TypeError) on a key like this
     f"t.yaml: tables[0] (db.t): unknown field(s) 1; expected some of {KNOWN}"),
    ({"identifier": "db.t", "query": "select 1", "cron": "0 * * * *", "freshness": "7min"},
     "t.yaml: tables[0] (db.t): both cron='0 * * * *' and freshness='7min'; expected one of them"),
    ({"identifier": "db.t", "query": "select 1", "catchup_cap": True, "misfire_policy": "x"},
     "t.yaml: tables[0] (db.t): misfire_policy='x'; expected one of skip, fire_once, catch_up"),
    ({"identifier": "db.t", "query": "select 1", "catchup_cap": True},
     "t.yaml: tables[0] (db.t): catchup_cap=True; expected an integer from 1 to 10000"),
    ({"identifier": "db.t", "query": "select 1", "owner": "o" * 201},
     "t.yaml: tables[0] (db.t): owner has 201 characters; expected at most 200"),
    ({"identifier": "db.t", "query": "select 1", "execution_config": ["x"]},
     "t.yaml: tables[0] (db.t): execution_config=['x']; expected a mapping of strings"),
])
def test_declaration_messages_word_for_word(raw: object, message: str) -> None:
    """The model reports the first problem in the order, and with the words, the loader always had."""
    with pytest.raises(TableDeclarationError) as info:
        parse_tables({"tables": [raw]}, "t.yaml")
    assert str(info.value) == message


def test_declaration_defaults_and_normalised_values() -> None:
    (t,) = parse_tables({"tables": [{"identifier": "db.t", "query": " select 1 ;", "freshness": "1h",
                                     "misfire_policy": "SKIP", "owner": 7, "dynamic_options": {"a": 1}}]})
    assert t == MaterializedTable(identifier="db.t", query="select 1", cron="0 0 */1 * * *", misfire_policy="skip",
                                  owner="7", dynamic_options={"a": "1"}, freshness="1h")


def test_unreadable_and_bad_yaml(tmp_path: pathlib.Path) -> None:
    with pytest.raises(TableDeclarationError, match="cannot be read"):
        load_tables(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: [\n")
    with pytest.raises(TableDeclarationError, match="not valid YAML"):
        load_tables(bad)


def test_java_patterns_translate() -> None:
    t = dt.datetime(2026, 3, 5, 7, 8, 9, tzinfo=dt.UTC)
    assert strftime_pattern("yyyy-MM-dd") == "%Y-%m-%d"
    assert format_partition("yyyyMMdd'T'HHmmss", t) == "20260305T070809"
    assert format_partition("M/d/yy", t) == "3/5/26"
    assert format_partition("%Y/%j", t) == "2026/064"
    assert format_partition("yyyy-MM-dd", t, "America/Los_Angeles") == "2026-03-04"


def test_freshness_to_cron() -> None:
    assert parse_freshness("30s") == "*/30 * * * * *"
    assert parse_freshness("1 d") == "0 0 0 * * *"
    with pytest.raises(ValueError, match="freshness"):
        parse_freshness("soon")


def test_catalog_unknown_table_lists_known() -> None:
    cat = TableCatalog(parse_tables({"tables": [{"identifier": "db.a", "query": "select 1"}]}))
    with pytest.raises(UnknownTableError, match=r"'db\.b' is not declared; known tables: db\.a"):
        cat.get("db.b")


def test_validate_command(tmp_path: pathlib.Path) -> None:
    from click.testing import CliRunner

    from lineagewire.cli import main_group

    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    result = CliRunner().invoke(main_group, ["scheduler", "validate", str(good)])
    assert result.exit_code == 0 and "mart.daily_orders: cron=0 0 * * * * tz=Asia/Tokyo" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  - identifier: db.t\n    query: select 1\n    cron: every day\n")
    result = CliRunner().invoke(main_group, ["scheduler", "validate", str(bad)])
    assert result.exit_code != 0 and "cron='every day'" in str(result.exception)
