"""``CurlPool``: HTTP POSTs through libcurl's multi interface (pycurl), driven by an asyncio loop.

Why libcurl: a request's cost sets the pace (Marquez takes one event a request); libcurl does the socket work and
parsing in C without the GIL (docs/consumers.md). How: libcurl's socket callback arms its sockets one-shot in an
epoll set of the pool's own (Linux), whose descriptor the loop watches. When that is readable, the pool hands libcurl
the ready sockets (``socket_action``), arms again those it still wants, settles the finished transfers and asks
``multi.timeout()`` when to call libcurl next. One-shot: a socket libcurl is done with costs no system call.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
from http import HTTPStatus
from typing import Any, NamedTuple

from lineagewire.exceptions import ConfigError, MissingExtraError

try:
    import pycurl
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("pycurl", "openlineage", "The OpenLineage service's HTTP delivery") from exc

__all__ = ["Answer", "CurlError", "CurlPool"]


class CurlError(OSError):
    """A request that got no HTTP answer: libcurl's error code and message (refused, timed out, the pool closed)."""


class Answer(NamedTuple):
    """The backend's answer: status, its standard reason phrase, and the body (only for a status of 300 or more)."""

    status: int
    reason: str
    body: bytes


class CurlPool:
    """Concurrent POSTs over at most ``connections`` kept-alive connections, each request an easy handle with
    ``options`` (``pycurl.URL``, timeouts, TLS...) and the header lines ``headers`` (``pycurl.HTTPHEADER``).
    Create, use and close it on one asyncio loop's thread."""

    def __init__(self, options: dict[int, Any], *, headers: list[str], connections: int) -> None:
        if not hasattr(select, "epoll"):
            raise ConfigError("the OpenLineage HTTP delivery runs on Linux (it waits on an epoll set): run the "
                              "service in its image or on a Linux host, or choose another OpenLineage transport "
                              "(kafka, file)")
        self.options, self.headers = options, headers
        self._loop = asyncio.get_running_loop()
        self._multi = pycurl.CurlMulti()
        for option, value in ((pycurl.M_SOCKETFUNCTION, self._on_socket), (pycurl.M_MAXCONNECTS, connections),
                              (pycurl.M_MAX_HOST_CONNECTIONS, connections)):
            self._multi.setopt(option, value)
        self._epoll = select.epoll()
        self._loop.add_reader(self._epoll.fileno(), self._act)
        self._want: dict[int, int] = {}  # socket -> what libcurl wants it watched for (pycurl.POLL_IN...)
        self._busy: dict[Any, asyncio.Future[Answer]] = {}  # easy handle -> the future of its post
        self._free: list[Any] = []  # easy handles to reuse
        self._timer: asyncio.TimerHandle | None = None

    async def post(self, data: bytes, headers: list[str] | None = None) -> Answer:
        """POST ``data`` (with ``headers`` instead of the pool's when given): the ``Answer``, or ``CurlError`` when
        there was none (refused, reset, timed out, the pool closed)."""
        if self._epoll.closed:
            raise CurlError(f"curl error {pycurl.E_FAILED_INIT}: the HTTP pool is closed")
        if self._free:
            handle = self._free.pop()
        else:
            handle = pycurl.Curl()
            handle.body = []
            for option, value in [*self.options.items(), (pycurl.WRITEFUNCTION, handle.body.append)]:
                handle.setopt(option, value)
        handle.setopt(pycurl.POSTFIELDS, data)
        handle.setopt(pycurl.HTTPHEADER, headers or self.headers)
        self._multi.add_handle(handle)  # libcurl starts it at its next timeout, which is now: see _schedule
        future = self._busy[handle] = self._loop.create_future()
        self._schedule()
        return await future

    def close(self) -> None:
        """Close the connections; posts not answered yet raise ``CurlError``."""
        if self._epoll.closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._loop.remove_reader(self._epoll.fileno())
        self._settle([(h, CurlError(f"curl error {pycurl.E_ABORTED_BY_CALLBACK}: the HTTP pool was closed"))
                      for h in self._busy])
        self._multi.close()
        self._epoll.close()

    def _on_socket(self, what: int, fd: int, multi: Any = None, data: Any = None) -> None:
        """libcurl's socket callback: what to watch ``fd`` for from now on (``POLL_REMOVE``: nothing for now)."""
        if what not in _EVENTS:
            self._want.pop(fd, None)
            return
        self._want[fd] = what
        try:
            self._epoll.modify(fd, _EVENTS[what])
        except FileNotFoundError:  # a socket new to the set (or under the number of a closed one)
            self._epoll.register(fd, _EVENTS[what])

    def _act(self, timeout: bool = False) -> None:
        """Tell libcurl which of its sockets are ready (and that its timer is due), then settle what finished."""
        if timeout:  # the timer just ran: none is pending
            self._timer = None
        try:
            ready = self._epoll.poll(0)
            for fd, mask in ready:  # (an error or hang-up counts as both, as in the selectors module)
                self._multi.socket_action(fd, (pycurl.CSELECT_IN if mask & ~select.EPOLLOUT else 0)
                                          | (pycurl.CSELECT_OUT if mask & ~select.EPOLLIN else 0))
            for fd in {fd for fd, _ in ready} & self._want.keys():  # (their one-shot watch is spent)
                self._on_socket(self._want[fd], fd)
            if timeout or self._multi.timeout() == 0:
                self._multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
            _, ok, failed = self._multi.info_read(len(self._busy) or 1)  # (all finished transfers are busy ones)
            done: list[tuple[Any, CurlError | None]] = [(h, None) for h in ok]
            done += [(h, CurlError(f"curl error {c}: {m}")) for h, c, m in failed]
        except pycurl.error as exc:  # the multi handle failed: no transfer of it can be trusted to finish
            done = [(h, CurlError(f"curl error {pycurl.E_FAILED_INIT}: libcurl failed: {exc}")) for h in self._busy]
        self._settle(done)
        self._schedule()

    def _schedule(self) -> None:
        """Call ``_act`` when libcurl's next timer is due; a timer due sooner is kept (libcurl takes an early call)."""
        ms = self._multi.timeout()
        when = self._loop.time() + ms / 1000
        if ms >= 0 and (self._timer is None or self._timer.when() > when):
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_at(when, self._act, True)

    def _settle(self, done: list[tuple[Any, CurlError | None]]) -> None:
        """Resolve the futures of the finished transfers ``done`` (with their error, if any); reuse their handles."""
        for handle, error in done:
            with contextlib.suppress(pycurl.error):
                self._multi.remove_handle(handle)
            status = handle.getinfo(pycurl.RESPONSE_CODE)
            body = b"".join(handle.body) if status >= 300 else b""
            handle.body.clear()
            self._free.append(handle)
            future = self._busy.pop(handle)
            if error is not None and not future.done():  # (done: its post was cancelled)
                future.set_exception(error)
            elif not future.done():
                future.set_result(Answer(status, _PHRASES.get(status, ""), body))


_PHRASES = {s.value: s.phrase for s in HTTPStatus}  # libcurl does not keep the phrase the backend sent
_EVENTS = {pycurl.POLL_IN: select.EPOLLIN | select.EPOLLONESHOT, pycurl.POLL_OUT: select.EPOLLOUT | select.EPOLLONESHOT,
           pycurl.POLL_INOUT: select.EPOLLIN | select.EPOLLOUT | select.EPOLLONESHOT}
