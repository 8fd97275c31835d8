"""The ``file`` listener: events as JSON lines, for debugging (``spark.lineagewire.file_path``)."""

from __future__ import annotations

import json
import pathlib
import threading
from typing import Any

from lineagewire.schemas import to_jsonable

from .base import JobStatusListener, JobStatusListenerFactory, ListenerContext

__all__ = ["FileListener", "FileListenerFactory"]


class FileListener(JobStatusListener):
    """Appends each event as one JSON object per line (datetimes as ISO-8601 UTC) and flushes it."""

    def __init__(self, path: str | pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8")

    def on_event(self, event: dict[str, Any]) -> None:
        line = json.dumps(to_jsonable(event), separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self, timeout: float) -> None:
        with self._lock:
            self._file.close()


class FileListenerFactory(JobStatusListenerFactory):
    def create_listener(self, context: ListenerContext) -> JobStatusListener:
        return FileListener(context.config.file_path)
