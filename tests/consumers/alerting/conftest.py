"""Fixtures of the alerting tests: real HTTP, SMTP and Alertmanager receivers on 127.0.0.1."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import self_signed

from .receivers import Alertmanager, HttpReceiver


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    with HttpReceiver() as r:
        yield r


@pytest.fixture
def smtp_server(tmp_path) -> Iterator[dict[str, Any]]:  # noqa: ANN001
    """aiosmtpd on 127.0.0.1 requiring STARTTLS and AUTH (user alerts / pass pw); ``messages`` collects mails."""
    import ssl

    aiosmtpd = pytest.importorskip("aiosmtpd.controller", reason="aiosmtpd is not installed (pip install aiosmtpd)")
    from aiosmtpd.smtp import AuthResult, LoginPassword

    from .receivers import free_port

    cert, key = self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    messages: list[Any] = []
    logins: list[str] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
            messages.append(envelope)
            return "250 OK"

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and data.login == b"alerts" and data.password == b"pw"
        if ok:
            logins.append(mechanism)
        return AuthResult(success=ok)

    port = free_port()
    controller = aiosmtpd.Controller(Handler(), hostname="127.0.0.1", port=port, tls_context=tls,
                                     require_starttls=True, authenticator=authenticator, auth_require_tls=True)
    controller.start()
    try:
        yield {"host": "127.0.0.1", "port": port, "ca_file": str(cert), "messages": messages, "logins": logins}
    finally:
        controller.stop()


@pytest.fixture
def alertmanager(tmp_path, http_receiver: HttpReceiver) -> Iterator[Alertmanager]:  # noqa: ANN001
    """A real Alertmanager whose own webhook receiver is ``http_receiver`` (path /am-webhook)."""
    if not (shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")):
        print("SKIP reason: prometheus-alertmanager is not installed (apt-get install -y prometheus-alertmanager)")
        pytest.skip("prometheus-alertmanager is not installed; install it with "
                    "`apt-get install -y prometheus-alertmanager`")
    am = Alertmanager(tmp_path / "am", http_receiver.url)
    am.start()
    try:
        yield am
    finally:
        am.stop()
