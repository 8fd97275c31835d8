"""Prometheus Alertmanager: ``POST /api/v2/alerts``, so teams reuse their Alertmanager routing.

Alertmanager forgets an alert it is not told about again (``resolve_timeout``),
so like Prometheus the channel re-sends the alerts still firing every
``resend_interval`` with ``endsAt`` four intervals ahead; a resolved alert is
sent with its ``endsAt``, which closes it at once. Silencing and inhibition
in Alertmanager apply on top of ours.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field

from lineagewire.consumers.alerting.model import Notification, iso
from lineagewire.consumers.alerting.secrets import Secret

from . import register
from .base import ChannelConfig, HttpChannel


class AlertmanagerConfig(ChannelConfig):
    url: str = Field(..., description="Alertmanager's base URL, e.g. http://127.0.0.1:9093")
    resend_interval: float = Field(60.0, gt=0)
    headers: dict[str, Secret] = {}
    generator_url: str = ""


@register
class AlertmanagerChannel(HttpChannel):
    type = "alertmanager"
    Config = AlertmanagerConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.resend_interval = self.config.resend_interval

    def alerts(self, n: Notification) -> list[dict[str, Any]]:
        lease = n.sent_at + dt.timedelta(seconds=4 * self.config.resend_interval)
        out = []
        for a in n.alerts:
            # Alertmanager keeps the later of two endsAt unless the newer one is already past: a resolve must
            # end no later than now, even when the run's transition time is ahead of this clock.
            ends = min(a.ends_at or n.sent_at, n.sent_at) if a.status == "resolved" else lease
            starts = min(a.starts_at, ends - dt.timedelta(milliseconds=1))  # Alertmanager wants start < end
            out.append({"labels": a.labels, "annotations": a.annotations, "startsAt": iso(starts),
                        "endsAt": iso(ends), "generatorURL": self.config.generator_url})
        return out

    def send(self, notification: Notification) -> None:
        headers = {k: v.get_secret_value() for k, v in self.config.headers.items()}
        self.post(self.config.url.rstrip("/") + "/api/v2/alerts", json=self.alerts(notification), headers=headers)
