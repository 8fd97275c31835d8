"""The handler plugin: what a consumer service implements to run on the shared runtime.

Contract
--------
A ``Handler`` turns one decoded event into the service's outputs.

* ``name``: the service name. It names the default consumer group
  (``lineagewire-<name>``), the dead-letter topic (``<topic>.dlq.<name>``)
  and the ``service`` label of the metrics.
* ``open()`` is called once before the first event; ``close()`` once at
  shutdown, after the last event, and must flush whatever the outputs buffer.
* ``handle(record)`` delivers the outputs of one event **synchronously** and
  returns how many outputs it emitted (0 is fine: the event is not for this
  service). When it returns, the outputs are durable as far as the handler can
  tell; only then does the runtime commit the event's offset.
* Idempotence: handling the same event twice must not double anything in the
  backend (derive output ids from the event, never from the clock or a counter).
  The runtime also skips event ids it handled recently (a bounded window), but
  after a crash or a rebalance an event may be handled again.
* Errors: raise ``PermanentError`` (or a subclass) when this event can never
  be handled; it goes to the dead-letter topic with the error in its headers
  and the service goes on. Raise ``OutputError`` (or let ``OSError``, a Kafka
  error, or one of ``retryable_errors`` out) when an output is down: the
  runtime retries the same event with exponential backoff until it is back,
  pausing the partitions meanwhile, so per-key order holds and nothing piles up
  in memory. Any other exception is taken for a bug: retried a few times
  (``--max-handler-retries``), then the event is dead-lettered with the
  exception's class, message and traceback in the headers.
* ``handle`` is called from one thread, in offset order per partition.
* Concurrent delivery: a handler whose backend answers one request per event
  (HTTP) need not wait for each. It hands the event's outputs to an
  ``InFlight`` (``inflight.py``) and returns; ``InFlight`` sends them
  concurrently, in order per key (one job's events never overtake each other),
  with at most ``max_pending`` unconfirmed (``handle`` waits when full). The
  handler then answers ``durable_offsets()`` from it (per partition the lowest
  offset not yet confirmed), raises its failures as ``OutputError`` from
  ``handle``, ``batch_done`` and ``tick`` (the failed outputs are sent again, in
  order, on each of those calls, so the runtime's retry and backoff own the
  retries), passes ``on_revoke`` on, and waits for it in ``close``. Its
  outputs count as emitted when confirmed (returned by ``batch_done``/``tick``).
* Rejections after ``handle`` returned (a concurrent delivery): the error of a
  bad record reaches its output later, and the ``OutputError`` of a record's
  failed outputs is raised by a later call. Two hooks hand the right records
  to the runtime, which writes their dead letters (original key, value and
  timestamp, with the error in the headers) and commits past them only then:

  - ``rejected()``: the records whose outputs the backend refused for good
    (its send raised ``PermanentError``, e.g. an HTTP 4xx), as ``InFlight``'s
    ``Rejected`` objects (``record``, ``error``, ``settle()``). The runtime
    calls it after every ``batch_done`` and ``tick`` (and at shutdown), writes
    each record's dead letter, then calls ``settle()``; until then the record
    holds back its partition's commits (``durable_offsets``).
  - ``give_up(since)``: the runtime's ``give_up_after`` ran out on a failure
    raised by ``handle``, ``batch_done`` or ``tick`` (``GaveUpError``; the
    retries began at ``time.monotonic()`` ``since``). Return True when that
    failure was of outputs held for records handed before (reject those that
    have failed since ``since`` or before, so that ``rejected()`` hands them
    over): the runtime dead-letters them and hands the record in hand again.
    False (the default): the failure was the call's own, and the record in
    hand is dead-lettered.

  A handler on ``InFlight`` answers both from it (``inflight.rejected()``,
  ``inflight.give_up(since)``); the runtime keeps owning retries and backoff.

Optional hooks (the defaults do nothing, so a simple service ignores them):

* ``accepts_undecodable = True``: messages the contract cannot decode are
  handed to ``handle`` too, as a ``Record`` whose ``event`` is None and whose
  ``decode_error`` says why, instead of going to the dead-letter topic (the
  audit archive keeps every message as it was).
* ``decode_fields``: per event kind, the fields ``handle`` reads, as dotted
  paths (``"header"``, ``"inputs.name"``; kinds not listed: ``header``). The
  runtime then decodes only those (``Codec.fields_decoder``), so
  ``record.event`` holds them and a service that needs a few columns does not
  pay for the whole event; bytes that are not an event still fail to decode.
  None (the default): the whole event, fully checked.
* ``tick_interval`` (seconds) and ``tick(now)``: time-based work (rules on a
  clock, closing a file after a quiet hour). The runtime calls ``tick`` at
  least every ``tick_interval`` seconds from the same thread as ``handle``,
  also when no message arrives; it returns how many outputs it emitted and
  its failures are retried with backoff like those of ``handle``.
* ``batch_done()``: called after each batch of messages from one poll was
  handed to ``handle`` (same thread; not called for an empty poll), before
  ``tick`` and the commit: a buffering handler saves the batch here in one
  write instead of one per event. Failures are retried like those of ``tick``.
* ``durable_offsets()``: for a handler that buffers (writes a file per many
  events), per partition the offset up to which (exclusive) everything it
  was handed is durable. The runtime never commits past it; a partition
  missing from the answer is not committed. ``None`` (the default) means
  everything handed to ``handle`` is durable once it returned.
* ``on_revoke(partitions)``: those partitions go to another member; a
  buffering handler flushes (or drops) what it holds for them before the
  runtime commits their durable offsets.
* ``on_assign(partitions)``: those partitions came to this member (after
  their previous owner's ``on_revoke``, or after it died); a handler that
  keeps state in a database shared by the members reads it again for them.
  An error is logged, not raised (it runs inside the consumer's poll): a
  handler whose read failed must refuse ``handle``/``batch_done`` (raise)
  until it succeeds, so the runtime's retry path applies, and must not
  save state it did not read. ``on_revoke`` is its counterpart: it drops
  what it holds for the partitions that go.

``close()`` runs before the final commit, so what it flushes is committed.

Services register under a name in ``HANDLERS`` (built in) or the entry-point
group ``lineagewire.handlers`` (outside packages): ``name = "pkg.module:Class"``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, ClassVar

from lineagewire.exceptions import ConfigError

if TYPE_CHECKING:
    from lineagewire.schemas import Codec
    from lineagewire.schemas.codec import Decoder

    from .inflight import Rejected
    from .record import Record

__all__ = ["ENTRY_POINT_GROUP", "HANDLERS", "Handler", "load_handler_class"]

ENTRY_POINT_GROUP = "lineagewire.handlers"

#: built-in services: name -> "module:Class"
HANDLERS: dict[str, str] = {
    "openlineage": "lineagewire.consumers.openlineage.handler:OpenLineageHandler",
    "datahub": "lineagewire.consumers.datahub.handler:DataHubHandler",
    "alerting": "lineagewire.consumers.alerting.service:AlertingHandler",
}


class Handler:
    """Base class of consumer services; see the module docstring for the contract."""

    name: ClassVar[str] = "handler"
    #: hand undecodable messages to ``handle`` (``record.event`` None) instead of dead-lettering them
    accepts_undecodable: ClassVar[bool] = False
    #: per event kind, the fields ``handle`` reads (dotted paths); the runtime decodes only those. None: all
    decode_fields: ClassVar[Mapping[str, Sequence[str]] | None] = None
    #: call ``tick`` at least this often (seconds), also on a quiet topic; None: never
    tick_interval: ClassVar[float | None] = None
    #: exceptions of the handler's own clients that mean "output down" (e.g. ``(httpx.TransportError,)``):
    #: retried until the output is back, like ``OutputError``
    retryable_errors: ClassVar[tuple[type[BaseException], ...]] = ()

    @classmethod
    def from_options(cls, **options: Any) -> Handler:
        """The handler built from command-line style options (``replay --into NAME`` passes its own)."""
        return cls(**options)

    @classmethod
    def prepare_process(cls) -> None:
        """Process-wide set-up for a process that runs this service: its command and ``replay`` call it, before
        building the handler; the runtime and library code never do. Default: nothing."""

    @classmethod
    def decoder(cls, codec: Codec) -> Decoder:
        """How the runtime decodes a message for this handler: whole, or only ``decode_fields``."""
        return codec.decode if cls.decode_fields is None else codec.fields_decoder(cls.decode_fields)

    def render(self, record: Record) -> list[str]:
        """This service's outputs for ``record`` as JSON texts, without sending them (``replay --format NAME``)."""
        raise NotImplementedError(f"the {self.name} service has no text rendering of its outputs")

    def open(self) -> None:
        """Acquire outputs (clients, files). Called once before the first event."""

    def handle(self, record: Record) -> int:
        """Deliver the outputs of one event; return how many were emitted."""
        raise NotImplementedError

    def tick(self, now: float) -> int:
        """Time-based work at wall-clock time ``now`` (epoch seconds); return how many outputs were emitted."""
        return 0

    def batch_done(self) -> int:
        """The messages of one poll were handled: save what is buffered; return how many outputs were emitted."""
        return 0

    def durable_offsets(self) -> dict[tuple[str, int], int] | None:
        """Per (topic, partition), the next offset not yet durable; None: all handled events are durable.

        A partition missing from the mapping is not committed at all (the safe default for a handler that has
        not yet made anything of it durable). A handler that holds back only some partitions answers with a
        mapping whose missing keys mean "durable to the end" (see the refresh runner's ``_HeldBack``).
        """
        return None

    def rejected(self) -> list[Rejected]:
        """Records whose outputs were rejected for good after ``handle`` returned, since the last call: the runtime
        dead-letters each, then calls its ``settle()`` (see the module docstring). Default: none."""
        return []

    def give_up(self, since: float) -> bool:
        """``give_up_after`` ran out on a failure raised here (retries since monotonic ``since``): reject the records
        held whose outputs failed since then or before, and return True; False: the failure is the call's own."""
        return False

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        """``partitions`` were taken away: flush or drop what is buffered for them."""

    def on_assign(self, partitions: list[tuple[str, int]]) -> None:
        """``partitions`` were given to this member: read again what other members may have saved for them."""

    def close(self) -> None:
        """Flush and release outputs. Called once at shutdown."""


def load_handler_class(name: str) -> type[Handler]:
    """The handler class registered as ``name`` (built in, entry point, or a ``module:Class`` path)."""
    target = HANDLERS.get(name)
    ep = None if target is not None else _entry_point(name)
    if ep is not None:
        cls = ep.load()
    elif target is None and ":" not in name:
        known = sorted({*HANDLERS, *(e.name for e in entry_points(group=ENTRY_POINT_GROUP))})
        raise ConfigError(f"handler {name!r} is not registered; expected one of {', '.join(known)} "
                          "or a 'module:Class' path")
    else:
        cls = _imported(name, target or name)
    if not (isinstance(cls, type) and issubclass(cls, Handler)):
        raise ConfigError(f"handler {name!r} is {cls!r}; expected a subclass of {Handler.__module__}.Handler")
    return cls


def _entry_point(name: str) -> EntryPoint | None:
    """The entry point an outside package registered a handler class under ``name``, if any."""
    return next((ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name), None)


def _imported(name: str, target: str) -> Any:
    """What the ``module:attribute`` path ``target`` names (the handler ``name``'s class)."""
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"handler {name!r}: cannot import {target!r}: {exc}") from exc
