"""One-shot commands against a cluster that is not there answer within the connect timeout (issue 34).

No broker fixture: a port bound by the test but not listening (Linux refuses connections to it, and no
other process can take it meanwhile), a host name that cannot resolve, and a server that speaks no TLS
to a TLS client. Each command must exit 2 with one line naming the servers, librdkafka's reason and the
next step.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from lineagewire.config import Settings
from lineagewire.exceptions import BrokerUnavailableError
from lineagewire.kafka import cluster
from lineagewire.kafka.cluster import connect
from lineagewire.kafka.reader import TopicReader
from tests.helpers import LocalServer

BAD_HOST = "nonexistent.invalid:9092"


@pytest.fixture
def dead_servers() -> Iterator[str]:
    """``127.0.0.1:PORT`` of a socket bound for the test's duration without listen(): connections to it are
    refused, and no other process can start listening on the port while the test runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    """Run ``lineagewire ARGS``; (its one stderr line, seconds it took). Exit 2, no traceback, nothing else."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGEWIRE_", "OPENLINEAGE"))}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True, timeout=90,
                       env={**base, **(env or {})}, stdin=subprocess.DEVNULL, check=False)
    took = time.monotonic() - t0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    return lines[0], took


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [["subscribe", "--exit-at-end"], ["replay", "--into", "stdout"],
                                     ["topics", "create"], ["topics", "list"]])
def test_a_port_with_nothing_on_it_is_one_line_within_the_flag_s_timeout(command: list[str],
                                                                         dead_servers: str) -> None:
    servers = dead_servers
    line, took = _run("--bootstrap-servers", servers, "--connect-timeout", "2", *command)
    assert took < 12, f"{command} took {took:.1f}s with --connect-timeout 2"
    assert line.startswith(f"error: no broker answered at {servers} within 2s")
    assert "Connection refused" in line  # librdkafka's reason
    assert f"lineagewire kafka start --port {servers.rpartition(':')[2]}" in line and "--bootstrap-servers" in line


@pytest.mark.timeout(120)
def test_a_name_that_does_not_resolve_is_one_line_within_the_environment_s_timeout() -> None:
    line, took = _run("replay", "--into", "stdout",
                      env={"LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": BAD_HOST, "LINEAGEWIRE_KAFKA__CONNECT_TIMEOUT": "2"})
    assert took < 12, f"replay took {took:.1f}s with LINEAGEWIRE_KAFKA__CONNECT_TIMEOUT=2"
    assert f"no broker answered at {BAD_HOST} within 2s" in line
    assert "Failed to resolve" in line
    assert "kafka start" not in line and "check bootstrap_servers" in line  # not a local broker


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_the_default_timeout_bounds_a_command_with_no_setting(dead_servers: str) -> None:
    servers = dead_servers
    line, took = _run("--bootstrap-servers", servers, "subscribe")
    assert took < 25, f"subscribe took {took:.1f}s; expected about the default 10 s"
    assert f"no broker answered at {servers} within 10s" in line and "Connection refused" in line


def test_a_tls_failure_is_the_reason_and_the_security_settings_are_named() -> None:
    """A TLS client at a port whose server speaks no TLS (plain HTTP here): librdkafka's handshake failure."""
    server = LocalServer(BaseHTTPRequestHandler)
    server.start()
    servers = f"127.0.0.1:{server.port}"
    try:
        with pytest.raises(BrokerUnavailableError) as err:
            connect(Settings(bootstrap_servers=servers, connect_timeout=2, security={"security_protocol": "SSL"}))
    finally:
        server.kill()
    assert err.value.servers == servers
    assert err.value.reason is not None and "SSL handshake failed" in err.value.reason
    assert str(err.value).startswith(f"no broker answered at {servers} within 2s: ")
    assert "the security settings (LINEAGEWIRE_KAFKA__SECURITY__*)" in str(err.value)


def test_a_reader_asks_its_own_consumer_within_its_own_timeout(dead_servers: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """subscribe, replay and archive reads check the cluster on the reader's consumer (no AdminClient made and
    thrown away per reader), and a reader's timeout shorter than the connect timeout bounds the wait."""

    def no_admin(*args: object, **kwargs: object) -> None:
        raise AssertionError("TopicReader made an AdminClient of its own")

    monkeypatch.setattr(cluster, "AdminClient", no_admin)
    t0 = time.monotonic()
    with pytest.raises(BrokerUnavailableError) as err:
        TopicReader(Settings(bootstrap_servers=dead_servers, connect_timeout=10), "lineage.jobs", timeout=1)
    took = time.monotonic() - t0
    assert took < 6, f"the reader took {took:.1f}s with timeout=1"
    assert str(err.value).startswith(f"no broker answered at {dead_servers} within 1s: "), err.value
    assert err.value.reason is not None and "Connection refused" in err.value.reason, err.value
    assert "\n" not in str(err.value) and "expected a reachable Kafka cluster" in str(err.value)
