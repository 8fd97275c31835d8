"""The channel plugin: one kind of receiver (Slack, PagerDuty, a webhook, mail, Alertmanager).

Contract
--------
* A channel kind is a ``Channel`` subclass in its own module of this package,
  decorated with ``@register``; the rules file names it by ``type``. Outside
  packages register kinds under the entry-point group ``lineagewire.alert_channels``.
* ``Config``: a pydantic model of its settings; secrets are ``Secret`` fields
  (``{env: NAME}`` / ``{file: PATH}``), never logged.
* ``send(notification)`` delivers one group notification (firing and newly
  resolved alerts) synchronously. It raises ``ChannelError`` when the
  receiver did not take it: ``retryable=False`` for a refusal that will not
  change (HTTP 400), else the outbox tries again with backoff. Sending the
  same notification twice must be harmless (receivers dedupe by fingerprint
  / dedup_key, or a person sees one repeat).
* ``resend_interval``: for receivers that expire alerts they are not told
  about again (Alertmanager), the service calls ``send`` with the alerts
  still firing at least this often.
* Called from the service's one thread; ``close()`` once at shutdown.
"""

from __future__ import annotations

import builtins
import logging
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from lineagewire.consumers.alerting.exceptions import ChannelError
from lineagewire.consumers.alerting.model import Notification
from lineagewire.consumers.alerting.secrets import redact_url
from lineagewire.consumers.alerting.templates import Templates
from lineagewire.exceptions import require

__all__ = ["Channel", "ChannelConfig", "HttpChannel"]

log = logging.getLogger(__name__)


class ChannelConfig(BaseModel):
    """Settings every channel has."""

    model_config = ConfigDict(extra="forbid")

    type: str
    timeout: float = Field(10.0, gt=0, description="seconds per delivery attempt")
    send_resolved: bool = True


class Channel:
    """Base class of channel kinds; see the module docstring."""

    type: ClassVar[str] = ""
    Config: ClassVar[builtins.type[ChannelConfig]] = ChannelConfig  # (``type`` is the class variable above)
    resend_interval: float | None = None

    def __init__(self, name: str, config: ChannelConfig, *, templates: Templates | None = None) -> None:
        self.name = name
        self.config: Any = config
        self.templates = templates or Templates()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def send(self, notification: Notification) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release connections."""


class HttpChannel(Channel):
    """A channel that POSTs JSON with httpx; maps transport errors and status codes to ``ChannelError``.

    ``transport``: an httpx transport to use instead of the network (tests of error handling).
    """

    #: status codes a receiver uses for "try later"
    RETRY_CODES: ClassVar[frozenset[int]] = frozenset({408, 425, 429})

    def __init__(self, name: str, config: ChannelConfig, *, templates: Templates | None = None,
                 transport: Any = None) -> None:
        super().__init__(name, config, templates=templates)
        self._httpx = require("httpx", "alerting", f"The {self.type} alert channel")
        # Requests go straight to the transport, not through httpx.Client: the client logs every request's
        # full URL at INFO, and for Slack (and many webhooks) the URL is the secret.
        self._transport = transport or self._httpx.HTTPTransport(retries=0)
        self._timeout = self._httpx.Timeout(config.timeout).as_dict()

    def post(self, url: str, *, json: Any = None, content: bytes | None = None,
             headers: dict[str, str] | None = None) -> Any:
        where = f"channel {self.name} ({self.type}, {redact_url(url)})"
        httpx = self._httpx
        try:
            request = httpx.Request("POST", url, json=json, content=content, headers=headers,
                                    extensions={"timeout": self._timeout})
            resp = self._transport.handle_request(request)
            try:
                resp.read()
            finally:
                resp.close()
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            # The exception text may carry the URL: name the error class and the receiver's host only.
            raise ChannelError(f"{where}: {type(exc).__name__}") from None
        if resp.status_code >= 300:
            retryable = resp.status_code >= 500 or resp.status_code in self.RETRY_CODES
            raise ChannelError(f"{where}: HTTP {resp.status_code}: {resp.text[:300]}",
                               retryable=retryable, code=resp.status_code)
        return resp

    def close(self) -> None:
        self._transport.close()
