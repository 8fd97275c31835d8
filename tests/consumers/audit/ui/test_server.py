"""The UI's server over real HTTP on 127.0.0.1: auth, read-only, the command's checks, jobs table filters,
dataset lookup by name, the refresh health read from a scheduler's REST API, and the OpenLineage page leaving
the process's GC and interpreter settings alone."""

from __future__ import annotations

import datetime as dt
import gc
import pathlib
import re
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lineagewire.consumers.audit.registry_store import RegistryStore
from lineagewire.schemas import Codec
from tests.consumers.openlineage.samples import app_run, refresh_run

from .conftest import UiServer, scheduler_stand_in

TOKEN = "ui-token-0123456789abcdef"


def filled(tmp_path: pathlib.Path, events: list[dict[str, Any]], name: str = "reg.db") -> str:
    db = f"sqlite:///{tmp_path / name}"
    store = RegistryStore(db)
    for e in events:
        store.apply(e)
    store.close()
    return db


def names(html: str) -> list[str]:
    return re.findall(r'<a class="name" href="/ui/jobs/\d+">([^<]*)</a>', html)


def test_the_token_guards_every_route_and_nothing_can_be_written(tmp_path: pathlib.Path) -> None:
    events = app_run("guarded")
    with UiServer(filled(tmp_path, events), token=TOKEN) as srv:
        bare = httpx.get(srv.url + "/ui/jobs")
        assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Basic")
        assert httpx.get(srv.url + "/jobs").status_code == 401  # the registry's REST reads too
        wrong = httpx.get(srv.url + "/ui/jobs", headers={"Authorization": "Bearer wrong-token-0123456"})
        assert wrong.status_code == 401
        ok = httpx.get(srv.url + "/ui/jobs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and names(ok.text) == ["guarded"]
        assert httpx.get(srv.url + "/ui/jobs", auth=("anyone", TOKEN)).status_code == 200
        # read-only: the registry's one changing route refuses even the UI's token
        post = httpx.post(srv.url + "/events", content=Codec().encode(app_run("other")[0]),
                          headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/octet-stream"})
        assert post.status_code == 401
        assert httpx.get(srv.url + "/jobs", auth=("anyone", TOKEN)).json()[0]["job"] == "spark/guarded"


def test_the_command_binds_elsewhere_only_with_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    from lineagewire.cli import main

    for args, expected in ((["--host", "0.0.0.0"], "is not a loopback address; expected --token"),
                           (["--token", "short"], "--token is 5 characters; expected at least 16")):
        with pytest.raises(SystemExit) as info:
            main(["ui", "--db-url", "sqlite://", *args])
        assert info.value.code == 2
        assert expected in capsys.readouterr().err


def test_the_command_reads_only_an_existing_registry_of_its_schema(tmp_path: pathlib.Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The UI never creates or migrates a database: a missing one, or one of an older schema, is one line."""
    import sqlalchemy as sa

    from lineagewire.cli import main
    from lineagewire.consumers.audit.registry_model import STORE
    from lineagewire.db import upgrade

    missing = tmp_path / "missing.db"
    with pytest.raises(SystemExit) as info:
        main(["ui", "--db-url", f"sqlite:///{missing}"])
    assert info.value.code == 2 and "does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    old = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{old}")
    upgrade(engine, STORE, STORE.baseline)
    engine.dispose()
    with pytest.raises(SystemExit) as info:
        main(["ui", "--db-url", f"sqlite:///{old}"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "has schema revision 0001" in err and "lineagewire db upgrade" in err


def test_jobs_are_filtered_sorted_and_paged(tmp_path: pathlib.Path) -> None:
    events = []
    for i in range(55):
        run = app_run(f"job{i:02d}", namespace="ns_a" if i % 2 else "ns_b", fail=i % 11 == 0)
        run[0]["spec"]["tags"] = {"team": "red" if i % 3 else "blue"}
        for e in run:
            e["header"]["event_time"] += dt.timedelta(minutes=i)
        if i % 11 != 0:
            run[-1]["duration_ms"] = 1000 * i
        events += run
    with UiServer(filled(tmp_path, events)) as srv, httpx.Client(base_url=srv.url) as client:
        first = client.get("/ui/jobs").text
        assert names(first) == [f"job{i:02d}" for i in range(50)]  # by job name unless told otherwise
        assert "page 1 of 2 (55)" in first
        second = client.get("/ui/jobs", params={"page": 2}).text
        assert names(second) == [f"job{i:02d}" for i in range(50, 55)]
        by_namespace = client.get("/ui/jobs", params={"sort": "namespace"}).text
        odd, even = [f"job{i:02d}" for i in range(1, 55, 2)], [f"job{i:02d}" for i in range(0, 46, 2)]
        assert names(by_namespace) == odd + even  # ns_a first
        failed = client.get("/ui/jobs", params={"status": "FAILED"}).text
        assert sorted(names(failed)) == ["job00", "job11", "job22", "job33", "job44"]
        assert ">FAILED</span>" in failed and ">FINISHED</span>" not in failed
        blue_a = client.get("/ui/jobs", params={"tag": "team=blue", "namespace": "ns_a"}).text
        assert names(blue_a) == ["job03", "job09", "job15", "job21", "job27", "job33", "job39", "job45", "job51"]
        longest = client.get("/ui/jobs", params={"sort": "duration", "desc": "1", "text": "job1"}).text
        assert names(longest) == ["job19", "job18", "job17", "job16", "job15", "job14", "job13", "job12", "job10",
                                  "job11"]  # job11 failed: no duration, last


def test_a_dataset_is_found_by_path_uri_or_table_name(tmp_path: pathlib.Path) -> None:
    with UiServer(filled(tmp_path, app_run("daily_orders"))) as srv, httpx.Client(base_url=srv.url) as client:
        places = {client.get("/ui/find", params={"dataset": name}).headers["location"]
                  for name in ("/data/orders", "file:/data/orders", "sales.orders")}
        assert len(places) == 1 and re.fullmatch(r"/ui/datasets/\d+", places.pop())
        missing = client.get("/ui/find", params={"dataset": "/no/such"})
        assert missing.status_code == 404 and "is not in the registry" in missing.text


@pytest.fixture
def scheduler() -> Iterator[str]:
    """A stand-in for the scheduler's REST API on 127.0.0.1 (``conftest.scheduler_app``)."""
    with scheduler_stand_in() as url:
        yield url


def test_a_refresh_job_shows_its_workflow_and_health(tmp_path: pathlib.Path, scheduler: str) -> None:
    db = filled(tmp_path, refresh_run("daily_orders"))
    with UiServer(db, scheduler_url=scheduler) as srv, httpx.Client(base_url=srv.url) as client:
        job = next(j for j in re.findall(r'href="/ui/jobs/(\d+)">daily_orders<', client.get("/ui/jobs").text))
        html = client.get(f"/ui/jobs/{job}").text
        assert "Refresh workflow" in html and ">wf-1<" in html
        assert ">unhealthy</span> (newest refresh failed)" in html and "no retry left" in html
    with UiServer(db, scheduler_url="http://127.0.0.1:9") as srv:  # nobody listens: the page says so
        html = httpx.get(f"{srv.url}/ui/jobs/{job}").text
        assert "scheduler at http://127.0.0.1:9:" in html


def test_a_dataset_shows_its_schema_history_and_versions(tmp_path: pathlib.Path) -> None:
    from lineagewire.schemas import schema_field

    runs = [app_run("writer") for _ in range(3)]
    schemas = [[schema_field("id", "int"), schema_field("amount", "double")],
               [schema_field("id", "int"), schema_field("amount", "decimal(10,2)"), schema_field("note", "string")],
               [schema_field("id", "int"), schema_field("note", "string")]]
    for day, (run, fields) in enumerate(zip(runs, schemas, strict=True)):
        for e in run:
            e["header"]["event_time"] += dt.timedelta(days=day)
        for e in run[2:-1]:  # the actions wrote version `day` of the table with these columns
            e["outputs"][0]["fields"] = fields
            e["outputs"][0]["properties"] = {"version": str(day)}
    with UiServer(filled(tmp_path, [e for run in runs for e in run])) as srv, httpx.Client(base_url=srv.url) as client:
        where = client.get("/ui/find", params={"dataset": "/data/writer_out"}).headers["location"]
        page = client.get(where).text
        history = page.split("Schema history")[1].split("</table>")[0]
        rows = re.findall(r"<tr><td>.*?</tr>", history, re.S)
        assert len(rows) == 3  # newest first: removed amount; retyped amount and added note; first seen
        assert "<td></td><td>amount decimal(10,2)</td><td></td>" in rows[0] and "note string" not in rows[0]
        assert "<td>note string</td><td></td><td>amount double → decimal(10,2)</td>" in rows[1]
        assert "(first seen)" in rows[2] and "id int, amount double" in rows[2]
        versions = page.split(">Versions<")[1].split("</table>")[0]
        assert re.findall(r'<td class="mono">(\d)</td><td>written</td>', versions) == ["2", "1", "0"]
        graph = client.get("/ui/api/graph", params={"dataset": where.rsplit("/", 1)[1], "column": "amount"}).json()
        assert {(e["source"].split(":")[1], e["target"].split(":")[1], e["type"]) for e in graph["edges"]} == {
            ("amount", "amount", "DIRECT"), ("id", "amount", "INDIRECT")}


@pytest.mark.slow
@pytest.mark.postgres
def test_every_page_answers_on_postgresql() -> None:
    from tests.consumers.audit.test_registry import history
    from tests.postgres import LocalPostgres, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (make system-deps); the SQLite tests still ran")
    with LocalPostgres(bin_dir) as pg:
        url = pg.new_database()
        store = RegistryStore(url)
        for e in history():
            store.apply(e)
        store.close()
        with UiServer(url) as srv, httpx.Client(base_url=srv.url) as client:
            jobs = client.get("/ui/jobs", params={"sort": "start", "desc": "1"})
            assert jobs.status_code == 200 and sorted(names(jobs.text)) == ["daily_orders", "report"]
            assert names(client.get("/ui/jobs", params={"status": "FAILED"}).text) == []
            job_id = re.search(r'href="/ui/jobs/(\d+)">daily_orders<', jobs.text).group(1)  # type: ignore[union-attr]
            job = client.get(f"/ui/jobs/{job_id}").text
            assert job.count('<span class="status s-FINISHED"') == 2 and "spark.sql.shuffle.partitions" in job
            run_id = re.search(r'href="/ui/runs/([^"]+)"', job).group(1)  # type: ignore[union-attr]
            assert client.get(f"/ui/runs/{run_id}").status_code == 200
            where = client.get("/ui/find", params={"dataset": "sales.orders"}).headers["location"]
            assert "/data/orders" in client.get(where).text
            ds = where.rsplit("/", 1)[1]
            graph = client.get("/ui/api/graph", params={"dataset": ds, "depth": 3}).json()
            assert sorted(n["label"] for n in graph["nodes"]) == ["/data/daily_orders_out", "/data/orders",
                                                                 "/data/report", "daily_orders", "report"]
            found = client.get("/ui/search", params={"q": "amount"}).text
            assert "/data/daily_orders_out</a>" in found


@pytest.fixture
def known_process_settings() -> Iterator[tuple[tuple[int, int, int], float]]:
    """Python's default GC thresholds and switch interval for the test, whatever an earlier test left (``consume
    openlineage``'s own set-up, as ``replay`` makes it, sets 0.2 ms), and the earlier values back afterwards."""
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(700, 10, 10)
    sys.setswitchinterval(0.005)
    try:
        yield gc.get_threshold(), sys.getswitchinterval()
    finally:
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)


def test_the_openlineage_page_leaves_the_gc_and_interpreter_settings_alone(
        tmp_path: pathlib.Path, known_process_settings: tuple[tuple[int, int, int], float]) -> None:
    """The page renders as ``consume openlineage`` does, but the service's process-wide tuning (``gc.freeze``,
    thresholds, switch interval) is for that service's process, never for the web server's."""
    events = app_run("rendered")
    # An earlier test in this process may have frozen objects, and frozen objects that die leave the count: start
    # from none, so that any freeze while serving shows.
    gc.unfreeze()
    rendered = []
    with UiServer(filled(tmp_path, events)) as srv, httpx.Client(base_url=srv.url) as client:
        for e in events:
            answer = client.get(f"/ui/events/{e['header']['event_id']}/openlineage.json")
            assert answer.status_code == 200, answer.text
            rendered += answer.json()
    assert rendered and all(ev["job"]["name"].startswith("rendered") for ev in rendered)
    assert (gc.get_threshold(), sys.getswitchinterval()) == known_process_settings
    assert gc.get_freeze_count() == 0


def test_a_table_page_says_what_the_scheduler_could_not_answer(tmp_path: pathlib.Path, scheduler: str) -> None:
    db = filled(tmp_path, app_run("plain"))
    with UiServer(db) as srv:  # no scheduler given: no Tables link, and the page says how to get one
        assert 'href="/ui/tables"' not in httpx.get(srv.url + "/ui/jobs").text
        page = httpx.get(srv.url + "/ui/tables/daily_orders")
        assert page.status_code == 404 and "no scheduler was given: start the UI with --scheduler-url" in page.text
    with UiServer(db, scheduler_url=scheduler) as srv, httpx.Client(base_url=srv.url) as client:
        assert 'href="/ui/tables/daily_orders"' in client.get("/ui/tables").text
        page = client.get("/ui/tables/no_such_table")
        assert page.status_code == 404 and "table &#39;no_such_table&#39; is not declared" in page.text
    with UiServer(db, scheduler_url="http://127.0.0.1:9") as srv:  # nobody listens: each section says so
        page = httpx.get(srv.url + "/ui/tables/daily_orders")
        assert page.status_code == 200 and page.text.count('<p class="error">scheduler at http://127.0.0.1:9:') == 2


def test_the_command_names_a_bad_promise_in_its_datasets_file(tmp_path: pathlib.Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from lineagewire.cli import main

    bad = tmp_path / "promises.yaml"
    bad.write_text("datasets:\n  - {dataset: sales.orders, freshness: soon}\n")
    with pytest.raises(SystemExit) as info:
        main(["ui", "--db-url", f"sqlite:///{tmp_path / 'none.db'}", "--datasets-file", str(bad)])
    assert info.value.code == 2
    assert f"file {str(bad)!r}: datasets[0] (sales.orders): freshness='soon': expected a duration" in \
        capsys.readouterr().err


def test_the_command_shows_the_alerting_settings_promises_without_a_datasets_file(
        tmp_path: pathlib.Path, clean_env: pytest.MonkeyPatch) -> None:
    """``ui`` builds its app with the promises ``dataset_stale`` checks (``alerting.datasets``) when no file is
    given, and a datasets file's instead when one is."""
    import uvicorn

    from lineagewire.cli import main

    built: list[Any] = []
    # the app the command would serve, not served
    clean_env.setattr(uvicorn, "run", lambda app, **kw: built.append(app.state.lineagewire_ui.promises))
    clean_env.setenv("LINEAGEWIRE_ALERTING__DATASETS", '[{"dataset": "sales.orders", "freshness": "1h"}]')
    db = filled(tmp_path, app_run("promised"))
    main(["ui", "--db-url", db])
    (tmp_path / "file.yaml").write_text("datasets:\n  - {dataset: /data/x, freshness: 2h}\n")
    main(["ui", "--db-url", db, "--datasets-file", str(tmp_path / "file.yaml")])
    assert [[(p.dataset, p.freshness) for p in promises] for promises in built] == [[("sales.orders", 3600.0)],
                                                                                  [("/data/x", 7200.0)]]
