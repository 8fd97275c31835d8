"""Unit tests of the py4j helpers that need no JVM: the quick-ACK socket swap."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from lineagewire.producers.spark.lineage.jvm import quick_acks


class _Client:
    def __init__(self, conn: object) -> None:
        self.conn = conn

    def get_thread_connection(self) -> object:
        return self.conn


@pytest.fixture
def tcp_pair() -> tuple[socket.socket, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    server.close()
    yield client, peer
    client.close()
    peer.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux only")
def test_quick_acks_wraps_the_thread_connection_socket_and_restores_it(tcp_pair) -> None:
    client, peer = tcp_pair
    conn = SimpleNamespace(socket=client)
    jobj = SimpleNamespace(_gateway_client=_Client(conn))
    with quick_acks(jobj):
        assert conn.socket is not client
        conn.socket.sendall(b"c\nt\ntoJSON\ne\n")  # still sends, and still looks like the socket
        assert conn.socket.fileno() == client.fileno()
        with quick_acks(jobj):  # nested: no second wrapper
            assert conn.socket.sendall.__self__._sock is client
    assert conn.socket is client
    assert peer.recv(100) == b"c\nt\ntoJSON\ne\n"


def test_quick_acks_leaves_a_closed_connection_alone(tcp_pair) -> None:
    conn = SimpleNamespace(socket=tcp_pair[0])
    with quick_acks(SimpleNamespace(_gateway_client=_Client(conn))):
        conn.socket = None  # what py4j does when it closes a connection
    assert conn.socket is None


@pytest.mark.parametrize("jobj", [
    object(),  # not a py4j object
    SimpleNamespace(_gateway_client=object()),  # the pooled GatewayClient: no thread connection
    SimpleNamespace(_gateway_client=_Client(None)),  # no connection on this thread yet
])
def test_quick_acks_runs_unchanged_without_a_thread_connection(jobj: object) -> None:
    with quick_acks(jobj):
        pass


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux only")
def test_quick_acks_also_covers_the_reads_under_py4js_buffered_stream(tcp_pair, monkeypatch) -> None:
    client, peer = tcp_pair
    stream = client.makefile("rb")  # what py4j's ClientServerConnection reads answers through
    conn = SimpleNamespace(socket=client, stream=stream)
    jobj = SimpleNamespace(_gateway_client=_Client(conn))
    answer = b"y" + b"x" * 300_000 + b"\n"  # a plan-JSON-sized answer, several segments
    with quick_acks(jobj):
        wrapper = stream.raw._sock
        assert wrapper is not client and wrapper is conn.socket
        armed = []
        real = wrapper._quickack
        monkeypatch.setattr(wrapper, "_quickack", lambda: (armed.append(1), real())[1])
        peer.sendall(answer)
        assert stream.readline() == answer
        assert len(armed) >= 1, "quick-ACK set before the reads"
    assert conn.socket is client and stream.raw._sock is client
    peer.sendall(b"after\n")
    assert stream.readline() == b"after\n"  # the restored reader loses nothing
