"""Random bodies and values thrown at the real scheduler API (uvicorn on 127.0.0.1): never a 500.

Hypothesis draws JSON documents shaped like each endpoint's body (right field names, values of any JSON
type, extreme numbers, odd dates and zones, long and unusual text), raw bytes, and query values; every
answer must be a deliberate 2xx/4xx with a JSON ``detail`` for the errors.
"""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import tempfile
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineagewire.producers.scheduler import ListSink, TableCatalog
from lineagewire.producers.scheduler.service import SchedulerService, ServiceConfig, create_app
from lineagewire.producers.scheduler.tables import parse_tables

from .conftest import TABLES, ServerThread

TOKEN = "fuzz-token"

pytestmark = pytest.mark.slow

numbers = st.one_of(st.integers(min_value=-(10**30), max_value=10**30),
                    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0, -1, 1e20, 2**63, 2**64]))
times = st.one_of(
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                 timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=14)),
                                            dt.timezone(dt.timedelta(hours=-12))])).map(dt.datetime.isoformat),
    st.datetimes().map(dt.datetime.isoformat),
    st.sampled_from(["0001-01-01T00:00+14:00", "9999-12-31T23:59:59Z", "2026-02-30T00:00:00Z", "now", ""]),
)
texts = st.one_of(st.text(max_size=80), st.text(min_size=190, max_size=420),
                  st.sampled_from(["Europe", "E" * 300, "../../etc/passwd", "UTC", "Europe/Berlin", "\x00"]))
crons = st.one_of(st.sampled_from(["0 0 30 2 *", "0 0 31 4 *", "*/1 * * * * *", "", " ", "* * * * * * *",
                                   "61 * * * *", "0 0 29 2 1", "@daily", "0 0 L * *"]),
                  st.lists(st.sampled_from(["*", "0", "59", "*/0", "1-0", "L", "W", "?", "#", "1,2", "9999"]),
                           min_size=1, max_size=7).map(" ".join))
anything = st.recursive(st.one_of(st.none(), st.booleans(), numbers, texts),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                    max_size=3), max_leaves=6)
FIELDS = {
    "table": st.one_of(st.just("mart.hourly"), st.just("mart.nocron"), texts),
    "cron": st.one_of(crons, anything), "name": st.one_of(texts, anything),
    "time_zone": st.one_of(texts, anything), "misfire_policy": st.one_of(
        st.sampled_from(["skip", "fire_once", "catch_up", "CATCH_UP", "never"]), anything),
    "catchup_cap": st.one_of(numbers, anything), "start": st.one_of(times, anything),
    "end": st.one_of(times, anything), "nominal_time": st.one_of(times, anything),
    "catch_up": st.one_of(st.booleans(), anything), "reason": st.one_of(texts, anything),
}
bodies = st.one_of(st.fixed_dictionaries({}, optional=FIELDS), anything)


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[httpx.Client, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        catalog = TableCatalog(parse_tables(TABLES))
        service = SchedulerService(ServiceConfig(db_url=f"sqlite:///{pathlib.Path(tmp) / 'f.db'}", token=TOKEN),
                                   None, sink=ListSink(), catalog=catalog)
        with ServerThread(create_app(service)) as srv, httpx.Client(
                base_url=srv.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            wid = http.post("/workflows", json={"table": "mart.hourly", "cron": "0 0 * * *"}).json()["id"]
            yield http, wid


def check(r: httpx.Response) -> None:
    assert r.status_code < 500, (r.request.method, r.request.url, r.request.content[:300], r.text[:500])
    if r.status_code >= 400:
        assert isinstance(r.json()["detail"], str)


fuzz = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@fuzz
@given(body=bodies, which=st.sampled_from(["create", "refresh", "cron", "backfill", "resume", "cancel"]))
def test_random_bodies_never_500(api: tuple[httpx.Client, str], body: object, which: str) -> None:
    http, wid = api
    path, method = {"create": ("/workflows", "POST"), "refresh": ("/tables/mart.hourly/refresh", "POST"),
                    "cron": (f"/workflows/{wid}/cron", "PUT"), "backfill": (f"/workflows/{wid}/backfill", "POST"),
                    "resume": (f"/workflows/{wid}/resume", "POST"),
                    "cancel": ("/refreshes/nope/cancel", "POST")}[which]
    check(http.request(method, path, content=json.dumps(body).encode(), headers={"Content-Type":
                                                                                   "application/json"}))


@fuzz
@given(raw=st.binary(max_size=300), authorized=st.booleans())
def test_random_bytes_never_500(api: tuple[httpx.Client, str], raw: bytes, authorized: bool) -> None:
    http, _ = api
    headers = {"Content-Type": "application/json"} | ({} if authorized else {"Authorization": ""})
    r = http.post("/workflows", content=raw, headers=headers)
    check(r)
    if not authorized:
        assert r.status_code == 401


@fuzz
@given(limit=st.one_of(numbers.map(str), texts), table=texts, workflow=texts)
def test_random_query_values_never_500(api: tuple[httpx.Client, str], limit: str, table: str, workflow: str) -> None:
    http, wid = api
    check(http.get("/refreshes", params={"limit": limit, "table": table, "workflow_id": workflow}))
    check(http.get(f"/workflows/{wid}", params={"limit": limit}))
    check(http.get("/workflows", params={"table": table}))
    check(http.get(f"/tables/{quote(table, safe='') or 'x'}/status"))
