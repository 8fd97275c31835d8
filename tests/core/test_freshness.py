"""Freshness promises (lineagewire.freshness, issue 41.3): a dataset named by path, URI or table name, matched
against the emitter's dataset names and symlinks; staleness with and without business hours; and errors that
name the file, the entry, the field, the value and what was expected."""

from __future__ import annotations

import datetime as dt

import pytest

from lineagewire.exceptions import ConfigError
from lineagewire.freshness import Promise, dataset_id, load_promises

T0 = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)  # a Monday


@pytest.mark.parametrize(("uri", "expected"), [
    ("file:/data/raw/events/", ("file", "/data/raw/events")),
    ("/data/raw/events", ("file", "/data/raw/events")),
    ("s3a://lake/raw/events", ("s3://lake", "raw/events")),
    ("gs://b/k", ("gs://b", "k")),
    ("hdfs://nn:8020/warehouse/t", ("hdfs://nn:8020", "/warehouse/t")),
    ("abfss://c@acct.dfs.core.windows.net/p/q", ("abfss://c@acct.dfs.core.windows.net", "p/q")),
])
def test_uris_are_named_as_the_emitter_names_datasets(uri: str, expected: tuple[str, str]) -> None:
    assert dataset_id(uri) == expected


def test_a_promise_finds_its_dataset_by_uri_path_or_table_name() -> None:
    promises = load_promises({"datasets": [
        {"dataset": "s3a://lake/raw/events/", "freshness": "30m"},
        {"dataset": "/data/orders", "freshness": "1h"},
        {"dataset": "sales.orders", "freshness": "2h"},
        {"dataset": "clicks", "freshness": "1d"},
    ]})
    by = {p.dataset: p for p in promises}
    assert promises.promise_for("s3://lake", "raw/events") is by["s3a://lake/raw/events/"]
    assert promises.promise_for("s3://other", "raw/events") is None
    assert promises.promise_for("hdfs://nn:8020", "/data/orders") is by["/data/orders"]  # a path in any namespace
    # a table by its symlink (catalog names are case-insensitive, a missing catalog or database matches)
    assert promises.promise_for("file", "/wh/sales.db/orders", ["spark_catalog.Sales.Orders"]) is by["sales.orders"]
    assert promises.promise_for("file", "/wh/default.db/clicks", ["default.clicks"]) is by["clicks"]
    assert promises.promise_for("postgres://db:5432", "sales.orders") is by["sales.orders"]  # JDBC: by its name
    assert promises.promise_for("file", "/wh/x.db/myclicks", ["x.myclicks"]) is None  # no partial names
    assert len(promises) == 4 and by["clicks"].freshness == 86400.0


def test_stale_past_the_freshness_only_inside_business_hours_and_a_never_written_dataset_from_when_watched() -> None:
    p = Promise(dataset="t", freshness="1h")
    assert not p.stale(T0, T0 + dt.timedelta(minutes=60))
    assert p.stale(T0, T0 + dt.timedelta(minutes=61))
    assert not p.stale(None, T0 + dt.timedelta(days=9))  # never written and not watched: nothing to count from
    assert p.stale(None, T0 + dt.timedelta(minutes=61), since=T0)
    office = Promise(dataset="t", freshness="1h", business_hours="* 9-17 * * MON-FRI", time_zone="America/New_York")
    assert not office.stale(T0, T0 + dt.timedelta(hours=1.5))  # 08:30 in New York: due, but before hours
    assert office.stale(T0, T0 + dt.timedelta(hours=2))  # 09:00
    assert not office.stale(T0, T0 + dt.timedelta(days=5, hours=2))  # Saturday
    assert office.describe() == "t written at least every 1h during * 9-17 * * MON-FRI (America/New_York)"


@pytest.mark.parametrize(("entry", "message"), [
    ({"dataset": "t", "freshness": "soon"}, "datasets[0] (t): freshness='soon': expected a duration such as 30s"),
    ({"dataset": "t", "freshness": "0s"}, "datasets[0] (t): freshness='0s': expected a duration above 0"),
    ({"dataset": "t"}, "datasets[0] (t): freshness: missing; expected e.g. 'freshness: 1h'"),
    ({"freshness": "1h"}, "datasets[0]: dataset: missing; expected e.g. 'dataset: sales.orders'"),
    ({"dataset": "t", "freshness": "1h", "business_hours": "9 to 5"},
     "datasets[0] (t): business_hours='9 to 5': expected a cron expression"),
    ({"dataset": "t", "freshness": "1h", "time_zone": "Mars/Base"},
     "datasets[0] (t): time_zone='Mars/Base': expected an IANA time zone"),
    ({"dataset": "t", "freshness": "1h", "fresh": "2h"},
     "datasets[0] (t): unknown field 'fresh'; expected one of dataset, freshness, business_hours"),
    ("t", "datasets[0]: 't'; expected a mapping with 'dataset' and 'freshness'"),
])
def test_a_bad_entry_names_the_file_the_entry_the_field_the_value_and_what_was_expected(
        tmp_path, entry: object, message: str) -> None:  # noqa: ANN001
    import yaml

    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump({"tables": [], "datasets": [entry]}))
    with pytest.raises(ConfigError) as err:
        load_promises(path)
    assert str(err.value).startswith(f"file {str(path)!r}: {message}"), str(err.value)


def test_a_file_without_a_datasets_section_has_no_promises(tmp_path) -> None:  # noqa: ANN001
    bare = tmp_path / "tables.yaml"
    bare.write_text("- identifier: mart.t\n  query: SELECT 1\n  cron: '0 0 * * * *'\n")  # the scheduler's bare list
    assert len(load_promises(bare)) == 0
    assert len(load_promises(None)) == 0
    with pytest.raises(ConfigError, match="datasets=dict; expected a list"):
        load_promises({"datasets": {"dataset": "t"}})
    with pytest.raises(ConfigError, match="cannot read it"):
        load_promises(tmp_path / "missing.yaml")
