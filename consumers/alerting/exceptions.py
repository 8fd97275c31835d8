"""Errors of the alerting service.

    LineagewireError
    ├── ConfigError (lineagewire.exceptions)
    │   └── RulesError            the rules file is wrong: names the rule/channel, the field and what was expected
    └── ConsumerError (lineagewire.consumers.runtime)
        ├── OutputError
        │   └── StoreError        the alert database is unreachable (the event is retried with backoff)
        └── ChannelError          a channel did not take a notification; ``retryable`` says whether to try again

A ``ChannelError`` never reaches the runtime: notifications wait in the outbox
(a table of the alert database) and are retried there, so a down channel
neither blocks consumption nor loses an alert.
"""

from __future__ import annotations

from lineagewire.consumers.runtime.exceptions import ConsumerError, OutputError
from lineagewire.exceptions import ConfigError

__all__ = ["ChannelError", "RulesError", "StoreError"]


class RulesError(ConfigError):
    """The rules file (or a rule, channel or silence given on the command line) is invalid."""


class StoreError(OutputError):
    """The alert database could not be read or written."""


class ChannelError(ConsumerError):
    """A channel failed to deliver; ``retryable`` False means the receiver refused it for good (HTTP 4xx)."""

    def __init__(self, message: str, *, retryable: bool = True, code: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.code = code
