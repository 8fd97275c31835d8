"""PagerDuty Events API v2: one ``trigger`` per firing alert and one ``resolve`` per resolved alert,
``dedup_key`` = the alert's fingerprint, so PagerDuty folds repeats into one incident and closes it.

202 accepted; 400 (bad event) is not retried; 429 and 5xx are.
"""

from __future__ import annotations

from typing import Any

from lineagewire.consumers.alerting.model import AlertView, Notification, iso
from lineagewire.consumers.alerting.secrets import Secret

from . import register
from .base import ChannelConfig, HttpChannel

#: our severities -> PagerDuty's (critical, error, warning, info)
_SEVERITY = {"critical": "critical", "error": "error", "warning": "warning", "info": "info"}


class PagerDutyConfig(ChannelConfig):
    routing_key: Secret
    url: str = "https://events.pagerduty.com/v2/enqueue"
    client: str = "lineagewire"


@register
class PagerDutyChannel(HttpChannel):
    type = "pagerduty"
    Config = PagerDutyConfig

    def event(self, a: AlertView) -> dict[str, Any]:
        key = self.config.routing_key.get_secret_value()
        if a.status == "resolved":
            return {"routing_key": key, "event_action": "resolve", "dedup_key": a.fingerprint}
        return {
            "routing_key": key, "event_action": "trigger", "dedup_key": a.fingerprint, "client": self.config.client,
            "payload": {
                "summary": a.summary[:1024],
                "source": f"{a.labels.get('namespace', '')}/{a.labels.get('job', '')}"[:255],
                "severity": _SEVERITY.get(a.labels.get("severity", ""), "error"),
                "timestamp": iso(a.starts_at),
                "component": a.labels.get("job"),
                "group": a.labels.get("namespace"),
                "class": a.labels.get("kind"),
                "custom_details": {"labels": a.labels, "annotations": a.annotations},
            },
        }

    def send(self, notification: Notification) -> None:
        for a in notification.alerts:
            self.post(self.config.url, json=self.event(a))
