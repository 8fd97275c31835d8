"""Retries of the consumer runtime: which failures mean "output down", and the backoff loop.

Two kinds of failure, two policies:

* **Output down** (``is_outage``): ``OutputError`` and its subclasses, ``OSError``
  (connection refused, timeouts, ``requests``' errors), Kafka client errors, the
  connection errors of common client libraries (``OUTAGE_ERROR_NAMES``: SQLAlchemy's
  ``OperationalError``, httpx's ``TransportError``, urllib3's ``HTTPError``), and
  whatever the handler lists in ``Handler.retryable_errors``. Retried with
  exponential backoff until the output is back, the service stops, or
  ``RetryPolicy.give_up_after`` seconds passed (then the event is dead-lettered:
  ``GaveUpError``; for outputs an ``InFlight`` holds, the records whose outputs
  failed, see ``Handler.give_up``).
* **Anything else** is a bug in the handler (``KeyError``, ``TypeError``...):
  retried ``RetryPolicy.max_handler_retries`` times, as it may be a passing state,
  then dead-lettered as ``HandlerBugError`` with the exception's class, message and
  the tail of its traceback, so one bad event cannot stop the service.

``PermanentError`` is never retried: the event goes to the dead-letter topic at once.
An HTTP output raises it for an answer that says "never" (``refused_for_good``).
While retrying, the runtime pauses every assigned partition (``Retrier`` calls
its ``pause``/``resume``/``sleep`` callbacks), so nothing piles up in memory.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from lineagewire.exceptions import KafkaError

from .exceptions import GaveUpError, HandlerBugError, OutputError, PermanentError

try:
    from tenacity import RetryError, Retrying, retry_if_exception, stop_after_delay, wait_exponential_jitter
    from tenacity.stop import stop_base
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from lineagewire.exceptions import MissingExtraError

    raise MissingExtraError("tenacity", "consumers", "The consumer runtime (retries with backoff)") from exc

log = logging.getLogger(__name__)

__all__ = ["OUTAGE_ERRORS", "OUTAGE_ERROR_NAMES", "RETRIED_4XX", "Aborted", "Retrier", "RetryPolicy", "is_outage",
           "refused_for_good", "retried_4xx_text", "traceback_tail"]

#: exception classes that mean an output (or Kafka) is down: retried until it is back
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (OutputError, OSError, KafkaException, KafkaError)
#: the same for optional libraries, by "module.QualName" anywhere in the exception's class hierarchy (so the
#: runtime imports none of them): a database that is locked or unreachable, an HTTP connection that failed
OUTAGE_ERROR_NAMES = frozenset({
    "sqlalchemy.exc.OperationalError", "sqlalchemy.exc.DisconnectionError", "sqlalchemy.exc.TimeoutError",
    "httpx.TransportError", "urllib3.exceptions.HTTPError",
})

#: 4xx answers that are retried like an outage: 408 (request timeout) and 429 (too many requests) pass, and
#: 401, 403 and 407 are about the service's own credentials, not the event: dead-lettering every event while a
#: token is wrong would empty the topic into the dead-letter topic; retried, they stall until it is fixed.
#: 4xx answers about the request's path, the service's credentials or the output's load, not about the event
#: (a wrong endpoint answers 404 or 405 to every event: retried, so it stalls rather than empties the topic)
RETRIED_4XX = frozenset({401, 403, 404, 405, 407, 408, 410, 421, 429})

T = TypeVar("T")


def retried_4xx_text() -> str:
    """``RETRIED_4XX`` for messages: "401, 403, ... and 429"."""
    codes = [str(c) for c in sorted(RETRIED_4XX)]
    return f"{', '.join(codes[:-1])} and {codes[-1]}"


def refused_for_good(status: int) -> bool:
    """Whether an HTTP answer ``status`` means the output will never take this request (a 4xx other than
    ``RETRIED_4XX``): raise ``PermanentError`` so the record is dead-lettered instead of retried forever."""
    return 400 <= status < 500 and status not in RETRIED_4XX


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for a failing output: ``initial`` * 2^n seconds, capped at ``maximum``, plus up to ``jitter``.

    ``give_up_after``: dead-letter an event whose output is still down after that many seconds
    (None: retry until it is back or the service stops). ``max_handler_retries``: how many times an
    unexpected exception (a handler bug) is retried before the event is dead-lettered.
    """

    initial: float = 0.5
    maximum: float = 30.0
    jitter: float = 0.25
    give_up_after: float | None = None
    max_handler_retries: int = 5

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial or self.jitter < 0:
            raise ValueError(f"RetryPolicy(initial={self.initial}, maximum={self.maximum}, jitter={self.jitter}); "
                             "expected 0 < initial <= maximum and jitter >= 0")
        if self.max_handler_retries < 0:
            raise ValueError(f"max_handler_retries={self.max_handler_retries}; expected 0 or more")
        if self.give_up_after is not None and self.give_up_after <= 0:
            raise ValueError(f"give_up_after={self.give_up_after}; expected a positive number of seconds or None")


class Aborted(Exception):  # noqa: N818 - a signal inside the runtime, never leaves it
    """The service is stopping while the call still fails: leave the event uncommitted."""


def is_outage(exc: BaseException, retryable: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether ``exc`` means an output is down (retry until it is back) rather than a handler bug."""
    if isinstance(exc, OUTAGE_ERRORS + retryable):
        return True
    return any(f"{c.__module__}.{c.__qualname__}" in OUTAGE_ERROR_NAMES for c in type(exc).__mro__)


def traceback_tail(exc: BaseException, limit: int = 2000) -> str:
    """The last ``limit`` characters of ``exc``'s formatted traceback (where it was raised is at the end)."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    return text[-limit:]


class _StopAfterBugs(stop_base):
    """Stop once the handler failed with a non-outage exception more than ``limit`` times."""

    def __init__(self, limit: int, retryable: tuple[type[BaseException], ...]) -> None:
        self.limit = limit
        self.retryable = retryable
        self.bugs = 0

    def __call__(self, retry_state: Any) -> bool:
        exc = retry_state.outcome.exception()
        if exc is not None and not is_outage(exc, self.retryable):
            self.bugs += 1
        return self.bugs > self.limit


class _StopWhen(stop_base):
    def __init__(self, predicate: Callable[[], bool]) -> None:
        self.predicate = predicate

    def __call__(self, retry_state: Any) -> bool:
        return self.predicate()


class Retrier:
    """Runs a call until it succeeds, with the runtime's policy and callbacks (see the module docstring).

    ``pause``/``resume`` stop and restart fetching; ``sleep(seconds)`` waits while serving the group;
    ``stopping()`` says the service is shutting down; ``on_failure(stage)`` counts a failed attempt.
    ``state`` is what is failing right now (for /healthz), with ``since`` its start (monotonic).
    """

    def __init__(self, policy: RetryPolicy, *, pause: Callable[[], None], resume: Callable[[], None],
                 sleep: Callable[[float], None], stopping: Callable[[], bool],
                 on_failure: Callable[[str], None]) -> None:
        self.policy = policy
        self._pause = pause
        self._resume = resume
        self._sleep = sleep
        self._stopping = stopping
        self._on_failure = on_failure
        self.state: str | None = None
        self.stage: str | None = None
        self.since: float | None = None

    def run(self, where: str, call: Callable[[], T], *, stage: str = "output",
            retryable: tuple[type[BaseException], ...] = (), forever: bool = False) -> T:
        """``call()``, retried per the policy; raises ``PermanentError`` (``GaveUpError``: the output stayed down
        past ``give_up_after``; ``HandlerBugError``: a bug after its retries) or ``Aborted`` (stopping).
        ``forever``: retry every failure, PermanentError included, until it succeeds or the service stops (the
        dead-letter path, which must not lose the message)."""
        try:
            return call()  # the common case: no retry machinery on the hot path
        except Exception as exc:  # noqa: BLE001 - classified below: output down, or a handler bug
            if isinstance(exc, PermanentError) and not forever:
                raise
            first: BaseException = exc
        return self._retry(where, call, first, stage, retryable, forever)

    def _retry(self, where: str, call: Callable[[], T], first: BaseException, stage: str,
               retryable: tuple[type[BaseException], ...], forever: bool) -> T:
        """``call()`` retried with backoff after its first failure ``first``, the partitions paused meanwhile."""
        policy = self.policy
        bugs = _StopAfterBugs(policy.max_handler_retries, retryable)
        attempts = 0  # retries that failed and were followed by a wait
        calls = 1
        started = self._begin(where, stage, first, retryable, forever)

        def before_sleep(state: Any) -> None:
            nonlocal attempts
            attempts += 1
            self._on_failure(stage)
            exc = state.outcome.exception()
            self.state = f"{where}: {stage}: {type(exc).__name__}: {exc}"
            log.warning("%s: %s failed (attempt %d), retrying in %.1fs: %s: %s", where, stage, attempts + 1,
                        state.next_action.sleep, type(exc).__name__, exc)

        # The first failure counts against the bug budget too (it happened before tenacity started).
        if not forever and not is_outage(first, retryable):
            bugs.bugs = 1
        retrying = Retrying(
            retry=retry_if_exception(lambda e: forever or not isinstance(e, PermanentError)),
            wait=wait_exponential_jitter(multiplier=policy.initial, max=policy.maximum, jitter=policy.jitter),
            stop=self._stop(bugs, forever),
            sleep=self._sleep,
            before_sleep=before_sleep,
            reraise=False,
        )
        def counted() -> T:
            nonlocal calls
            calls += 1
            return call()

        recovered = False
        try:
            if bugs.bugs > policy.max_handler_retries:
                last: BaseException = first
            else:
                self._sleep(policy.initial)
                if self._stopping():
                    raise Aborted
                try:
                    result = retrying(counted)
                    recovered = True
                    return result
                except RetryError as exc:
                    if self._stopping():
                        raise Aborted from exc
                    last = exc.last_attempt.exception()  # type: ignore[assignment]
            raise self._failed(where, stage, last, calls, started, retryable) from last
        finally:
            self._resume()
            self.state = self.stage = self.since = None
            if recovered:
                log.info("%s: %s recovered after %d retries", where, stage, calls - 1)

    def _begin(self, where: str, stage: str, first: BaseException, retryable: tuple[type[BaseException], ...],
               forever: bool) -> float:
        """Retrying starts: the failure is shown (``state``, the log, ``on_failure``) and fetching paused; returns
        the start (monotonic)."""
        kind = "output down" if forever or is_outage(first, retryable) else "unexpected error"
        started = time.monotonic()
        self.stage, self.since = stage, started
        self.state = f"{where}: {stage}: {type(first).__name__}: {first}"
        log.warning("%s: %s failed (%s), retrying with backoff: %s: %s", where, stage, kind, type(first).__name__,
                    first)
        self._on_failure(stage)
        self._pause()
        return started

    def _stop(self, bugs: _StopAfterBugs, forever: bool) -> Any:
        """When retrying ends: once the service stops; unless ``forever``, also once the handler's bugs are past
        their budget or ``give_up_after`` has passed."""
        stop: Any = _StopWhen(self._stopping)
        if forever:
            return stop
        stop = stop | bugs
        if self.policy.give_up_after is not None:
            stop = stop | stop_after_delay(self.policy.give_up_after)
        return stop

    def _failed(self, where: str, stage: str, last: BaseException, calls: int, started: float,
                retryable: tuple[type[BaseException], ...]) -> PermanentError:
        """What the event is dead-lettered with once retrying ended on ``last``: a handler bug, or an output that
        stayed down (past ``give_up_after``, or through every attempt)."""
        if not is_outage(last, retryable) and not isinstance(last, PermanentError):
            return HandlerBugError(last, attempts=calls, traceback=traceback_tail(last))
        give_up_after = self.policy.give_up_after
        elapsed = time.monotonic() - started
        after = (f"{give_up_after}s" if give_up_after is not None and elapsed >= give_up_after
                 else f"{calls} attempts in {elapsed:.1f}s")
        return GaveUpError(f"{where}: {stage} still failing after {after}: {type(last).__name__}: {last}",
                           error=last, since=started)

