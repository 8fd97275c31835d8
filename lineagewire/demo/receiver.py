"""A local HTTP endpoint standing in for the demo's backends.

It accepts JSON POSTs on any path (an OpenLineage server's ``/api/v1/lineage``,
an alert webhook's ``/alerts``), keeps them in memory by path and appends each
to ``<folder>/<path>.jsonl``. It binds 127.0.0.1 only. The standard library's
``http.server`` is enough for a demo that receives a few dozen requests.
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Receiver"]


class Receiver:
    """Records JSON POSTs by path; ``received(path)`` returns them in arrival order."""

    def __init__(self, folder: pathlib.Path) -> None:
        self.folder = folder
        self._events: dict[str, list[Any]] = defaultdict(list)
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    doc = json.loads(body)
                except ValueError:
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver._record(self.path.split("?", 1)[0], doc)
                self.send_response(201 if self.path.startswith("/api/v1/lineage") else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="demo-receiver", daemon=True)
        self._thread.start()

    def file_for(self, path: str) -> pathlib.Path:
        return self.folder / (path.strip("/").replace("/", "_") + ".jsonl")

    def _record(self, path: str, doc: Any) -> None:
        with self._lock:
            self._events[path].append(doc)
            with self.file_for(path).open("a") as f:
                f.write(json.dumps(doc) + "\n")

    def received(self, path: str) -> list[Any]:
        with self._lock:
            return list(self._events.get(path, ()))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
