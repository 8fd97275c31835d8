"""Slack incoming webhook: one message per group notification, Block Kit with a plain-text fallback.

Slack answers 200 ``ok``; 400/403/404 (``invalid_payload``, ``no_service``...) are not retried.
"""

from __future__ import annotations

from typing import Any

from lineagewire.consumers.alerting.model import AlertView, Notification
from lineagewire.consumers.alerting.secrets import Secret

from . import register
from .base import ChannelConfig, HttpChannel

_MAX_ALERTS = 20  # Slack takes at most 50 blocks; the rest are counted in the footer


class SlackConfig(ChannelConfig):
    url: Secret
    channel: str | None = None
    username: str | None = None


def _alert_block(a: AlertView) -> dict[str, Any]:
    mark = ":red_circle:" if a.status == "firing" else ":large_green_circle:"
    labels = ", ".join(f"`{k}={v}`" for k, v in sorted(a.labels.items()) if k not in ("alertname", "severity"))
    text = f"{mark} *{a.summary[:500]}*\n{labels}"
    if a.status == "firing" and a.annotations.get("stack"):
        text += f"\n```{a.annotations['stack'][:1500]}```"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


@register
class SlackChannel(HttpChannel):
    type = "slack"
    Config = SlackConfig

    def payload(self, n: Notification) -> dict[str, Any]:
        text = self.templates.render("slack.txt.j2", n, self.name).strip()
        header = f"[{n.status.upper()}] {' '.join(n.group_labels.values()) or 'lineagewire'}"[:150]
        blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": header}}]
        blocks += [_alert_block(a) for a in n.alerts[:_MAX_ALERTS]]
        more = len(n.alerts) - _MAX_ALERTS
        footer = f"lineagewire alerting · {len(n.firing)} firing, {len(n.resolved)} resolved"
        if more > 0:
            footer += f" · {more} more not shown"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": footer}]})
        body: dict[str, Any] = {"text": text, "blocks": blocks}
        if self.config.channel:
            body["channel"] = self.config.channel
        if self.config.username:
            body["username"] = self.config.username
        return body

    def send(self, notification: Notification) -> None:
        self.post(self.config.url.get_secret_value(), json=self.payload(notification))
