"""The job registry: ``consume registry`` on the real broker, the CLI answers, REST, PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from lineagewire.cli import main_group
from lineagewire.consumers.audit.registry import RegistryHandler
from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import Codec, dataset
from tests.consumers.openlineage.samples import app_run
from tests.postgres import LocalPostgres, find_bin_dir

from .conftest import registry_api

TABLES = ["jobs", "runs", "specs", "transitions", "datasets", "dataset_aliases", "run_datasets", "dataset_edges",
          "column_edges", "applied_events"]


def history() -> list[dict]:
    """daily_orders three times (the third with a changed spec, one failed), then report reading its output."""
    runs = [app_run("daily_orders"), app_run("daily_orders", fail=True), app_run("daily_orders")]
    runs[2][0]["spec"]["conf"] = {"spark.sql.shuffle.partitions": "8"}
    for day, run in enumerate(runs):  # one run a day: the samples all start at the same instant, and runs of
        for e in run:                 # one instant are ordered by their random ids (the spec diff's direction)
            e["header"]["event_time"] += dt.timedelta(days=day)
    report = app_run("report", actions=1)
    src = dataset("file", "/data/daily_orders_out", format="parquet")
    dst = dataset("file", "/data/report", format="parquet")
    report[0]["lineage"]["sources"], report[0]["lineage"]["sinks"] = [src], [dst]
    report[2]["inputs"], report[2]["outputs"] = [src], [dst]
    report[2]["column_lineage"] = [{"namespace": "file", "name": "/data/report", "field": "total", "inputs": [
        {"namespace": "file", "name": "/data/daily_orders_out", "field": "amount", "transformations": []}]}]
    report[0]["lineage"]["column_lineage"] = []
    return [e for run in runs for e in run] + report


def counts(url: str) -> dict[str, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}
    finally:
        engine.dispose()


def cli(db: str, *args: str):  # noqa: ANN201
    r = CliRunner().invoke(main_group, [*args, "--db-url", db], catch_exceptions=False)
    return r


@pytest.mark.integration
def test_consume_registry_then_ask_it(settings, group_id, tmp_path) -> None:  # noqa: ANN001
    events = history()
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    h = RegistryHandler(db)
    ConsumerRuntime(settings, h, group_id=group_id).run(max_events=len(events))
    assert h.applied == len(events)
    before = counts(db)
    assert before["runs"] == 4 and before["specs"] == 3 and before["transitions"] == 8
    # Re-applying everything (another group from the start) is a no-op.
    h2 = RegistryHandler(db)
    ConsumerRuntime(settings, h2, group_id=group_id + "-again").run(max_events=len(events))
    assert h2.applied == 0 and counts(db) == before

    r = cli(db, "jobs", "list", "--format", "json")
    jobs = {j["job"]: j for j in json.loads(r.stdout)}
    assert jobs["spark/daily_orders"]["runs"] == 3 and jobs["spark/report"]["last_status"] == "FINISHED"
    r = cli(db, "jobs", "show", "daily_orders", "--format", "json")
    assert [x["status"] for x in json.loads(r.stdout)["runs"]].count("FAILED") == 1
    r = cli(db, "jobs", "history", "spark/daily_orders")
    assert r.exit_code == 0 and '+  "spark.sql.shuffle.partitions": "8"' in r.stdout
    failed = next(x for x in json.loads(cli(db, "jobs", "show", "daily_orders", "--format", "json").stdout)["runs"]
                  if x["status"] == "FAILED")
    r = cli(db, "runs", "show", failed["run_id"])
    assert "error: org.apache.spark.SparkException: Job aborted" in r.stdout
    assert "CREATED -> RUNNING" in r.stdout and "RUNNING -> FAILED" in r.stdout
    assert "file /data/orders" in r.stdout.split("outputs:")[0] and "file /data/daily_orders_out" in r.stdout

    # The raw input named four ways gives the same downstream: both jobs' outputs, two hops.
    answers = set()
    for args in (["/data/orders"], ["file:/data/orders"], ["sales.orders"], ["--namespace", "file", "/data/orders"]):
        r = cli(db, "lineage", "downstream", *args, "--format", "json")
        assert r.exit_code == 0, r.output
        answers.add(json.dumps(json.loads(r.stdout)["nodes"]))
    assert len(answers) == 1
    nodes = json.loads(answers.pop())
    assert [(n["name"], n["depth"]) for n in nodes] == [("/data/orders", 0), ("/data/daily_orders_out", 1),
                                                         ("/data/report", 2)]
    r = cli(db, "lineage", "downstream", "/data/orders")
    assert r.stdout.splitlines() == ["file /data/orders", "└── file /data/daily_orders_out  [spark/daily_orders]",
                                     "    └── file /data/report  [spark/report]"]
    r = cli(db, "lineage", "downstream", "/data/orders", "--depth", "1", "--format", "json")
    assert len(json.loads(r.stdout)["nodes"]) == 2
    r = cli(db, "lineage", "upstream", "/data/report", "--column", "total", "--format", "json")
    assert [(n["name"], n["field"]) for n in json.loads(r.stdout)["nodes"]] == [
        ("/data/report", "total"), ("/data/daily_orders_out", "amount"), ("/data/orders", "amount"),
        ("/data/orders", "id")]
    r = cli(db, "lineage", "downstream", "/data/orders", "--since", "2030-01-01", "--format", "json")
    assert len(json.loads(r.stdout)["nodes"]) == 1
    from lineagewire.cli import main

    with pytest.raises(SystemExit) as info:
        main(["lineage", "downstream", "/no/such", "--db-url", db])
    assert info.value.code == 2


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[str, RegistryStore]]:  # noqa: ANN001
    store = RegistryStore(f"sqlite:///{tmp_path / 'api.db'}")
    try:
        with registry_api(store) as url:
            yield url, store
    finally:
        store.close()


def test_rest_reads_are_open_and_writes_need_the_token_first(server) -> None:  # noqa: ANN001
    url, store = server
    codec = Codec()
    events = history()
    for e in events[:-5]:
        store.apply(e)
    body = codec.encode(events[-5])
    assert httpx.post(f"{url}/events", content=b"not json, not avro").status_code == 401
    assert httpx.post(f"{url}/events", content=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    auth = {"Authorization": "Bearer s3cret-token-0123456789"}
    r = httpx.post(f"{url}/events", content=body, headers=auth)
    assert r.status_code == 200 and r.json()["applied"] is True
    assert httpx.post(f"{url}/events", content=body, headers=auth).json()["applied"] is False
    r = httpx.post(f"{url}/events", content=b"garbage", headers=auth)
    assert r.status_code == 422 and "not a lineagewire event" in r.json()["detail"]
    assert httpx.post(f"{url}/events", content=b"x" * (2 << 20), headers=auth).status_code == 413
    for e in events[-4:]:
        httpx.post(f"{url}/events", content=codec.encode(e), headers=auth).raise_for_status()
    assert {j["job"] for j in httpx.get(f"{url}/jobs").json()} == {"spark/daily_orders", "spark/report"}
    r = httpx.get(f"{url}/lineage/downstream", params={"dataset": "file:/data/orders"})
    assert [n["name"] for n in r.json()["nodes"]] == ["/data/orders", "/data/daily_orders_out", "/data/report"]
    assert httpx.get(f"{url}/lineage/downstream", params={"dataset": "/nope"}).status_code == 404
    assert httpx.get(f"{url}/openapi.json").status_code == 200


@pytest.mark.slow
@pytest.mark.postgres
def test_the_registry_on_postgresql() -> None:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); the SQLite tests still ran")
    with LocalPostgres(bin_dir) as pg:
        url = pg.new_database()
        store = RegistryStore(url)
        try:
            events = history()
            assert all(store.apply(e) for e in events)
            assert not any(store.apply(e) for e in events)
            with store.engine.connect() as conn:
                from lineagewire.consumers.audit.registry_query import lineage

                nodes = lineage(conn, "sales.orders", direction="downstream")["nodes"]
                # --since compares with the stored UTC time on PostgreSQL too (an aware time there)
                later = lineage(conn, "sales.orders", direction="downstream",
                                since=dt.datetime(2030, 1, 1, tzinfo=dt.UTC))["nodes"]
                earlier = lineage(conn, "sales.orders", direction="downstream",
                                  since=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))["nodes"]
            assert [n["name"] for n in nodes] == ["/data/orders", "/data/daily_orders_out", "/data/report"]
            assert [n["name"] for n in later] == ["/data/orders"] and earlier == nodes
        finally:
            store.close()
        assert counts(url)["runs"] == 4


def test_lineage_stops_at_the_default_depth_and_says_more_lies_beyond(tmp_path) -> None:  # noqa: ANN001
    """A chain of 8 datasets: 3 hops by default (``more``), everything with --depth all."""
    import datetime as dt

    from lineagewire.consumers.audit import registry_model as m
    from lineagewire.consumers.audit.registry_query import DEFAULT_DEPTH

    db = f"sqlite:///{tmp_path / 'chain.db'}"
    store = RegistryStore(db)
    now = dt.datetime.now(dt.UTC)
    with store.engine.begin() as conn:
        conn.execute(m.jobs.insert(), [{"id": 1, "namespace": "spark", "name": "copy", "first_seen": now,
                                        "last_seen": now}])
        conn.execute(m.datasets.insert(), [{"id": i, "namespace": "file", "name": f"/data/d{i}", "first_seen": now,
                                            "last_seen": now} for i in range(8)])
        conn.execute(m.dataset_edges.insert(), [{"source_id": i, "sink_id": i + 1, "job_id": 1, "last_run_id": "r",
                                                 "first_seen": now, "last_seen": now} for i in range(7)])
    store.close()
    assert DEFAULT_DEPTH == 3
    r = cli(db, "lineage", "downstream", "/data/d0", "--format", "json")
    out = json.loads(r.stdout)
    assert [n["name"] for n in out["nodes"]] == [f"/data/d{i}" for i in range(4)] and out["more"] is True
    r = cli(db, "lineage", "downstream", "/data/d0")
    assert r.stdout.splitlines()[-1] == "(stopped at depth 3; more lies beyond: --depth N or --depth all)"
    r = cli(db, "lineage", "downstream", "/data/d0", "--depth", "all", "--format", "json")
    out = json.loads(r.stdout)
    assert [n["depth"] for n in out["nodes"]] == list(range(8)) and out["more"] is False
    assert [(e["source"], e["sink"], e["jobs"]) for e in out["edges"]][-1] == ("file /data/d6", "file /data/d7",
                                                                             ["spark/copy"])
    r = cli(db, "lineage", "upstream", "/data/d7", "--depth", "7", "--format", "json")
    out = json.loads(r.stdout)
    assert len(out["nodes"]) == 8 and out["more"] is False
    r = CliRunner().invoke(main_group, ["lineage", "downstream", "/data/d0", "--depth", "0", "--db-url", db])
    assert r.exit_code == 2 and "expected a number of hops (1 or more) or all" in r.output


READ_COMMANDS = [["jobs", "list"], ["jobs", "show", "daily_orders"], ["jobs", "history", "daily_orders"],
                 ["runs", "show", "r1"], ["lineage", "downstream", "/data/orders"],
                 ["lineage", "upstream", "/data/report", "--column", "total"]]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_read_commands_neither_create_the_database_nor_its_tables(tmp_path, command) -> None:  # noqa: ANN001
    from tests.consumers.audit.test_verify_query import cli_result

    missing = tmp_path / "typo.db"
    r = cli_result(*command, "--db-url", f"sqlite:///{missing}")
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        f"error: the registry database sqlite:///{missing} does not exist; expected one that lineagewire consume "
        "registry has written (check --db-url)"], r.output
    assert list(tmp_path.iterdir()) == []

    empty = tmp_path / "empty.db"
    empty.touch()
    r = cli_result(*command, "--db-url", f"sqlite:///{empty}")
    assert r.exit_code == 2 and "has no jobs table" in r.stderr and len(r.stderr.splitlines()) == 1, r.output
    assert empty.stat().st_size == 0


@pytest.mark.slow
@pytest.mark.postgres
def test_read_commands_on_postgresql_create_nothing() -> None:
    from tests.consumers.audit.test_verify_query import cli_result

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); the SQLite tests still ran")
    with LocalPostgres(bin_dir) as pg:
        url = pg.new_database()
        r = cli_result("jobs", "list", "--db-url", url.rsplit("/", 1)[0] + "/nosuchdb")
        assert r.exit_code == 2 and "nosuchdb does not exist" in r.stderr and len(r.stderr.splitlines()) == 1, \
            r.output
        r = cli_result("lineage", "downstream", "/data/orders", "--db-url", url)
        assert r.exit_code == 2 and "has no jobs table" in r.stderr, r.output
        engine = sa.create_engine(url)
        try:
            assert sa.inspect(engine).get_table_names() == []
        finally:
            engine.dispose()
        store = RegistryStore(url)
        try:
            assert all(store.apply(e) for e in history())
        finally:
            store.close()
        r = cli_result("jobs", "list", "--db-url", url, "--format", "json")
        assert r.exit_code == 0 and {j["job"] for j in json.loads(r.stdout)} == {"spark/daily_orders", "spark/report"}


def test_an_unknown_column_is_named(tmp_path) -> None:  # noqa: ANN001
    from tests.consumers.audit.test_verify_query import cli_result

    db = f"sqlite:///{tmp_path / 'registry.db'}"
    store = RegistryStore(db)
    try:
        for e in history():
            store.apply(e)
    finally:
        store.close()
    r = cli_result("lineage", "upstream", "/data/report", "--column", "nope", "--db-url", db)
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        "error: column 'nope' of dataset file /data/report is not in the registry's column lineage; expected one "
        "of: total"], r.output
    r = cli_result("lineage", "downstream", "/data/orders", "--column", "nope", "--db-url", db, "--format", "json")
    assert r.exit_code == 2 and "column 'nope' of dataset file /data/orders" in r.stderr and r.stdout == "", r.output
    r = cli_result("lineage", "upstream", "/data/report", "--column", "total", "--db-url", db)
    assert r.exit_code == 0 and "file /data/daily_orders_out amount" in r.stdout, r.output


def test_jobs_list_is_one_query_with_each_jobs_count_and_newest_run(tmp_path) -> None:  # noqa: ANN001
    from lineagewire.consumers.audit.registry_query import list_jobs

    store = RegistryStore(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        for e in history():
            store.apply(e)
        for i in range(30):
            for e in app_run(f"job{i:02d}", actions=0):
                store.apply(e)
        statements: list[str] = []
        sa.event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        with store.engine.connect() as conn:
            jobs = list_jobs(conn)
            runs = conn.execute(sa.text("SELECT run_id, status FROM runs r JOIN jobs j ON j.id = r.job_id "
                                        "WHERE j.name = 'daily_orders' ORDER BY created_at DESC, run_id")).fetchall()
        assert len(statements) == 2  # list_jobs's one, and the check above
    finally:
        store.close()
    assert len(jobs) == 32 and [j["job"] for j in jobs] == sorted(j["job"] for j in jobs)
    daily = next(j for j in jobs if j["job"] == "spark/daily_orders")
    assert daily["runs"] == 3 and (daily["last_run"], daily["last_status"]) == tuple(runs[0])
    assert all(j["runs"] == 1 and j["last_status"] for j in jobs if j["job"].startswith("spark/job"))


@pytest.mark.integration
def test_the_spark_runs_of_an_airflow_run_are_listed_by_its_task_or_dag_run(settings, group_id, tmp_path,  # noqa: ANN001
                                                                           capsys) -> None:
    """Airflow's task run is the parent of the Spark runs it submitted, its DAG run their root (contract v2)."""
    task = {"job_namespace": "airflow", "job_name": "orders_dag.load", "run_id": "0193a1c2-task-run"}
    dag = {"job_namespace": "airflow", "job_name": "orders_dag", "run_id": "0193a1c2-dag-run"}
    events = app_run("load_orders", parent=task) + app_run("load_customers", parent=task) + app_run("unrelated")
    for e in events[: len(events) * 2 // 3]:
        e["header"]["root_parent_run"] = dag
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    ConsumerRuntime(settings, RegistryHandler(db), group_id=group_id).run(max_events=len(events))

    for parent in (task["run_id"], dag["run_id"]):
        r = cli(db, "runs", "children", parent, "--format", "json")
        assert r.exit_code == 0, r.output
        runs = json.loads(r.stdout)["runs"]
        assert sorted(x["job"] for x in runs) == ["spark/load_customers", "spark/load_orders"]
        assert {(x["parent_job"], x["root_parent_job"]) for x in runs} == {("airflow/orders_dag.load",
                                                                            "airflow/orders_dag")}
    r = cli(db, "runs", "children", task["run_id"])
    assert r.stdout.splitlines()[0].split()[:3] == ["job", "run_id", "status"] and len(r.stdout.splitlines()) == 3
    from lineagewire.cli import main

    with pytest.raises(SystemExit) as info:
        main(["runs", "children", "no-such-run", "--db-url", db])
    assert info.value.code == 2
    assert "no run in the registry has 'no-such-run' as its parent" in capsys.readouterr().err
