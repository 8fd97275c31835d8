"""Tunables of the embedded scheduler, as a validated pydantic model.

``SchedulerOptions`` is what code passes to ``EmbeddedWorkflowScheduler``;
the service's ``ServiceConfig`` (``service.py``) extends it, so the same
fields are read from flags, ``LINEAGEWIRE_SCHEDULER__<FIELD>`` and the
``scheduler:`` section of the YAML config, with the same checks.
"""

from __future__ import annotations

import os
import socket
import uuid

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MAX_SECONDS", "SchedulerOptions"]

#: the longest duration any option accepts (a year): larger values overflow date arithmetic
MAX_SECONDS = 366 * 86_400.0


def _instance() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class SchedulerOptions(BaseModel):
    """Tunables of the embedded scheduler (seconds unless said otherwise).

    ``lead``: claim fires up to this long before their nominal time and hold the commands in memory,
    so at the nominal time only sending is left (the service uses 2 s; 0 claims at the nominal time).
    ``instance``: the name this instance writes into ``claimed_by`` of the refreshes it claims.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    misfire_grace: float = Field(default=60.0, ge=0, le=MAX_SECONDS,
                                 description="Seconds late before a fire counts as missed")
    max_attempts: int = Field(default=3, ge=1, le=100, description="Attempts per refresh, retries included")
    retry_backoff: float = Field(default=30.0, ge=0, le=MAX_SECONDS,
                                 description="Seconds before the first retry (doubles)")
    retry_backoff_max: float = Field(default=900.0, ge=0, le=MAX_SECONDS, description="Longest delay between retries")
    abandon_after: float = Field(default=600.0, gt=0, le=MAX_SECONDS,
                                 description="Seconds without status after publishing before ABANDONED")
    run_timeout: float | None = Field(default=6 * 3600.0, gt=0, le=MAX_SECONDS,
                                      description="Seconds RUNNING without a final status before ABANDONED")
    batch_size: int = Field(default=1000, ge=1, le=100_000, description="Fires claimed and published per round")
    republish_after: float = Field(default=15.0, gt=0, le=MAX_SECONDS,
                                   description="Seconds before an unconfirmed claim is published again")
    max_backfill: int = Field(default=1000, ge=1, le=100_000, description="Most nominal times one backfill may fire")
    poll_interval: float = Field(default=1.0, gt=0, le=3600, description="Longest sleep of the loop")
    lead: float = Field(default=0.0, ge=0, le=60, description="Claim fires this many seconds ahead and hold them")
    instance: str = Field(default_factory=_instance, min_length=1, max_length=200,
                          description="Name of this instance in claimed_by")

    @model_validator(mode="after")
    def _held_claims_are_not_stale(self) -> SchedulerOptions:
        if self.republish_after <= self.lead:
            # a claim held for up to `lead` seconds must not look abandoned to other instances
            raise ValueError(f"republish_after={self.republish_after}; expected more than lead={self.lead}")
        return self

    def backoff(self, attempt: int) -> float:
        """Delay before attempt ``attempt + 1``: exponential, capped."""
        return min(self.retry_backoff * 2 ** min(attempt - 1, 60), self.retry_backoff_max)
