"""The listener plugin contract, after Flink's ``JobStatusChangedListener``.

A **listener** receives every event the emitter produces, one at a time, in the
order the emitter made them: ``on_event(event)`` with a contract event dict
(``JobCreatedEvent``, ``JobStatusChangedEvent`` or ``ActionLineageEvent``, see
``lineagewire.schemas.events``). Rules a listener can rely on and must keep:

* ``on_event`` is called on the listener's own worker thread (its
  ``ListenerContext.executor``), never on the Spark job's thread, and never
  concurrently with itself.
* It may block or raise: that costs only this listener. An exception is logged
  and counted; while it blocks, its bounded queue fills and further events for
  this listener are dropped with a counted warning. Other listeners and the job
  go on.
* The event dict is shared with other listeners: treat it as read-only.
* An action's event may come as an ``EncodedEvent``: the same dict, carrying the
  Avro encoding the emitter made to size it (``encoded``, framed for ``topic``).
  A listener that sends bytes to that topic sends those, instead of encoding the
  event again.
* ``close(timeout)`` is called once at the end, after the last event was
  handed over; deliver what is pending within ``timeout`` seconds and release
  resources. Anything it cannot deliver it may keep for later (the Kafka
  listener's outbox does) but must not block past ``timeout``.

A **factory** builds a listener from a ``ListenerContext``. Factories are found
by name through the entry-point group ``lineagewire.listeners`` or by dotted
path (``package.module:Factory``) and enabled with ``spark.lineagewire.listeners``
/ ``LINEAGEWIRE_EMITTER__LISTENERS``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineagewire.config import Settings

    from ..config import EmitterConfig
    from .executor import BoundedExecutor

__all__ = ["EncodedEvent", "JobStatusListener", "JobStatusListenerFactory", "ListenerContext"]


class EncodedEvent(dict):
    """A contract event with the encoding the emitter made of it: ``encoded``, framed for ``topic``."""

    __slots__ = ("encoded", "topic")

    def __init__(self, event: dict[str, Any], *, encoded: bytes, topic: str) -> None:
        super().__init__(event)
        self.encoded = encoded
        self.topic = topic


@dataclass
class ListenerContext:
    """What a factory gets to build its listener.

    ``config`` is the emitter's typed config, ``settings`` the Kafka settings,
    ``executor`` the bounded single-thread executor the listener's events run
    on (a listener may submit its own follow-up work to it), ``app_name`` the
    application's job name (used e.g. for the outbox folder), ``properties``
    the raw ``spark.lineagewire.*`` entries; a plugin's own keys go under
    ``spark.lineagewire.<listener name>.<key>``.
    """

    name: str
    config: EmitterConfig
    settings: Settings
    executor: BoundedExecutor
    app_name: str
    properties: dict[str, str] = field(default_factory=dict)


class JobStatusListener(abc.ABC):
    """Receives the emitter's events; see the module docstring for the contract."""

    @abc.abstractmethod
    def on_event(self, event: dict[str, Any]) -> None:
        """Handle one event (on this listener's own thread)."""

    def close(self, timeout: float) -> None:  # noqa: B027 - optional hook
        """Deliver what is pending within ``timeout`` seconds and release resources."""


class JobStatusListenerFactory(abc.ABC):
    """Builds a listener from its context; registered under a name in ``lineagewire.listeners``."""

    @abc.abstractmethod
    def create_listener(self, context: ListenerContext) -> JobStatusListener:
        """A new listener for one emitter."""
