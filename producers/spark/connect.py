"""Spark Connect clients as runs: one run per client session of a Connect server.

A Connect server runs every client's work in a session of its own. The server
tells its listener bus about each operation (``SparkListenerConnectOperation*``:
session id, user, the client's ``spark.addTag`` tags, statement text); the hooks
pass those on as plain values (``SparkCallbacks.on_connect_event``) and report each
action with its session (``on_connect_action``).

With ``per_session`` (lineagewire's shared server, ``connect_server.py``), a client
session becomes a run at its first operation, a child of the server's application
run, and ends FINISHED when the client closes it (or with the server). Its name,
first found of: the client's ``spark.lineagewire.job_name`` setting, its
``spark.app.name`` when it is not the server's, ``connect.<user id>``. Its spec's
tags say who and what: ``connect.session_id``, ``connect.user_id``,
``connect.user_name``, ``connect.tags`` (the client's ``spark.addTag`` tags,
comma-separated) and ``connect.statement`` (the first operation's text, cut at
2,000 characters).

Without ``per_session`` (``remote("local")`` under ``lineagewire instrument``: the
process's own server with its one client), the client's actions go to the
application run, as a classic session's do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lineagewire.schemas.events import ErrorInfo

from .runs import Run

__all__ = ["ConnectRuns"]

_STATEMENT_CHARS = 2_000


class ConnectRuns:
    """The runs of one emitter's Connect client sessions (``start``/``end`` are the emitter's, as for streams)."""

    def __init__(self, namespace: str, parent: Run, spec: dict[str, Any], *, per_session: bool,
                 lock: threading.RLock, start: Callable[[Run, dict[str, Any]], None],
                 end: Callable[[Run, str, ErrorInfo | None], None]) -> None:
        self.namespace = namespace
        self.parent = parent
        self.spec = spec
        self.per_session = per_session
        self._lock = lock
        self._start = start
        self._end = end
        self._runs: dict[str, Run] = {}  # session id -> its run
        #: operations the server reported, and those that failed
        self.operations = 0
        self.operations_failed = 0

    def event(self, kind: str, fields: dict[str, Any]) -> None:
        """One Connect event (see ``SparkCallbacks.on_connect_event``)."""
        if kind == "OperationStarted":
            self.operations += 1
            if self.per_session:
                self._session_run(fields)
        elif kind == "OperationFailed":
            self.operations_failed += 1
        elif kind == "SessionClosed":
            with self._lock:
                run = self._runs.pop(fields["session_id"], None)
                if run is not None:
                    self._end(run, "FINISHED", None)

    def run_of(self, session_id: str) -> Run | None:
        """The run of a client session; None without per-session runs (or for a session not seen yet)."""
        with self._lock:
            return self._runs.get(session_id)

    def end_all(self, status: str, error: ErrorInfo | None) -> None:
        """The server stops: every open session run ends with ``status``."""
        with self._lock:
            for run in self._runs.values():
                self._end(run, status, error)
            self._runs.clear()

    def _session_run(self, fields: dict[str, Any]) -> None:
        session_id = fields["session_id"]
        with self._lock:
            if session_id in self._runs:
                return
            conf = fields.get("conf") or {}
            app_name = conf.get("spark.app.name")
            name = (conf.get("spark.lineagewire.job_name")
                    or (app_name if app_name and app_name != self.spec.get("application_name") else None)
                    or f"connect.{fields.get('user_id') or 'anonymous'}")
            tags = {"connect.session_id": session_id, "connect.user_id": fields.get("user_id", ""),
                    "connect.user_name": fields.get("user_name", ""),
                    "connect.tags": ",".join(fields.get("session_tags") or ()),
                    "connect.statement": (fields.get("statement_text") or "")[:_STATEMENT_CHARS]}
            run = Run(conf.get("spark.lineagewire.namespace") or self.namespace, name, parent=self.parent.ref,
                      root_parent=self.parent.child_root)
            self._runs[session_id] = run
            self._start(run, {**self.spec, "tags": {k: v for k, v in tags.items() if v}, "job_type": "BATCH"})
