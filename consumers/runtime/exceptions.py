"""Errors of the consumer runtime and the contract between handlers and the runtime.

    LineagewireError
    └── ConsumerError                 the consumer runtime
        ├── PermanentError            this event can never be handled: dead-lettered, the service goes on
        │   ├── HandlerBugError       the handler kept raising an unexpected exception (after its retries)
        │   ├── GaveUpError           an output stayed down longer than RetryPolicy.give_up_after
        │   └── (per service, e.g. openlineage.TranslationError)
        ├── OutputError               an output is down: the runtime retries the same event with backoff
        └── DeadLetterError           the dead-letter topic could not be written (retried until it can be)
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = ["ConsumerError", "DeadLetterError", "GaveUpError", "HandlerBugError", "OutputError", "PermanentError"]


class ConsumerError(LineagewireError):
    """Something in a consumer service went wrong."""


class PermanentError(ConsumerError):
    """The event can never be handled (not translatable, invalid): it goes to the dead-letter topic."""


class OutputError(ConsumerError):
    """An output (HTTP backend, file, Kafka...) failed; the same event is retried with backoff."""


class DeadLetterError(ConsumerError):
    """A dead letter could not be written to its topic."""


class HandlerBugError(PermanentError):
    """The handler raised an exception that does not mean "output down", on every retry.

    ``error`` is the last exception, ``attempts`` how often it was tried, ``traceback`` the tail of the
    last traceback; the dead letter carries all three in its headers.
    """

    def __init__(self, error: BaseException, *, attempts: int, traceback: str) -> None:
        super().__init__(f"handler raised {type(error).__name__}: {error} ({attempts} attempts); expected it to "
                         "return, raise PermanentError for a bad event, or OutputError when an output is down")
        self.error = error
        self.attempts = attempts
        self.traceback = traceback


class GaveUpError(PermanentError):
    """An output was still down after ``RetryPolicy.give_up_after`` seconds of retries (the runtime's ``Retrier``).

    ``error`` is the last failure; ``since`` the ``time.monotonic()`` at which the retries began. A handler whose
    outputs are sent after ``handle`` returned (``InFlight``) may have raised it for earlier records' outputs: the
    runtime then asks the handler to give those up (``Handler.give_up(since)``) instead of dead-lettering the
    record in hand.
    """

    def __init__(self, message: str, *, error: BaseException, since: float) -> None:
        super().__init__(message)
        self.error = error
        self.since = since
