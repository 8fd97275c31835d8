"""Bad values against the real REST service (uvicorn on 127.0.0.1) and the CLI: clear 4xx, never a 500."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner

from lineagewire.cli import main_group
from lineagewire.producers.scheduler import ListSink
from lineagewire.producers.scheduler.service import SchedulerService, ServiceConfig, create_app

from .conftest import ServerThread

TOKEN = "bad-input-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def http(catalog, db_url: str) -> Iterator[httpx.Client]:  # noqa: ANN001
    service = SchedulerService(ServiceConfig(db_url=db_url, token=TOKEN), None, sink=ListSink(), catalog=catalog)
    with ServerThread(create_app(service)) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=30) as c:
        yield c


def refused(r: httpx.Response, *words: str) -> str:
    assert r.status_code == 422, (r.status_code, r.text)
    detail = r.json()["detail"]
    assert isinstance(detail, str)
    for w in words:
        assert w in detail, (w, detail)
    return detail


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4 *"])
def test_impossible_cron_on_create_and_set_cron(http: httpx.Client, cron: str) -> None:
    refused(http.post("/workflows", json={"table": "mart.hourly", "cron": cron}), f"cron='{cron}'", "never fires")
    wid = http.post("/workflows", json={"table": "mart.hourly", "cron": "0 0 * * *"}).json()["id"]
    refused(http.put(f"/workflows/{wid}/cron", json={"cron": cron}), f"cron='{cron}'", "expected")


def test_zone_that_is_a_folder_or_too_long(http: httpx.Client) -> None:
    refused(http.post("/workflows", json={"table": "mart.hourly", "time_zone": "Europe"}), "'Europe'", "expected")
    refused(http.post("/workflows", json={"table": "mart.hourly", "time_zone": "E" * 300}), "time_zone",
            "at most 64")
    wid = http.post("/workflows", json={"table": "mart.hourly"}).json()["id"]
    refused(http.put(f"/workflows/{wid}/cron", json={"cron": "0 0 * * *", "time_zone": "Europe"}), "'Europe'")


def test_huge_numbers(http: httpx.Client) -> None:
    refused(http.post("/workflows", json={"table": "mart.hourly", "catchup_cap": 1e20}), "catchup_cap", "1e+20")
    refused(http.post("/workflows", json={"table": "mart.hourly", "catchup_cap": 10**6}), "catchup_cap",
            "less than or equal to 10000")
    wid = http.post("/workflows", json={"table": "mart.hourly"}).json()["id"]
    refused(http.get("/refreshes", params={"limit": "1e20"}), "limit", "1e20")
    refused(http.get("/refreshes", params={"limit": 10**20}), "limit", "1000")
    refused(http.get(f"/workflows/{wid}", params={"limit": "1e20"}), "limit")


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "0001-01-01T00:00+14:00"])
def test_dates_out_of_range(http: httpx.Client, when: str) -> None:
    refused(http.post("/workflows", json={"table": "mart.hourly", "start": when}), "start=", "out of range",
            "1970-01-01")
    refused(http.post("/tables/mart.hourly/refresh", json={"nominal_time": when}), "nominal_time=", "out of range")
    wid = http.post("/workflows", json={"table": "mart.hourly"}).json()["id"]
    refused(http.post(f"/workflows/{wid}/backfill", json={"start": when, "end": "2026-01-01T00:00:00Z"}),
            "backfill start=", "out of range")
    refused(http.post(f"/workflows/{wid}/backfill", json={"start": "2026-01-01T00:00:00Z", "end": when}),
            "backfill end=", "out of range")


def test_text_limits_and_empty_cron(http: httpx.Client) -> None:
    refused(http.post("/workflows", json={"table": "mart.hourly", "name": "n" * 1_000}), "name", "at most 200")
    refused(http.post("/tables/mart.hourly/refresh", json={"name": "n" * 201}), "name", "at most 200")
    refused(http.post("/workflows", json={"table": "mart.hourly", "cron": ""}), "cron=''", "empty")
    lone_surrogate = b'{"table": "mart.hourly", "name": "\\ud800"}'  # valid JSON, not encodable text
    refused(http.post("/workflows", content=lone_surrogate, headers={"Content-Type": "application/json"}), "name")


def test_authentication_comes_before_the_body_and_bodies_are_capped(http: httpx.Client) -> None:
    anon = {"Authorization": ""}
    r = http.post("/workflows", content=b"{not json", headers={**anon, "Content-Type": "application/json"})
    assert r.status_code == 401 and "Bearer" in r.json()["detail"]
    r = http.post("/workflows", content=b"x" * 100_000, headers={**anon, "Content-Type": "application/json"})
    assert r.status_code == 401
    r = http.post("/workflows", content=b" " * 100_000, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "at most 65536" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap counts what arrives
        for _ in range(100):
            yield b" " * 1_000

    r = http.post("/workflows", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


@pytest.mark.slow
def test_validate_rejects_what_the_service_rejects(tmp_path: pathlib.Path) -> None:
    def validate(text: str) -> str:
        f = tmp_path / "t.yaml"
        f.write_text(text)
        result = subprocess.run([sys.executable, "-m", "lineagewire", "scheduler", "validate", str(f)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        return lines[0]

    table = "tables:\n  - identifier: db.t\n    query: select 1\n"
    assert "never fires" in validate(table + "    cron: '0 0 30 2 *'\n")
    assert "time_zone='Europe'" in validate(table + "    time_zone: Europe\n")
    assert "cron='' is empty" in validate(table + "    cron: ''\n")
    assert "is empty" in validate("")
    assert "declares no tables" in validate("tables: []\n")


def test_serve_with_a_bad_db_url_is_one_line_exit_2(tmp_path: pathlib.Path) -> None:
    result = CliRunner().invoke(main_group, ["scheduler", "serve", "--db-url", "notaurl://x"])
    assert result.exit_code != 0
    proc = subprocess.run([sys.executable, "-m", "lineagewire", "scheduler", "serve", "--db-url", "notaurl://x"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "notaurl://x" in lines[0] and "expected e.g. sqlite:///" in lines[0], proc.stderr
