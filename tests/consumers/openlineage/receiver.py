"""A real OpenLineage HTTP backend stand-in on 127.0.0.1: records every POSTed event."""

from __future__ import annotations

import gzip
import json
import random
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers import LocalServer, latency, wait_for


class Receiver:
    """POST /api/v1/lineage -> 200 and the event is kept; ``down = True`` answers 503 instead.

    ``down_after``: once that many events are kept, ``down`` turns True by itself (a backend that fails
    mid-stream, at a known point). ``status_of(event)``: the status to answer for an event (not 2xx: not kept,
    ``answered`` counts it), e.g. 400 for one invalid event or 503 for one job whose store is down. ``tls``: serve
    HTTPS with that context. ``close``: end each connection after its answer, saying so (``"header"``:
    ``Connection: close``) or not (``"silent"``, as a backend whose idle connections time out). ``requests``
    keeps each request's path and headers, ``peers`` the client address of each connection; gzip bodies are
    unpacked.
    """

    def __init__(self, down_after: int | None = None, *, delay: float = 0.0,
                 status_of: Callable[[dict[str, Any]], int] | None = None, tls: ssl.SSLContext | None = None,
                 close: str | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.rejected = 0
        self.down = False
        self.down_after = down_after
        self.delay = delay  # each answer waits up to this many seconds (random), so requests in flight interleave
        self.fixed_delay = 0.0  # and at least this many
        self.in_flight = 0
        self.max_in_flight = 0
        self.killed = False
        self.status_of = status_of
        self.answered: list[tuple[int, dict[str, Any]]] = []  # (status, event) of every event not kept
        self.redirect: tuple[int, str] | None = None  # (status, base URL): answer every POST with that redirect
        self.peers: set[tuple[str, int]] = set()  # the client address of every connection a request came on
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with outer._lock:
                    outer.requests.append((self.path, dict(self.headers)))
                    outer.peers.add(self.client_address)
                if outer.redirect is not None:
                    self.send_response(outer.redirect[0])
                    self.send_header("Location", outer.redirect[1] + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if outer.killed:  # a connection that outlived kill(): no answer, as from a dead process
                    self.close_connection = True
                    return
                with outer._lock:
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                if outer.delay or outer.fixed_delay:
                    latency(outer.fixed_delay + random.random() * outer.delay)  # noqa: S311 - jitter, not crypto
                event = json.loads(body)
                code = outer.status_of(event) if outer.status_of is not None else 200
                with outer._lock:
                    outer.in_flight -= 1
                    if code >= 300:
                        outer.answered.append((code, event))
                    elif outer.down:
                        outer.rejected += 1
                        code = 503
                    else:
                        outer.events.append(event)
                        code = 200
                        outer.down = outer.down_after is not None and len(outer.events) >= outer.down_after
                said = b"" if code < 400 else (b"backend is down" if outer.down and code == 503
                                               else f"invalid event: status {code}".encode())
                self.send_response(code)
                self.send_header("Content-Length", str(len(said)))
                if close == "header":
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(said)
                if close is not None:
                    self.close_connection = True

        self._http = LocalServer(_H, tls=tls)
        self.port = self._http.port
        self.url = self._http.url

    def __enter__(self) -> Receiver:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def kill(self) -> None:
        """Stop listening and drop the connections: the backend is gone (connection refused), events are kept."""
        self.killed = True
        self._http.kill()

    def restart(self) -> None:
        """Listen again on the same port, after ``kill``."""
        self.killed = False
        self._http.restart()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def wait_for(self, predicate: Any, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The events once ``predicate`` holds for them; what arrived by ``timeout`` otherwise (the caller asserts)."""
        def arrived() -> tuple[list[dict[str, Any]]] | None:
            events = self.snapshot()
            return (events,) if predicate(events) else None  # a tuple: an empty list can be the answer too

        try:
            return wait_for(arrived, timeout, every=0.1)[0]  # type: ignore[no-any-return]
        except AssertionError:
            return self.snapshot()


def event_key(ol: dict[str, Any]) -> tuple[str, str, str]:
    """Identity of an OpenLineage event: run, type, time."""
    return ol["run"]["runId"], ol["eventType"], ol["eventTime"]
