"""A recording channel and a hand-driven clock for lifecycle tests (no network)."""

from __future__ import annotations

from typing import Any

from lineagewire.consumers.alerting.channels import Channel, ChannelConfig
from lineagewire.consumers.alerting.exceptions import ChannelError
from lineagewire.consumers.alerting.model import Notification
from lineagewire.consumers.runtime.record import Record

from .events import T0


class Recorder(Channel):
    type = "recorder"

    def __init__(self, name: str = "rec", resend_interval: float | None = None) -> None:
        super().__init__(name, ChannelConfig(type="recorder"))
        self.sent: list[Notification] = []
        self.down = False
        self.attempts = 0
        self.resend_interval = resend_interval

    def send(self, notification: Notification) -> None:
        self.attempts += 1
        if self.down:
            raise ChannelError(f"channel {self.name}: receiver down")
        self.sent.append(notification)

    def statuses(self) -> list[tuple[str, str]]:
        """(alertname, firing|resolved) of every alert in every notification, in order."""
        return [(a.labels["alertname"], a.status) for n in self.sent for a in n.alerts]


class Clock:
    def __init__(self, start: float = T0.timestamp()) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def record(event: dict[str, Any], offset: int = 0, partition: int = 0) -> Record:
    return Record("lineage.jobs", partition, offset, None, 0, event)
