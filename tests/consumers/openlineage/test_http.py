"""The OpenLineage service's HTTP delivery (``delivery.HttpDelivery``: libcurl through ``curl.CurlPool``) against real
servers on 127.0.0.1.

What users set in openlineage-python's ``http`` transport arrives (auth, custom headers, gzip); TLS with a CA of
their own, without it (the CA bundle Python's ``ssl`` uses) and with ``verify: false``; proxies only with
``trust_env``; the timeout; a backend that closes its connections after each answer, with and without saying so
(sockets closed and their numbers reused under many requests in flight); and an error answer named with its status
and body.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lineagewire.consumers.openlineage.exceptions import EmitError
from lineagewire.consumers.openlineage.handler import OpenLineageHandler
from lineagewire.consumers.runtime import Record
from lineagewire.consumers.runtime.exceptions import OutputError
from tests.helpers import self_signed

from .receiver import Receiver
from .samples import app_run

pytestmark = pytest.mark.integration


def record(i: int = 0, event: dict[str, Any] | None = None) -> Record:
    return Record("t", 0, i, None, 0, event or app_run(actions=0)[0])


def handler(transport: dict[str, Any], concurrency: int = 0) -> OpenLineageHandler:
    h = OpenLineageHandler(config={"transport": {"type": "http", **transport}}, concurrency=concurrency)
    h.open()
    return h


def deliver_all(h: OpenLineageHandler, events: list[dict[str, Any]], timeout: float = 60, keys: int = 17) -> None:
    """Hand every event over (on ``keys`` Kafka keys), then wait until all are confirmed; a failed request (which
    the runtime would send again) fails the test."""
    for i, e in enumerate(events):
        h.handle(Record("t", 0, i, f"key{i % keys}", 0, e))
    assert h.inflight is not None
    try:
        assert h.inflight.flush(timeout), f"{h.inflight.pending} events still unconfirmed after {timeout} s"
    except OutputError as exc:
        pytest.fail(f"a request failed: {exc}")


def test_auth_custom_headers_and_gzip_arrive(receiver: Receiver) -> None:
    h = handler({"url": receiver.url, "auth": {"type": "api_key", "apiKey": "s3cret-token"},
                 "custom_headers": {"X-Team": "data-platform", "X-Empty": ""}, "compression": "gzip"})
    try:
        h.handle(record())
    finally:
        h.close()
    [(path, headers)] = receiver.requests
    assert path == "/api/v1/lineage"
    assert headers["Authorization"] == "Bearer s3cret-token"
    assert headers["X-Team"] == "data-platform"
    assert headers["X-Empty"] == ""  # sent, with nothing after the colon
    assert headers["Content-Encoding"] == "gzip"
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("lineagewire/")
    assert [e["eventType"] for e in receiver.snapshot()] == ["START"]  # the receiver unpacked the gzip body


def test_a_custom_authorization_header_wins_over_the_token_as_in_openlineage_python(receiver: Receiver) -> None:
    h = handler({"url": receiver.url, "auth": {"type": "api_key", "apiKey": "s3cret-token"},
                 "custom_headers": {"Authorization": "Basic dXNlcjpwYXNz"}})
    try:
        h.handle(record())
    finally:
        h.close()
    assert [headers["Authorization"] for _, headers in receiver.requests] == ["Basic dXNlcjpwYXNz"]


def test_a_header_that_is_not_ascii_is_refused_at_start(receiver: Receiver) -> None:
    from lineagewire.exceptions import ConfigError

    with pytest.raises(ConfigError, match=r"custom_headers 'X-Team': 'données' is not ASCII"):
        handler({"url": receiver.url, "custom_headers": {"X-Team": "données"}})


@pytest.mark.parametrize("status", [301, 308])
def test_a_redirect_is_followed_as_a_post_with_its_body(status: int) -> None:
    # With a 301, a client that follows as a GET (as requests does) gets a 2xx while the event went nowhere.
    with Receiver() as moved, Receiver() as target:
        moved.redirect = (status, target.url)
        h = handler({"url": moved.url})
        try:
            h.handle(record())
        finally:
            h.close()
        assert [e["eventType"] for e in target.snapshot()] == ["START"]
        assert [p for p, _ in target.requests] == ["/api/v1/lineage"]


def test_requests_waiting_for_a_connection_do_not_spend_their_timeout_waiting() -> None:
    # 1 connection, 4 requests at once (InFlight has 4 lanes per connection), each answer 0.4 s, timeout 1 s:
    # the fourth request waits 1.2 s for the connection. Its timeout counts from when it is sent, so none fails.
    from openlineage.client.serde import Serde
    from openlineage.client.transport.http import HttpConfig

    from lineagewire.consumers.openlineage.delivery import HttpDelivery, Rendered
    from lineagewire.consumers.openlineage.translate import Translator

    bodies = [Serde.to_json(Translator().translate(app_run(f"job{i}", actions=0)[0])[0]) for i in range(4)]
    with Receiver() as rx:
        rx.fixed_delay = 0.4

        async def send_all() -> None:
            delivery = HttpDelivery(HttpConfig.from_dict({"url": rx.url, "timeout": 1}), concurrency=1)
            await delivery.open()
            try:
                await asyncio.gather(*(delivery.send([Rendered(b, "k", f"t[0]@{i}")]) for i, b in enumerate(bodies)))
            finally:
                await delivery.close()

        asyncio.run(send_all())
        assert len(rx.snapshot()) == 4


def test_an_error_answer_is_named_with_its_status_and_body(receiver: Receiver) -> None:
    h = handler({"url": receiver.url})
    receiver.down = True
    try:
        with pytest.raises(EmitError, match=r"t\[0\]@0: OpenLineage backend .* answered 503 Service Unavailable: "
                                            r"backend is down; expected 2xx"):
            h.handle(record())
    finally:
        h.close()


@pytest.mark.parametrize("close", ["header", "silent"])
def test_a_backend_that_closes_each_connection_still_gets_every_event(close: str) -> None:
    # Every answer ends its connection: libcurl opens hundreds of sockets, whose numbers the kernel hands out
    # again; a watch of an old socket must not stand for the new one, or the new socket is never watched and its
    # request times out (deliver_all fails on any failed request).
    events = [e for i in range(60) for e in app_run(f"job{i}", actions=1)]  # 240 events
    with Receiver(close=close) as rx:
        h = handler({"url": rx.url, "timeout": 5}, concurrency=8)
        try:
            deliver_all(h, events)
        finally:
            h.close()
        assert len({(e["run"]["runId"], e["eventType"], e["eventTime"]) for e in rx.snapshot()}) == len(events)


def test_proxies_from_the_environment_only_with_trust_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with Receiver() as backend, Receiver() as proxy:
        for var in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)  # upper case only: libcurl alone would not read it
        h = handler({"url": backend.url})
        try:
            h.handle(record())
        finally:
            h.close()
        assert len(backend.snapshot()) == 1 and not proxy.requests

        h = handler({"url": backend.url, "trust_env": True})
        try:
            h.handle(record())
        finally:
            h.close()
        # A proxy gets the absolute URL on its request line.
        assert [p for p, _ in proxy.requests] == [f"{backend.url}/api/v1/lineage"]
        assert len(backend.snapshot()) == 1


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    return str(cert), str(key)


@pytest.fixture
def tls_receiver(certificate: tuple[str, str]) -> Iterator[Receiver]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*certificate)
    with Receiver(tls=ctx) as rx:
        yield rx


def test_tls_with_the_users_ca_without_it_and_unverified(tls_receiver: Receiver,
                                                         certificate: tuple[str, str]) -> None:
    url = tls_receiver.url
    assert url.startswith("https://")
    h = handler({"url": url, "sslContext": {"caCertPath": certificate[0]}})
    try:
        h.handle(record(0))
    finally:
        h.close()
    assert len(tls_receiver.snapshot()) == 1

    h = handler({"url": url})  # a self-signed certificate the system does not trust
    try:
        with pytest.raises(EmitError, match=r"not reached: curl error 60: .*certificate"):
            h.handle(record(1))
    finally:
        h.close()
    assert len(tls_receiver.snapshot()) == 1

    h = handler({"url": url, "verify": False})
    try:
        h.handle(record(2))
    finally:
        h.close()
    assert len(tls_receiver.snapshot()) == 2


def test_without_a_ca_of_its_own_the_ca_python_uses_is_trusted(tls_receiver: Receiver, certificate: tuple[str, str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # pycurl's wheels bring a libcurl that looks for CAs where the wheel was built (a RHEL path): the delivery
    # gives it the bundle Python's ssl uses, which SSL_CERT_FILE names (here: the test's CA, as a system's would be).
    monkeypatch.setenv("SSL_CERT_FILE", certificate[0])
    h = handler({"url": tls_receiver.url})
    try:
        h.handle(record(0))
    finally:
        h.close()
    assert len(tls_receiver.snapshot()) == 1


def test_a_request_that_outlasts_the_timeout_fails_at_the_timeout() -> None:
    with Receiver() as rx:
        h = handler({"url": rx.url, "timeout": 0.5})
        try:
            h.handle(record(0))  # answered at once
            rx.fixed_delay = 2.0
            started = time.monotonic()
            with pytest.raises(EmitError, match=r"not reached: curl error 28: .*timed out"):
                h.handle(record(1))
            assert time.monotonic() - started < 1.8  # it gave up before the backend answered
        finally:
            h.close()
