"""The ``log`` listener: one line per event through ``logging`` (logger ``lineagewire.events``)."""

from __future__ import annotations

import logging
from typing import Any

from lineagewire.schemas import kind_of, summary

from .base import JobStatusListener, JobStatusListenerFactory, ListenerContext

__all__ = ["LogListener", "LogListenerFactory"]


class LogListener(JobStatusListener):
    """Logs ``<kind> <namespace>/<job> run=<id> #<sequence>: <summary>`` at the configured level."""

    def __init__(self, level: str = "INFO", logger: logging.Logger | None = None) -> None:
        self.level = logging.getLevelName(level)
        self.log = logger or logging.getLogger("lineagewire.events")

    def on_event(self, event: dict[str, Any]) -> None:
        h = event["header"]
        self.log.log(self.level, "%s %s/%s run=%s #%d: %s", kind_of(event), h["job_namespace"], h["job_name"],
                     h["run_id"], h["sequence"], summary(event))


class LogListenerFactory(JobStatusListenerFactory):
    def create_listener(self, context: ListenerContext) -> JobStatusListener:
        return LogListener(context.config.log_level)
