"""Small helpers shared by the tests: make events, read a topic back, wait for a condition, serve HTTP."""

from __future__ import annotations

import contextlib
import datetime as dt
import pathlib
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from confluent_kafka import Consumer

from lineagewire.config import Settings
from lineagewire.schemas import Codec, header, job_status_changed


def status_event(job: str = "job", status: str = "RUNNING", old: str | None = "CREATED", run_id: str | None = None,
                 seq: int = 0, namespace: str = "test") -> dict[str, Any]:
    h = header("JobStatusChangedEvent", job_namespace=namespace, job_name=job, run_id=run_id or str(uuid.uuid4()),
               sequence=seq)
    return job_status_changed(h, status, old)  # type: ignore[arg-type]


def read_topic(settings: Settings, topic: str, expected: int, timeout: float = 30.0,
               decode: bool = True) -> list[Any]:
    """Read ``expected`` messages from the beginning of ``topic`` (fresh group), decoded unless decode=False."""
    codec = Codec()
    consumer = Consumer({**settings.as_librdkafka_dict(), "group.id": f"read-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(codec.decode(msg.value()) if decode else msg)
    finally:
        consumer.close()
    return out


def latency(seconds: float) -> None:
    """A test server's simulated processing time (a backend on a LAN answers in milliseconds, not at once): the
    one place a test server sleeps on purpose. Tests never wait for something this way: they use ``wait_for``."""
    if seconds > 0:
        time.sleep(seconds)


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")


class LocalServer:
    """A test backend's HTTP server on 127.0.0.1: ``handler`` (a ``BaseHTTPRequestHandler`` class) served on
    threads, its requests' log lines dropped, its connections tracked, so that ``kill()`` is a backend that is
    gone (the listening socket closed and every kept-alive connection dropped: connections refused) and
    ``restart()`` the same backend back on the same port. ``tls``: serve HTTPS with that context."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, port: int = 0,
                 tls: ssl.SSLContext | None = None) -> None:
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        outer = self

        class Tracked(handler):  # type: ignore[valid-type, misc]
            def setup(self) -> None:
                super().setup()
                with outer._lock:
                    outer._connections.add(self.connection)

            def finish(self) -> None:
                with outer._lock:
                    outer._connections.discard(self.connection)
                super().finish()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._handler = Tracked
        self._tls = tls
        self._server = self._listen(port)
        self.port: int = self._server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def _listen(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), self._handler)
        server.daemon_threads = True
        if self._tls is not None:
            server.socket = self._tls.wrap_socket(server.socket, server_side=True)
        return server

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def kill(self) -> None:
        """Stop listening and drop every connection, at once."""
        if self._thread is not None and self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:  # a kept-alive connection would go on being served
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def restart(self) -> None:
        """Listen again on the same port, after ``kill``."""
        self._server = self._listen(self.port)
        self.start()


def self_signed(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A certificate for 127.0.0.1/localhost and its key (PEM files)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path
