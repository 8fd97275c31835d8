"""Email over SMTP (smtplib): one mail per group notification, plain text plus HTML from the templates.

``starttls`` (default) upgrades the connection before ``username``/``password``
authentication; ``ssl`` uses SMTPS from the start instead. ``ca_file`` trusts
a private CA. A 5xx answer (refused recipient, bad credentials) is not retried.
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from pydantic import Field

from lineagewire.consumers.alerting.exceptions import ChannelError
from lineagewire.consumers.alerting.model import Notification
from lineagewire.consumers.alerting.secrets import Secret

from . import register
from .base import Channel, ChannelConfig


class EmailConfig(ChannelConfig):
    host: str
    port: int = Field(587, gt=0, lt=65536)
    sender: str
    to: list[str] = Field(..., min_length=1)
    starttls: bool = True
    ssl: bool = False
    username: str | None = None
    password: Secret | None = None
    ca_file: str | None = None


@register
class EmailChannel(Channel):
    type = "email"
    Config = EmailConfig

    def message(self, n: Notification) -> EmailMessage:
        msg = EmailMessage()
        msg["Subject"] = self.templates.render("email_subject.txt.j2", n, self.name).strip()
        msg["From"] = self.config.sender
        msg["To"] = ", ".join(self.config.to)
        msg["Date"] = formatdate(localtime=False)
        msg["Message-ID"] = make_msgid(domain="lineagewire")
        msg.set_content(self.templates.render("email.txt.j2", n, self.name))
        msg.add_alternative(self.templates.render("email.html.j2", n, self.name), subtype="html")
        return msg

    def send(self, notification: Notification) -> None:
        c = self.config
        where = f"channel {self.name} (email, {c.host}:{c.port})"
        context = ssl.create_default_context(cafile=c.ca_file)
        try:
            smtp: smtplib.SMTP
            if c.ssl:
                smtp = smtplib.SMTP_SSL(c.host, c.port, timeout=c.timeout, context=context)
            else:
                smtp = smtplib.SMTP(c.host, c.port, timeout=c.timeout)
            with smtp:
                if c.starttls and not c.ssl:
                    smtp.starttls(context=context)
                if c.username:
                    smtp.login(c.username, c.password.get_secret_value() if c.password else "")
                smtp.send_message(self.message(notification))
        except smtplib.SMTPResponseException as exc:
            raise ChannelError(f"{where}: SMTP {exc.smtp_code}: {exc.smtp_error!r}",
                               retryable=exc.smtp_code < 500, code=exc.smtp_code) from exc
        except smtplib.SMTPRecipientsRefused as exc:
            raise ChannelError(f"{where}: recipients refused: {', '.join(exc.recipients)}", retryable=False) from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise ChannelError(f"{where}: {type(exc).__name__}: {exc}") from exc
