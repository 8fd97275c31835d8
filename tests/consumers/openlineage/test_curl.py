"""``curl.CurlPool`` on an asyncio loop against a real HTTP server on 127.0.0.1: libcurl closes connections of
its own accord, and the kernel gives their numbers to the next sockets."""

from __future__ import annotations

import asyncio
import json

import pytest

from lineagewire.consumers.openlineage.curl import CurlError, CurlPool

from .receiver import Receiver

pytestmark = pytest.mark.integration


def test_sockets_libcurl_closes_while_idle_do_not_leave_their_numbers_unwatched() -> None:
    # 8 connections for each burst, 1 kept between bursts: libcurl closes 7 idle sockets after every burst
    # (the backend did not close them, so their readers never fired) and opens 7 new ones, mostly under the
    # same numbers. Were the loop's registration for an old socket taken for the new one, the new socket's
    # answer would never be read and its post would time out.
    with Receiver() as rx:
        async def bursts() -> list[int]:
            pool = CurlPool(f"{rx.url}/api/v1/lineage", headers={"Content-Type": "application/json"}, timeout=3,
                            connections=8, idle_connections=1)
            statuses: list[int] = []
            try:
                for burst in range(25):
                    answers = await asyncio.gather(*(pool.post(json.dumps({"burst": burst, "i": i}).encode())
                                                     for i in range(8)))
                    statuses += [a.status for a in answers]
            finally:
                pool.close()
            return statuses

        statuses = asyncio.run(asyncio.wait_for(bursts(), 60))
        assert statuses == [200] * 200
        assert len(rx.snapshot()) == 200


def test_posts_still_waiting_when_the_pool_closes_fail_with_a_clear_error() -> None:
    with Receiver() as rx:
        rx.fixed_delay = 2.0

        async def close_early() -> BaseException | None:
            pool = CurlPool(f"{rx.url}/api/v1/lineage", headers={}, timeout=10, connections=2)
            post = asyncio.ensure_future(pool.post(b"{}"))
            await asyncio.sleep(0.2)  # the request is out, its answer 2 s away
            pool.close()
            try:
                await post
            except CurlError as exc:
                return exc
            return None

        error = asyncio.run(close_early())
        assert isinstance(error, CurlError) and "closed" in str(error)
