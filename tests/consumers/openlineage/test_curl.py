"""``curl.CurlPool`` on an asyncio loop against a real HTTP server on 127.0.0.1: libcurl closes connections of
its own accord, and the kernel gives their numbers to the next sockets."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import pycurl
import pytest

from lineagewire.consumers.openlineage.curl import CurlError, CurlPool

from .receiver import Receiver

pytestmark = pytest.mark.integration


@pytest.mark.slow
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
            deadline = asyncio.get_running_loop().time() + 10
            while not rx.requests:  # the request is out, its answer 2 s away
                assert asyncio.get_running_loop().time() < deadline, "the request never reached the server"
                await asyncio.sleep(0.01)
            pool.close()
            try:
                await post
            except CurlError as exc:
                return exc
            return None

        error = asyncio.run(asyncio.wait_for(close_early(), 30))
        assert isinstance(error, CurlError) and "closed" in str(error)


def test_a_new_socket_under_the_number_of_a_parked_one_is_watched() -> None:
    # libcurl parks a kept-alive connection after each answer (POLL_REMOVE); the pool leaves its reader
    # registered. If libcurl then closes that socket and a new one gets its number, and libcurl's first wish for
    # it is POLL_IN, the loop must watch the new socket, not believe the old registration still does.
    async def scenario() -> list[int]:
        pool = CurlPool("http://127.0.0.1:9/", headers={}, timeout=1, connections=1)
        woke: list[int] = []
        pool._act = lambda fd, event: woke.append(fd)  # type: ignore[method-assign] - record what the loop wakes
        try:
            a, a_peer = socket.socketpair()
            fd = a.fileno()
            pool._on_socket(pycurl.POLL_IN, fd, None, None)
            pool._on_socket(pycurl.POLL_REMOVE, fd, None, None)  # parked
            a.close()
            b, b_peer = socket.socketpair()
            reused = b.fileno() == fd
            if not reused:  # the kernel gave another number: make it the old one
                os.dup2(b.fileno(), fd)
                b.close()
                b = socket.socket(fileno=fd)
            pool._on_socket(pycurl.POLL_IN, fd, None, None)
            b_peer.send(b"HTTP/1.1 200 OK\r\n")
            deadline = asyncio.get_running_loop().time() + 5
            while not woke and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            for s in (a_peer, b, b_peer):
                s.close()
            return woke
        finally:
            pool._watched.clear()
            pool._parked.clear()
            pool.close()

    assert asyncio.run(scenario()), "the new socket's answer never woke the loop"
