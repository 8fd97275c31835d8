"""Whether a dataset's freshness promise (``lineagewire.freshness``) is kept, for its page.

Kept: its last successful write (by a run that ended FINISHED, from the registry) is within the promised
freshness, or is past it outside the promise's business hours; stale: past it; never written: no successful
write is known. The same rule as the alerting service's ``dataset_stale``, read from the registry instead of
its own state, so the page and the page-out agree.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = ["promise_state"]


def promise_state(promise: Any, write: dict[str, Any] | None, now: dt.datetime) -> dict[str, Any] | None:
    """The page's view of ``promise`` (a ``lineagewire.freshness.Promise``, None: no promise) given the dataset's
    last successful ``write`` (``queries.last_successful_write``, None: none known) at ``now``:
    ``{"promise", "text", "state": kept|stale|never_written, "due", "last_write"}``."""
    if promise is None:
        return None
    out: dict[str, Any] = {"promise": promise, "text": promise.describe(), "last_write": write, "due": None}
    if write is None:
        return {**out, "state": "never_written"}
    due = promise.due(write["at"])
    return {**out, "due": due, "state": "stale" if promise.stale(write["at"], now) else "kept"}
