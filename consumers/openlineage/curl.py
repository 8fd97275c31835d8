"""``CurlPool``: HTTP POSTs through libcurl's multi interface (pycurl), driven by an asyncio loop.

Why libcurl and not a Python HTTP client: the OpenLineage backends our users run
(Marquez's ``/api/v1/lineage``) take one event per request, so the cost of one
request sets the service's pace. libcurl builds the request, keeps the
connections alive, writes and reads the sockets and parses the answer in C, with
Python's GIL released; aiohttp does all of that in Python on the same thread as
the service's lanes. Measured on this 2-core machine (1.6 KB POSTs to the Go
receiver of ``bench/receiver``, 32 in flight, docs/consumers.md has the table):
this pool took 44-46 CPU µs per request, aiohttp 84-107.

The glue is libcurl's documented event-loop integration (``curl_multi_socket_action``
with a socket and a timer callback, as tornado's ``curl_httpclient`` does): libcurl
tells which sockets to watch (``loop.add_reader``/``add_writer``) and when to wake
it, and says which transfers finished (``info_read``); each finished transfer
resolves the future its ``post`` awaits. Everything runs on the loop's thread;
the multi handle is never touched from another.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from lineagewire.exceptions import MissingExtraError

try:
    import pycurl
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("pycurl", "openlineage", "The OpenLineage service's HTTP delivery") from exc

log = logging.getLogger(__name__)

__all__ = ["Answer", "CurlError", "CurlPool", "TlsSettings", "header_lines", "system_ca"]


class CurlError(OSError):
    """A request that got no HTTP answer: libcurl's error code and message (connection refused, timeout...)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"curl error {self.code}: {self.message}"


@dataclass(frozen=True, slots=True)
class Answer:
    """The backend's answer: status code, its standard reason phrase and body (only for a status of 300 or more)."""

    status: int
    reason: str
    body: bytes


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """How to verify the backend and who we are: ``verify`` off skips both checks of the backend's certificate."""

    verify: bool = True
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


class _Transfer:
    """One easy handle, reused for request after request (and so is its kept-alive connection)."""

    __slots__ = ("body", "custom_headers", "future", "handle")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.custom_headers = False
        self.future: asyncio.Future[Answer] | None = None
        self.body: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        self.body.append(chunk)


class CurlPool:
    """Concurrent POSTs to one URL over at most ``connections`` kept-alive connections.

    Create, use and close it on one asyncio loop's thread. ``post(data, headers)`` returns the ``Answer`` or
    raises ``CurlError`` when there was none (refused, reset, ``timeout`` seconds passed). More requests than
    connections wait inside libcurl for a free one, in the order they were posted.

    ``trust_env``: use the proxy variables (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``, read as ``urllib``
    reads them) and ``~/.netrc``; off, neither is read, whatever the environment says. ``idle_connections``: how many
    connections are kept alive between requests (default ``connections``).
    """

    def __init__(self, url: str, *, headers: dict[str, str], timeout: float, connections: int,
                 tls: TlsSettings | None = None, trust_env: bool = False, user_agent: str = "lineagewire",
                 idle_connections: int | None = None) -> None:
        self.url = url
        self.headers = header_lines(headers)
        self.timeout_ms = max(int(timeout * 1000), 1)
        self.tls = tls or TlsSettings()
        self.trust_env = trust_env
        self.proxy = _proxy_for(url) if trust_env else None
        self.user_agent = user_agent
        self._loop = asyncio.get_running_loop()
        self._multi = pycurl.CurlMulti()
        self._multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self._multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self._multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, connections)
        self._multi.setopt(pycurl.M_MAXCONNECTS, connections if idle_connections is None else idle_connections)
        self._timer: asyncio.TimerHandle | None = None
        self._free: list[_Transfer] = []
        self._busy: dict[Any, _Transfer] = {}  # easy handle -> its transfer
        self._watched: dict[int, int] = {}  # fd -> what the loop watches it for (_IN | _OUT)
        self._parked: set[int] = set()  # fds libcurl does not need now whose reader stays registered
        self._inodes: dict[int, int] = {}  # fd -> the inode of the socket it was registered for
        self._closed = False

    # -- requests --------------------------------------------------------------------------------

    async def post(self, data: bytes, headers: list[str] | None = None) -> Answer:
        """POST ``data`` (with ``headers``, lines made by ``header_lines``, instead of the pool's own when given)."""
        if self._closed:
            raise CurlError(pycurl.E_FAILED_INIT, "the HTTP pool is closed")
        transfer = self._free.pop() if self._free else self._new()
        handle = transfer.handle
        handle.setopt(pycurl.POSTFIELDS, data)
        if headers is not None:
            handle.setopt(pycurl.HTTPHEADER, headers)
            transfer.custom_headers = True
        elif transfer.custom_headers:
            handle.setopt(pycurl.HTTPHEADER, self.headers)
            transfer.custom_headers = False
        future = transfer.future = self._loop.create_future()
        try:
            self._multi.add_handle(handle)
        except pycurl.error as exc:
            transfer.future = None
            self._free.append(transfer)
            code, message = exc.args if len(exc.args) == 2 else (pycurl.E_FAILED_INIT, str(exc))
            raise CurlError(code, f"libcurl did not take the request: {message}") from exc
        self._busy[handle] = transfer
        return await future

    def _new(self) -> _Transfer:
        handle = pycurl.Curl()
        transfer = _Transfer(handle)
        handle.setopt(pycurl.URL, self.url)
        handle.setopt(pycurl.POST, 1)
        handle.setopt(pycurl.HTTPHEADER, self.headers)
        handle.setopt(pycurl.USERAGENT, self.user_agent)
        handle.setopt(pycurl.TIMEOUT_MS, self.timeout_ms)
        handle.setopt(pycurl.CONNECTTIMEOUT_MS, self.timeout_ms)
        handle.setopt(pycurl.NOSIGNAL, 1)
        handle.setopt(pycurl.WRITEFUNCTION, transfer.write)
        # An empty proxy is no proxy: libcurl would otherwise read http_proxy/HTTPS_PROXY itself.
        handle.setopt(pycurl.PROXY, self.proxy or "")
        if self.trust_env:
            handle.setopt(pycurl.NETRC, pycurl.NETRC_OPTIONAL)
        tls = self.tls
        if not tls.client_cert:
            # Follow a redirect as a POST with its body (a 2xx from a GET would not mean the event was taken);
            # never with a client certificate, as openlineage-python: it would be shown to another endpoint.
            handle.setopt(pycurl.FOLLOWLOCATION, 1)
            handle.setopt(pycurl.MAXREDIRS, 5)
            handle.setopt(pycurl.POSTREDIR, pycurl.REDIR_POST_ALL)
        if not tls.verify:
            handle.setopt(pycurl.SSL_VERIFYPEER, 0)
            handle.setopt(pycurl.SSL_VERIFYHOST, 0)
        ca_file, ca_dir = (tls.ca_file, None) if tls.ca_file else system_ca()
        if ca_file:
            handle.setopt(pycurl.CAINFO, ca_file)
        if ca_dir:
            handle.setopt(pycurl.CAPATH, ca_dir)
        if tls.client_cert:
            handle.setopt(pycurl.SSLCERT, tls.client_cert)
            if tls.client_key:
                handle.setopt(pycurl.SSLKEY, tls.client_key)
        return transfer

    def _finished(self) -> None:
        """Resolve the futures of the transfers libcurl says are done."""
        multi = self._multi
        while True:
            queued, ok, failed = multi.info_read()
            for handle in ok:
                self._remove(handle)
                transfer = self._busy.pop(handle)
                status = handle.getinfo(pycurl.RESPONSE_CODE)
                body = b"".join(transfer.body) if status >= 300 else b""
                self._settle(transfer, Answer(status, _reason(status), body), None)
            for handle, code, message in failed:
                self._remove(handle)
                self._settle(self._busy.pop(handle), None, CurlError(code, message))
            if not queued:
                return

    def _remove(self, handle: Any) -> None:
        try:
            self._multi.remove_handle(handle)
        except pycurl.error as exc:  # the transfer is over either way; its post still gets its answer or error
            log.warning("libcurl could not release a finished request: %s", exc)

    def _settle(self, transfer: _Transfer, answer: Answer | None, error: BaseException | None) -> None:
        future, transfer.future = transfer.future, None
        transfer.body.clear()
        self._free.append(transfer)
        if future is None or future.done():  # its post was cancelled
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(answer)  # type: ignore[arg-type]

    # -- libcurl's callbacks (on the loop's thread, from inside socket_action or add_handle) ---------

    def _on_socket(self, what: int, fd: int, multi: Any, data: Any) -> None:
        """libcurl says what to watch ``fd`` for. A kept-alive connection goes from "read" to "nothing" and back
        for every request: its reader stays registered while it waits (``_parked``), which saves two
        ``epoll_ctl`` calls and the loop's bookkeeping per request. It is unregistered if it wakes up while
        parked (the backend closed it). libcurl may close a parked socket and the kernel give its number to a
        new one: the socket's inode tells them apart when libcurl wants the number again."""
        try:
            self._watch(what, fd)
        except (OSError, ValueError) as exc:  # an exception would make libcurl abort every transfer
            log.warning("cannot watch socket %d for libcurl (%s); its request fails at its timeout", fd, exc)

    def _watch(self, what: int, fd: int) -> None:
        loop, watched = self._loop, self._watched
        want = _WANT[what]
        if fd in self._parked:
            self._parked.discard(fd)
            if want and _inode(fd) != self._inodes.get(fd):
                self._unwatch(fd)  # a new socket under an old number: the loop's registration is stale
        have = watched.get(fd, 0)
        if want == 0:  # POLL_REMOVE: keep the reader, drop a writer (a writable socket would wake us for nothing)
            if have & _OUT:
                loop.remove_writer(fd)
                have = watched[fd] = have & ~_OUT
            if have:
                self._parked.add(fd)
            return
        if not have:
            self._inodes[fd] = _inode(fd)
        if want & _IN and not have & _IN:
            loop.add_reader(fd, self._on_readable, fd)
        elif have & _IN and not want & _IN:
            loop.remove_reader(fd)
        if want & _OUT and not have & _OUT:
            loop.add_writer(fd, self._act, fd, pycurl.CSELECT_OUT)
        elif have & _OUT and not want & _OUT:
            loop.remove_writer(fd)
        watched[fd] = want

    def _on_readable(self, fd: int) -> None:
        if fd in self._parked:  # an idle connection woke up (closed by the backend): libcurl finds out on reuse
            self._unwatch(fd)
            return
        self._act(fd, pycurl.CSELECT_IN)

    def _unwatch(self, fd: int) -> None:
        """Stop watching ``fd`` (the loop's selector ignores a number whose socket is gone)."""
        have = self._watched.pop(fd, 0)
        self._parked.discard(fd)
        self._inodes.pop(fd, None)
        if have & _IN:
            self._loop.remove_reader(fd)
        if have & _OUT:
            self._loop.remove_writer(fd)

    def _on_timer(self, ms: int) -> None:
        """libcurl wants ``socket_action(TIMEOUT)`` in ``ms`` (-1: never). A timer due sooner is kept: libcurl
        takes an early call and says again when it wants the next (adding a request asks for 0 ms each time)."""
        timer = self._timer
        if ms < 0:
            if timer is not None:
                timer.cancel()
                self._timer = None
            return
        when = self._loop.time() + ms / 1000
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timer = self._loop.call_at(when, self._on_timeout)

    def _on_timeout(self) -> None:
        self._timer = None
        self._act(pycurl.SOCKET_TIMEOUT, 0)
        if self._timer is None and not self._closed:
            # This timer may have been an earlier one kept in place of what libcurl asked for; most libcurl
            # versions ask again after an early call, 8.10.0 to 8.11.0 do not (curl/curl#15627): ask it.
            ms = self._multi.timeout()
            if ms >= 0:
                self._on_timer(ms)

    def _act(self, fd: int, event: int) -> None:
        if self._closed:
            return
        try:
            while True:
                ret, _ = self._multi.socket_action(fd, event)
                if ret != pycurl.E_CALL_MULTI_PERFORM:
                    break
        except pycurl.error as exc:  # the multi handle itself failed: no transfer of it can be trusted to finish
            log.error("libcurl failed (%s); failing the %d requests in flight so they are sent again", exc,
                      len(self._busy))
            self._fail_busy(CurlError(pycurl.E_FAILED_INIT, f"libcurl failed: {exc}"))
            return
        self._finished()

    def _fail_busy(self, error: CurlError) -> None:
        """Every transfer in flight ends with ``error`` (its handle back to the free list)."""
        for handle, transfer in list(self._busy.items()):
            self._remove(handle)
            self._settle(transfer, None, error)
        self._busy.clear()

    # -- closing ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop: unfinished posts raise ``CurlError``; connections and handles are closed."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._fail_busy(CurlError(pycurl.E_ABORTED_BY_CALLBACK, "the HTTP pool was closed"))  # back to _free
        self._multi.close()
        for transfer in self._free:
            transfer.handle.close()
        self._free.clear()
        for fd in list(self._watched):
            self._unwatch(fd)


def header_lines(headers: dict[str, str]) -> list[str]:
    """``HTTPHEADER`` lines for ``headers``: an empty value as ``Name;`` (libcurl drops ``Name:`` with nothing
    after it), and ``Expect:`` so a large body is not held back for a ``100 Continue``."""
    return [f"{k}: {v}" if str(v) else f"{k};" for k, v in headers.items()] + ["Expect:"]


def _inode(fd: int) -> int:
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return -1


def _reason(status: int) -> str:
    """The standard reason phrase of ``status`` (libcurl does not keep the one the backend sent)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


_IN, _OUT = 1, 2
_WANT = {pycurl.POLL_NONE: 0, pycurl.POLL_IN: _IN, pycurl.POLL_OUT: _OUT, pycurl.POLL_INOUT: _IN | _OUT,
         pycurl.POLL_REMOVE: 0}

#: CA bundles where distributions keep them: Debian/Ubuntu, RHEL/Fedora, openSUSE, Alpine and macOS
_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
               "/etc/ssl/cert.pem")
@functools.cache
def system_ca() -> tuple[str | None, str | None]:
    """The system's CA bundle and CA folder (``CAINFO``, ``CAPATH``): the libcurl of pycurl's wheels looks where
    the wheel was built (a RHEL path), so we say where they are here, as Python's ``ssl`` finds them
    (``SSL_CERT_FILE``/``SSL_CERT_DIR`` first), then the usual bundle paths, then certifi's."""
    import ssl

    paths = ssl.get_default_verify_paths()
    ca_file = next((p for p in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile, *_CA_BUNDLES)
                    if p and os.path.isfile(p)), None)
    ca_dir = next((p for p in (os.environ.get("SSL_CERT_DIR"), paths.capath, paths.openssl_capath)
                   if p and os.path.isdir(p)), None)
    if ca_file is None:
        try:
            import certifi

            ca_file = certifi.where()
        except ImportError:
            ca_file = None
    return ca_file, ca_dir


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url``, read as Python's ``urllib`` reads it (``HTTP_PROXY`` and
    ``http_proxy`` alike, ``NO_PROXY``); libcurl itself ignores upper-case ``HTTP_PROXY``."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy
