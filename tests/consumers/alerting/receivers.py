"""Real receivers on 127.0.0.1: an HTTP server playing Slack, PagerDuty and a webhook; an SMTP server
(aiosmtpd) with STARTTLS and AUTH; and Debian's Alertmanager, started in a temporary folder."""

from __future__ import annotations

import json
import pathlib
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx

from lineagewire.processes import stop_process
from tests.helpers import LocalServer, wait_for


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class HttpReceiver:
    """Records every POST; ``codes[path]`` sets the answer (default: Slack's 200 ``ok``, PagerDuty's 202)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.codes: dict[str, int] = {}
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                code = outer.codes.get(self.path, 202 if self.path.startswith("/v2/enqueue") else 200)
                if code < 300:
                    with outer._lock:
                        outer.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                      body, time.monotonic()))
                answer = b"ok" if code < 300 else b'{"status":"invalid event"}'
                self.send_response(code)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._http = LocalServer(_H)
        self.url = self._http.url

    def on(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def wait(self, path: str, predicate: Callable[[list[Request]], bool], timeout: float = 30) -> list[Request]:
        return wait_for(lambda: (lambda got: got if predicate(got) else None)(self.on(path)), timeout=timeout)

    def __enter__(self) -> HttpReceiver:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Alertmanager:
    """Debian's prometheus-alertmanager on 127.0.0.1 with a generated config (no clustering)."""

    def __init__(self, folder: pathlib.Path, webhook_url: str) -> None:
        self.binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = folder / "am.yml"
        self.config.write_text(
            "route:\n  receiver: hook\n  group_by: [alertname]\n  group_wait: 1s\n  group_interval: 1s\n"
            "  repeat_interval: 1h\n"
            f"receivers:\n  - name: hook\n    webhook_configs:\n      - url: {webhook_url}/am-webhook\n"
            "        send_resolved: true\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Alertmanager:
        assert self.binary is not None
        self.log = open(self.folder / "am.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={self.config}", f"--storage.path={self.folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
            stdout=self.log, stderr=subprocess.STDOUT)

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"alertmanager exited: {(self.folder / 'am.log').read_text()[-2000:]}")
            try:
                return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, timeout=60)
        return self

    def alerts(self) -> list[dict[str, Any]]:
        return list(httpx.get(f"{self.url}/api/v2/alerts", timeout=5).json())

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, 20)
            self.log.close()
