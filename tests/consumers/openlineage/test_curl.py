"""``curl.CurlPool`` through its public interface (``post``, ``close``) against real HTTP servers on 127.0.0.1:
kept-alive connections reused, at most ``connections`` of them, hundreds of requests at once, backends that close
every connection (libcurl closes sockets and the kernel hands their numbers out again), error answers, timeouts,
refused connections, cancelled posts and posts cut short by ``close``. TLS, proxies, redirects and headers:
test_http.py, through the OpenLineage service's delivery."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pycurl
import pytest

from lineagewire.consumers.openlineage.curl import Answer, CurlError, CurlPool
from lineagewire.consumers.openlineage.delivery import header_lines

from .receiver import Receiver


def pool(url: str, *, connections: int = 4, timeout: float = 5.0) -> CurlPool:
    options = {pycurl.URL: f"{url}/api/v1/lineage", pycurl.POST: 1, pycurl.NOSIGNAL: 1, pycurl.PROXY: "",
               pycurl.TIMEOUT_MS: int(timeout * 1000), pycurl.CONNECTTIMEOUT_MS: int(timeout * 1000)}
    return CurlPool(options, headers=header_lines({"Content-Type": "application/json"}), connections=connections)


def event(i: int) -> bytes:
    return json.dumps({"i": i}).encode()


def run(scenario: Callable[[], Awaitable[Any]], timeout: float = 60) -> Any:
    """``scenario()`` on a new loop; what the loop caught from its callbacks (the pool's) fails the test."""
    caught: list[dict[str, Any]] = []

    async def main() -> Any:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: caught.append(context))
        return await asyncio.wait_for(scenario(), timeout)

    result = asyncio.run(main())
    assert not caught, caught
    return result


async def until(predicate: Callable[[], Any], timeout: float = 10) -> None:
    """Wait on the running loop until ``predicate()`` holds (the pool keeps working meanwhile)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_requests_reuse_their_kept_alive_connections() -> None:
    with Receiver() as rx:
        async def scenario() -> list[int]:
            p = pool(rx.url, connections=4)
            try:
                statuses = []
                for burst in range(30):
                    answers = await asyncio.gather(*(p.post(event(burst * 4 + i)) for i in range(4)))
                    statuses += [a.status for a in answers]
                return statuses
            finally:
                p.close()

        assert run(scenario) == [200] * 120
        assert len(rx.snapshot()) == 120
        assert 1 <= len(rx.peers) <= 4, f"{len(rx.peers)} connections for 120 requests over at most 4"


def test_many_requests_at_once_all_answered_over_at_most_the_connections_given() -> None:
    with Receiver(delay=0.005) as rx:  # answers take up to 5 ms, so requests overlap
        async def scenario() -> list[Answer]:
            p = pool(rx.url, connections=8)
            try:
                return await asyncio.gather(*(p.post(event(i)) for i in range(600)))
            finally:
                p.close()

        answers = run(scenario)
        assert [a.status for a in answers] == [200] * 600
        assert sorted(e["i"] for e in rx.snapshot()) == list(range(600))
        assert 2 <= rx.max_in_flight <= 8
        assert len(rx.peers) <= 8


@pytest.mark.parametrize("close", ["header", "silent"])
def test_a_backend_that_closes_every_connection_gets_every_request(close: str) -> None:
    # Each answer ends its connection: libcurl opens hundreds of sockets, and the kernel gives a new one the number
    # of one just closed. A watch left behind for an old socket must not stand for the new one, or the new socket's
    # answer is never read and its post times out.
    # (Bursts of 4: the test server's listen backlog is 5, and a connection beyond it waits 1 s for its SYN again.)
    with Receiver(close=close) as rx:
        async def scenario() -> list[int]:
            p = pool(rx.url, connections=4, timeout=5)
            try:
                statuses = []
                for burst in range(50):
                    statuses += [a.status for a in await asyncio.gather(*(p.post(event(burst * 4 + i))
                                                                           for i in range(4)))]
                return statuses
            finally:
                p.close()

        assert run(scenario) == [200] * 200
        assert len(rx.snapshot()) == 200
        assert len(rx.peers) > 100  # the backend did close them: new connections all along


def test_an_error_answer_comes_with_its_status_reason_and_body() -> None:
    with Receiver(status_of=lambda e: 400 if e["i"] == 1 else 200) as rx:
        async def scenario() -> list[Answer]:
            p = pool(rx.url)
            try:
                return [await p.post(event(i)) for i in range(3)]
            finally:
                p.close()

        assert run(scenario) == [Answer(200, "OK", b""), Answer(400, "Bad Request", b"invalid event: status 400"),
                                 Answer(200, "OK", b"")]
        rx.down = True  # 503 with a body of its own

        async def down() -> Answer:
            p = pool(rx.url)
            try:
                return await p.post(event(3))
            finally:
                p.close()

        assert run(down) == Answer(503, "Service Unavailable", b"backend is down")


def test_a_request_that_outlasts_its_timeout_fails_at_the_timeout_and_the_pool_goes_on() -> None:
    with Receiver() as rx:
        async def scenario() -> tuple[str, float, Answer]:
            p = pool(rx.url, timeout=0.5)
            try:
                rx.fixed_delay = 2.0
                started = time.monotonic()
                with pytest.raises(CurlError) as raised:
                    await p.post(event(0))
                took = time.monotonic() - started
                rx.fixed_delay = 0.0
                return str(raised.value), took, await p.post(event(1))
            finally:
                p.close()

        error, took, after = run(scenario)
        assert error.startswith("curl error 28: ") and "timed out" in error.lower()
        assert 0.4 <= took < 1.8  # it gave up at its timeout, before the backend answered
        assert after.status == 200


def test_a_refused_connection_is_a_curl_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"

        async def scenario() -> str:
            p = pool(url)
            try:
                with pytest.raises(CurlError) as raised:
                    await p.post(event(0))
                return str(raised.value)
            finally:
                p.close()

        assert run(scenario).startswith("curl error 7: ")


def test_a_cancelled_post_does_not_stop_the_pool() -> None:
    with Receiver() as rx:
        rx.fixed_delay = 1.0

        async def scenario() -> Answer:
            p = pool(rx.url, connections=1)
            try:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(p.post(event(0)), 0.2)
                rx.fixed_delay = 0.0
                return await p.post(event(1))  # after the cancelled one's answer, on the one connection
            finally:
                p.close()

        assert run(scenario).status == 200
        assert sorted(e["i"] for e in rx.snapshot()) == [0, 1]


def test_posts_still_waiting_when_the_pool_closes_fail_with_a_clear_error() -> None:
    with Receiver() as rx:
        rx.fixed_delay = 2.0

        async def scenario() -> tuple[str, str]:
            p = pool(rx.url, connections=2)
            posts = [asyncio.ensure_future(p.post(event(i))) for i in range(3)]
            await until(lambda: len(rx.requests) == 2)  # two are out, their answers 2 s away; one waits
            p.close()
            errors = await asyncio.gather(*posts, return_exceptions=True)
            assert all(isinstance(e, CurlError) for e in errors), errors
            with pytest.raises(CurlError) as after:
                await p.post(event(3))
            return str(errors[0]), str(after.value)

        in_flight, after = run(scenario)
        assert in_flight.startswith("curl error ") and in_flight.endswith("the HTTP pool was closed")
        assert after.endswith("the HTTP pool is closed")
