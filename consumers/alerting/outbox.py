"""Delivery from the outbox: every notification is a row until a channel took it.

A channel that fails is retried with exponential backoff (``initial`` * 2^n
seconds, capped at ``maximum``, plus jitter) for as long as it takes; rows
wait in the database meanwhile, so a down channel, or a service restart,
loses nothing, and the other channels go on. A refusal that will not change
(HTTP 400, SMTP 5xx) marks the row ``failed`` (kept, listed by
``lineagewire alerts outbox``) and is logged as an error.
"""

from __future__ import annotations

import datetime as dt
import logging
import random

from .channels import Channel
from .exceptions import ChannelError
from .model import Notification
from .store import AlertStore

log = logging.getLogger(__name__)

__all__ = ["Outbox"]


class Outbox:
    """Delivers due outbox rows of ``store`` through ``channels``."""

    def __init__(self, store: AlertStore, channels: dict[str, Channel], *, initial: float = 1.0,
                 maximum: float = 300.0) -> None:
        self.store = store
        self.channels = channels
        self.initial = initial
        self.maximum = maximum
        self._down_until: dict[str, dt.datetime] = {}
        self.delivered = 0
        self.failures = 0

    def backoff(self, attempts: int) -> float:
        return min(self.initial * 2 ** max(attempts - 1, 0), self.maximum) * (1 + 0.1 * random.random())

    def deliver(self, now: dt.datetime, limit: int = 200) -> int:
        """Try every due row once (skipping channels known to be down); how many were delivered."""
        sent = 0
        for row in self.store.due_outbox(now, limit):
            until = self._down_until.get(row.channel)
            if until is not None and now < until:
                continue
            channel = self.channels.get(row.channel)
            attempts = row.attempts + 1
            try:
                if channel is None:
                    raise ChannelError(f"channel {row.channel!r} is not in the rules file (any more); the "
                                       "notification waits until it is")
                channel.send(Notification.from_json(row.payload))
            except Exception as exc:  # noqa: BLE001 - whatever a channel raises, the row must stay
                self.failures += 1
                retryable = not isinstance(exc, ChannelError) or exc.retryable
                if not retryable:
                    log.error("outbox row %s: %s; not retried (see `lineagewire alerts outbox`)", row.id, exc)
                    self.store.mark_outbox(row.id, state="failed", attempts=attempts, now=now, error=str(exc))
                    continue
                delay = self.backoff(attempts)
                retry_at = now + dt.timedelta(seconds=delay)
                self._down_until[row.channel] = retry_at
                log.warning("outbox row %s: %s; attempt %d failed, next in %.1fs", row.id, exc, attempts, delay)
                self.store.mark_outbox(row.id, state="pending", attempts=attempts, now=now,
                                       next_attempt_at=retry_at, error=str(exc))
                continue
            self._down_until.pop(row.channel, None)
            self.store.mark_outbox(row.id, state="delivered", attempts=attempts, now=now)
            sent += 1
        self.delivered += sent
        return sent
