"""Generic webhook: the Alertmanager webhook JSON (version 4) POSTed to a URL, optionally signed.

With ``hmac_secret`` the body's HMAC-SHA256 goes in ``X-Lineagewire-Signature: sha256=<hex>``
(``signature_header`` renames it), so the receiver can check the sender.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from lineagewire.consumers.alerting.model import Notification, iso
from lineagewire.consumers.alerting.secrets import Secret

from . import register
from .base import ChannelConfig, HttpChannel


class WebhookConfig(ChannelConfig):
    url: Secret
    hmac_secret: Secret | None = None
    signature_header: str = "X-Lineagewire-Signature"
    headers: dict[str, Secret] = {}


def body(n: Notification, receiver: str) -> dict[str, Any]:
    """The Alertmanager webhook payload of ``n``."""
    common_ann: dict[str, str] = {}
    if n.alerts:
        first = n.alerts[0].annotations
        common_ann = {k: v for k, v in first.items() if all(a.annotations.get(k) == v for a in n.alerts[1:])}
    return {
        "version": "4", "groupKey": n.group_key, "status": n.status, "receiver": receiver,
        "groupLabels": n.group_labels, "commonLabels": n.common_labels, "commonAnnotations": common_ann,
        "truncatedAlerts": 0,
        "alerts": [{"status": a.status, "labels": a.labels, "annotations": a.annotations,
                    "startsAt": iso(a.starts_at), "endsAt": iso(a.ends_at) or "0001-01-01T00:00:00Z",
                    "fingerprint": a.fingerprint, "generatorURL": ""} for a in n.alerts],
    }


@register
class WebhookChannel(HttpChannel):
    type = "webhook"
    Config = WebhookConfig

    def send(self, notification: Notification) -> None:
        content = json.dumps(body(notification, self.name), separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json",
                   **{k: v.get_secret_value() for k, v in self.config.headers.items()}}
        if self.config.hmac_secret is not None:
            digest = hmac.new(self.config.hmac_secret.get_secret_value().encode(), content, hashlib.sha256)
            headers[self.config.signature_header] = f"sha256={digest.hexdigest()}"
        self.post(self.config.url.get_secret_value(), content=content, headers=headers)
