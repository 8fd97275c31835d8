"""The REST service on a real uvicorn server and the `workflows` CLI talking to it over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner

from lineagewire.cli import main_group
from lineagewire.producers.scheduler import ListSink
from lineagewire.producers.scheduler.service import SchedulerService, ServiceConfig, create_app

from .conftest import ServerThread

TOKEN = "s3cret-token"


@pytest.fixture
def server(catalog, db_url: str) -> Iterator[ServerThread]:  # noqa: ANN001
    sink = ListSink()
    service = SchedulerService(ServiceConfig(db_url=db_url, token=TOKEN, misfire_grace=5), None, sink=sink,
                               catalog=catalog)
    with ServerThread(create_app(service)) as srv:
        srv.sink = sink  # type: ignore[attr-defined]
        srv.service = service  # type: ignore[attr-defined]
        yield srv


def cli(server: ServerThread, *args: str, token: str | None = TOKEN) -> tuple[int, str]:
    base = ["workflows", "--url", server.url] + (["--token", token] if token else [])
    result = CliRunner().invoke(main_group, [*base, *args])
    return result.exit_code, result.output


def test_changes_need_the_bearer_token(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url) as http:
        r = http.post("/workflows", json={"table": "mart.hourly"})
        assert r.status_code == 401 and "Bearer" in r.json()["detail"]
        r = http.post("/workflows", json={"table": "mart.hourly"}, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401
        assert http.get("/workflows").status_code == 200  # reads are open
        assert http.get("/openapi.json").json()["info"]["title"] == "lineagewire scheduler"


def test_bad_cron_and_unknown_table_are_clear_4xx(server: ServerThread) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=auth) as http:
        r = http.post("/workflows", json={"table": "mart.hourly", "cron": "61 * * * *"})
        assert r.status_code == 422 and "cron='61 * * * *'" in r.json()["detail"]
        r = http.post("/workflows", json={"table": "mart.nope", "cron": "0 * * * *"})
        assert r.status_code == 404 and "'mart.nope' is not declared" in r.json()["detail"]
        r = http.post("/workflows", json={"table": "mart.hourly", "time_zone": "Atlantis/Sunken"})
        assert r.status_code == 422 and "Atlantis/Sunken" in r.json()["detail"]
        assert http.post("/workflows/nope/suspend").status_code == 404
    code, out = cli(server, "create", "mart.hourly", "--cron", "bad cron")
    assert code != 0 and "422" in out and "cron='bad cron'" in out
    code, out = cli(server, "create", "mart.unknown")
    assert code != 0 and "404" in out and "mart.unknown" in out


def test_cli_lifecycle(server: ServerThread) -> None:
    code, out = cli(server, "--json", "create", "mart.hourly", "--cron", "0 0 * * * *", "--name", "hourly")
    assert code == 0, out
    wid = json.loads(out)["id"]
    code, out = cli(server, "list", token=None)
    assert code == 0 and wid in out and "ACTIVE" in out
    code, out = cli(server, "suspend", wid)
    assert code == 0 and "PAUSED" in out
    code, out = cli(server, "resume", wid)
    assert code == 0 and "ACTIVE" in out
    code, out = cli(server, "set-cron", wid, "0 */30 * * * *", "--time-zone", "Europe/Berlin")
    assert code == 0 and "0 */30 * * * *" in out and "Europe/Berlin" in out
    code, out = cli(server, "backfill", wid, "--start", "2025-12-31T22:00:00Z", "--end", "2025-12-31T23:00:00Z")
    assert code == 0 and out.count("BACKFILL") == 3, out
    code, out = cli(server, "show", wid)
    assert code == 0 and "healthy" in out and out.count("QUEUED") == 3
    command_id = out.strip().splitlines()[-1].split()[-1]
    code, out = cli(server, "cancel", command_id, "--reason", "test")
    assert code == 0 and "CANCELED" in out
    assert server.sink.events[-1]["command_id"] == command_id  # type: ignore[attr-defined]
    code, out = cli(server, "--json", "refresh", "mart.hourly", "--nominal-time", "2026-01-01T05:00:00Z")
    assert code == 0 and json.loads(out)["kind"] == "ONE_TIME"
    code, out = cli(server, "delete", wid)
    assert code == 0
    code, out = cli(server, "show", wid)
    assert code != 0 and "404" in out


def test_cli_without_a_server_says_how_to_start_it() -> None:
    from lineagewire.kafka.local import free_port

    result = CliRunner().invoke(main_group, ["workflows", "--url", f"http://127.0.0.1:{free_port()}", "list"])
    assert result.exit_code != 0 and "lineagewire scheduler serve" in result.output


def test_held_refresh_and_inputs_in_the_api_and_the_cli(server: ServerThread) -> None:
    """A held refresh shows HELD with its reasons in the API and the CLI; --force publishes it (trigger MANUAL)."""
    from lineagewire.schemas import kind_of

    from .test_upstream import FakeInputs, reason

    sched = server.service.scheduler  # type: ignore[attr-defined]
    inputs = FakeInputs(sched.clock)
    inputs.holding = [reason()]
    sched.inputs = inputs
    code, out = cli(server, "--json", "create", "mart.hourly", "--cron", "0 0 * * * *")
    wid = json.loads(out)["id"]
    code, out = cli(server, "backfill", wid, "--start", "2025-12-31T23:00:00Z", "--end", "2025-12-31T23:00:00Z")
    assert code == 0 and "HELD" in out and "UPSTREAM_FAILED /lake/raw/orders" in out, out
    with httpx.Client(base_url=server.url) as http:
        (r,) = http.get("/refreshes", params={"workflow_id": wid}).json()
        assert r["status"] == "HELD" and r["refresh_trigger"] == "CRON" and r["held_since"]
        assert r["hold_reasons"] == inputs.holding
        ins = http.get("/tables/mart.hourly/inputs").json()
        assert ins["inputs"] == inputs.states(None, None) and ins["hold_reasons"] == inputs.holding
        assert [h["command_id"] for h in ins["held"]] == [r["command_id"]]
        assert ins["hold_on"] == ["UPSTREAM_FAILED", "UPSTREAM_RUNNING", "BREAKING_CHANGE"]
        status = http.get("/tables/mart.hourly/status").json()
        assert status["held"] is True and status["healthy"] is False
        assert http.get("/tables/mart.nope/inputs").status_code == 404
    code, out = cli(server, "show", wid)
    assert code == 0 and "/lake/raw/orders" in out and "would hold now: UPSTREAM_FAILED" in out
    assert "held: UPSTREAM_FAILED /lake/raw/orders (run " in out, out
    held_events = [e for e in server.sink.events if kind_of(e) == "RefreshHeld"]  # type: ignore[attr-defined]
    assert [e["command_id"] for e in held_events] == [r["command_id"]]
    code, out = cli(server, "refresh", "mart.hourly", "--force")
    assert code == 0 and f"released {r['command_id']}" in out, out
    cmd = server.sink.events[-1]  # type: ignore[attr-defined]
    assert cmd["command_id"] == r["command_id"] and cmd["header"]["schedule"]["trigger"] == "MANUAL"
