"""The OpenLineage service: translate each event and send it through an OpenLineage transport.

Transport configuration is OpenLineage's own, with its own precedence
(openlineage-python's ``OpenLineageClient``):

1. ``config`` passed here (``lineagewire consume openlineage --openlineage-config FILE``
   loads that YAML, ``--url`` means ``{"transport": {"type": "http", "url": URL}}``);
2. ``openlineage.yml`` from ``$OPENLINEAGE_CONFIG``, the working directory or ``~/.openlineage/``;
3. ``OPENLINEAGE__TRANSPORT__TYPE=http``, ``OPENLINEAGE__TRANSPORT__URL=...`` style variables;
4. ``OPENLINEAGE_URL`` (+ ``OPENLINEAGE_API_KEY``, ``OPENLINEAGE_ENDPOINT``): HTTP;
5. nothing configured: refused with ``ConfigError`` (openlineage-python would fall back to its console
   transport, and the service would send nothing anywhere). The console stays available when configured
   (``transport: {type: console}``, ``OPENLINEAGE__TRANSPORT__TYPE=console``).

How events are delivered, by the transport the configuration gives:

* ``http``: concurrently and in order per job (``delivery.HttpDelivery``: libcurl through pycurl,
  ``concurrency`` requests in flight over one keep-alive pool, through the runtime's ``InFlight``); an event's offset
  is committed only once the backend answered 2xx for it and for every event before it in its partition.
  An event the backend refuses for good (a 4xx other than 401, 403, 404, 405, 407, 408, 410, 421, 429) goes to the
  dead-letter topic (``rejected``), and its job's later events go on.
* ``kafka``: produced in batches, committed once the broker acknowledged them (``delivery.KafkaDelivery``).
* ``async_http`` (alone or in a composite): refused at start. It queues events and sends them later,
  so ``emit`` returning says nothing about delivery and offsets would be committed for events it then loses.
* anything else (file, console, composite, dotted-path plugins): openlineage-python's client and
  transport, one event at a time, each ``emit`` that returns counted as delivered; a ``kafka`` child of a
  composite waits for the broker's acknowledgement (``delivery.ConfirmedKafkaTransport``).

Each event goes through openlineage-python's ``OpenLineageClient.emit`` first (its tags, environment
variables, source-code location, dataset reduction and filters, as configured); for ``http`` and
``kafka`` the client's transport only hands the event back to be rendered (``render.Renderer``) and sent.

Retries belong to the runtime (``--retry-initial``/``--retry-max``/``--give-up-after``): the service's
own deliveries do not retry, and an HTTP transport inside a composite whose config does not set ``retry``
gets ``{"total": 0}`` instead of openlineage-python's default of five urllib3 retries with backoff
(about 9.5 s per attempt of the runtime). A ``retry`` section set for a composite's HTTP child is kept.
"""

from __future__ import annotations

import logging
import pathlib
import sys
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from lineagewire.consumers.runtime.base import Handler
from lineagewire.consumers.runtime.gcsettings import tune_gc
from lineagewire.consumers.runtime.inflight import InFlight, Rejected, blocking
from lineagewire.exceptions import ConfigError, require

from .delivery import ConfirmedKafkaTransport, HttpDelivery, KafkaDelivery, Rendered, kafka_message_key
from .exceptions import EmitError
from .translate import Translator

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["AT_LEAST_ONCE_TRANSPORTS", "OpenLineageHandler", "load_openlineage_config", "make_client"]

#: transports whose delivery the service confirms before committing (named in the refusal of the others)
AT_LEAST_ONCE_TRANSPORTS = ("http", "kafka", "file", "console", "composite (of those)")
#: transports that take an event and deliver it later, with no confirmation per event
UNCONFIRMED_TRANSPORTS = frozenset({"async_http"})
#: the refusal of a service with no transport configured (openlineage-python would print events to the console)
NO_TRANSPORT = ("no OpenLineage transport configured, so events would only be printed to this process's log; "
                "expected --url URL (an OpenLineage backend), OPENLINEAGE_URL, or --openlineage-config FILE (an "
                "openlineage.yml; 'transport: {type: console}' there prints events on purpose)")
#: ordered lanes of the http delivery per connection of its pool (see ``OpenLineageHandler.open``)
LANES_PER_CONNECTION = 4


def load_openlineage_config(path: str | pathlib.Path | None = None, url: str | None = None) -> dict[str, Any] | None:
    """The explicit OpenLineage client config from a YAML file and/or an HTTP URL (None: let the client look)."""
    config: dict[str, Any] = {}
    if path is not None:
        p = pathlib.Path(path)
        try:
            loaded = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"OpenLineage config {str(p)!r}: cannot read it ({exc}); expected an "
                              "openlineage.yml file") from exc
        if not isinstance(loaded, dict) or not isinstance(loaded.get("transport"), dict):
            raise ConfigError(f"OpenLineage config {str(p)!r}: expected a mapping with a 'transport' section, "
                              f"got {type(loaded).__name__}")
        config = loaded
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--url {url!r}: expected an http:// or https:// URL of an OpenLineage backend")
        config = {**config, "transport": {"type": "http", "url": url}}
    return config or None


def make_client(config: dict[str, Any] | None = None) -> Any:
    """An ``OpenLineageClient`` configured the OpenLineage way (see the module docstring).

    A transport that cannot confirm each event (``async_http``) is refused with ``ConfigError``, and so is no
    transport configured at all (``NO_TRANSPORT``).
    """
    require("openlineage.client", "openlineage", "The OpenLineage service")
    from openlineage.client import OpenLineageClient

    # openlineage-python logs a WARNING of its own before raising for an unknown transport type, and before
    # falling back to the console; the ConfigErrors below say it in one line.
    quiet = [logging.getLogger("openlineage.client.utils"), logging.getLogger("openlineage.client.client")]
    drop = logging.Filter("nothing")  # passes no record of these loggers
    for logger in quiet:
        logger.addFilter(drop)
    try:
        client = OpenLineageClient(config=config)
    except (ValueError, TypeError, RuntimeError, KeyError, ImportError, AttributeError) as exc:
        raise ConfigError(f"OpenLineage transport configuration is invalid: {type(exc).__name__}: {exc}; expected "
                          "a transport type such as http, kafka, file, console or composite (see "
                          "https://openlineage.io/docs/client/python#configuration)") from exc
    finally:
        for logger in quiet:
            logger.removeFilter(drop)
    transport = getattr(client, "transport", None)
    if getattr(transport, "kind", None) == "console" and not (client.config.transport or {}).get("type"):
        # openlineage-python's last resort when nothing is configured: events would go to this process's log.
        raise ConfigError(NO_TRANSPORT)
    refuse_unconfirmed(transport)
    runtime_owns_retries(transport)
    return client


def _children(transport: Any) -> list[Any]:
    """The transports of a composite (a public property of openlineage-python's CompositeTransport)."""
    return list(getattr(transport, "transports", None) or []) if getattr(transport, "kind", None) == "composite" \
        else []


def refuse_unconfirmed(transport: Any) -> None:
    """``ConfigError`` when ``transport`` (or a composite's child) cannot confirm each event."""
    kind = getattr(transport, "kind", None)
    if kind in UNCONFIRMED_TRANSPORTS:
        close = getattr(transport, "close", None)
        if close is not None:
            close(0)
        raise ConfigError(f"OpenLineage transport type {kind!r} cannot confirm each event before its offset is "
                          "committed, so events would be lost when the backend is down; expected one of "
                          f"{', '.join(AT_LEAST_ONCE_TRANSPORTS)} (use 'http' for concurrent HTTP delivery)")
    for child in _children(transport):
        refuse_unconfirmed(child)



def runtime_owns_retries(transport: Any) -> None:
    """Turn off urllib3's retries in a composite's HTTP transports whose config left ``retry`` at its default."""
    from openlineage.client.transport.http import DEFAULT_RETRY_CONFIG, HttpTransport

    for t in _children(transport) or [transport]:
        if _children(t):
            runtime_owns_retries(t)
        elif isinstance(t, HttpTransport) and t.config.retry is DEFAULT_RETRY_CONFIG:
            # The default is one shared dict (attrs' default): identity tells "not set by the user". The
            # transport builds its session (and urllib3's Retry) from the config on its first emit.
            t.config.retry = {"total": 0}


class _HandBack:
    """The transport of the client that enriches events: it hands each event back instead of sending it."""

    kind = "lineagewire-handback"
    name = None
    priority = 0

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)

    def close(self, timeout: float = -1) -> bool:
        return True


class Enrichment:
    """What ``OpenLineageClient.emit`` does to an event before its transport, by the client's public methods.

    ``emit`` adds the environment-variables run facet (walking all of ``os.environ`` for every event, even
    with none configured: 20-30 µs), the tags facets, the source-code-location job facet, reduces datasets
    and applies the filters. This calls the same methods, in the same order, skipping only those the
    configuration turns off (no variables configured, reduction off, no filters). Anything it cannot read
    from the configuration falls back to ``emit`` itself, through the hand-back transport. The tests
    compare both on every sample event, with tags and variables configured.
    """

    def __init__(self, client: Any, handback: _HandBack, share: Any = None) -> None:
        self.client = client
        self.handback = handback
        # The tags facets ``update_event_tags_facets`` gives an event that has none (all ours): a pure function
        # of the configuration, built (with its validators) for the first such event and shared after that,
        # instead of two facets and their tag objects per event; ``share`` (``Renderer.share``) renders them once.
        self.share = share
        self._tags: tuple[Any, Any] | None = None
        try:
            config = client.config
            self.env = bool(config.facets.environment_variables)
            self.source_code = not config.facets.source_code_location.disabled
            self.reduce = bool(config.dataset.reducing_enabled)
            self.filters = bool(config.filters)
            self.public = all(callable(getattr(client, m, None)) for m in (
                "add_environment_facets", "update_event_tags_facets", "add_source_code_location_facet",
                "reduce_datasets", "filter_event"))
        except AttributeError:
            self.public = False

    def __call__(self, event: Any) -> Any:
        """The event as the client's transport would get it; None when a filter drops it."""
        client = self.client
        if not self.public:
            self.handback.events.clear()
            client.emit(event)
            return self.handback.events[0] if self.handback.events else None
        if self.env:
            event = client.add_environment_facets(event)
        event = self._add_tags(event)
        if self.source_code:
            event = client.add_source_code_location_facet(event)
        if self.reduce:
            event = client.reduce_datasets(event)
        if self.filters and client.filter_event(event) is None:
            return None
        return event


    def _add_tags(self, event: Any) -> Any:
        run, job = getattr(event, "run", None), getattr(event, "job", None)
        run_facets = getattr(run, "facets", None)
        job_facets = getattr(job, "facets", None)
        if run is None or job is None or (run_facets and "tags" in run_facets) or (job_facets and "tags" in job_facets):
            return self.client.update_event_tags_facets(event)  # tags of its own to merge with: the client's way
        if self._tags is None:
            event = self.client.update_event_tags_facets(event)
            self._tags = ((event.run.facets or {}).get("tags"), (event.job.facets or {}).get("tags"))
            for facet in self._tags:
                if facet is not None and self.share is not None:
                    self.share(facet)
            return event
        run_tags, job_tags = self._tags
        if run_tags is not None:
            if not run_facets:
                run.facets = run_facets = {}
            run_facets["tags"] = run_tags
        if job_tags is not None:
            if not job_facets:
                job.facets = job_facets = {}
            job_facets["tags"] = job_tags
        return event


class OpenLineageHandler(Handler):
    """Sends each lineagewire event to OpenLineage as RunEvents (see ``translate`` and the module docstring).

    ``client``: anything with ``emit(event)`` and ``close()`` (an ``OpenLineageClient``, or a fake in unit
    tests); by default one is built from ``config`` and the environment. ``concurrency``: HTTP requests in
    flight (0: one event at a time, ``handle`` returns once it is delivered, as ``replay`` wants).
    ``max_pending``: events handed and not yet confirmed before ``handle`` waits.
    """

    name: ClassVar[str] = "openlineage"
    #: failed concurrent deliveries are sent again from tick (and batch_done) also on a quiet topic
    tick_interval: ClassVar[float | None] = 0.5

    def __init__(self, client: Any = None, *, config: dict[str, Any] | None = None,
                 translator: Translator | None = None, concurrency: int = 32, max_pending: int = 2048) -> None:
        if concurrency < 0 or max_pending < 1:
            raise ConfigError(f"OpenLineage service: concurrency={concurrency}, max_pending={max_pending}; "
                              "expected concurrency >= 0 and max_pending >= 1")
        self._client = client
        self._config = config
        self.translator = translator or Translator()
        self.concurrency = concurrency
        self.max_pending = max_pending
        self.inflight: InFlight[Rendered] | None = None
        self._enrich: Any = None  # the OpenLineageClient whose transport hands events back
        self._handback: _HandBack | None = None
        self._http: HttpDelivery | None = None
        self._kafka: KafkaDelivery | None = None
        self.mode = "client"

    @classmethod
    def prepare_process(cls) -> None:
        """The HTTP requests are sent from a loop thread that needs the GIL for a moment after each answer: with
        Python's default 5 ms switch interval it waited that long behind the translating thread, and the
        backend sat idle (0.2 ms, as the archive's writer thread). And ``tune_gc``: what startup created is
        left out of the collector's passes."""
        tune_gc()
        sys.setswitchinterval(0.0002)

    @classmethod
    def from_options(cls, *, url: str | None = None, openlineage_config: str | None = None,
                     concurrency: int = 0, **options: Any) -> OpenLineageHandler:
        """``--url`` / ``--openlineage-config`` as ``lineagewire replay --into openlineage`` takes them: one event
        at a time by default, so each event's failure is reported with it."""
        return cls(config=load_openlineage_config(openlineage_config, url), concurrency=concurrency, **options)

    def render(self, record: Record) -> list[str]:
        """The RunEvents of ``record`` as OpenLineage JSON (openlineage-python's ``Serde.to_json``)."""
        from openlineage.client.serde import Serde

        assert record.event is not None  # the runtime hands this handler decoded events only
        return [Serde.to_json(ev) for ev in self.translator.translate(record.event)]

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self._config)
        return self._client

    def open(self) -> None:
        from openlineage.client.transport.http import HttpTransport
        from openlineage.client.transport.kafka import KafkaTransport

        transport = getattr(self.client, "transport", None)
        if isinstance(transport, HttpTransport):
            self.mode = "http"
            raw = _transport_section(self.client)
            if raw.get("retry"):
                log.info("OpenLineage http transport: its 'retry' section is not used; the service's runtime "
                         "retries with --retry-initial/--retry-max")
            self._http = HttpDelivery(transport.config, concurrency=max(self.concurrency, 1),
                                      trust_env=_truthy(raw.get("trust_env")))
            # More lanes than connections: a lane sends its jobs' events one after another, and the jobs hashed
            # to one lane wait behind each other; with a lane per few jobs the busiest lane no longer sets the
            # pace at a backend's latency. The connector still keeps ``concurrency`` requests in flight at most.
            self.inflight = InFlight(self._http.send, lanes=LANES_PER_CONNECTION * max(self.concurrency, 1),
                                     max_pending=self.max_pending, name="OpenLineage http").start()
            self.inflight.call(self._http.open())
        elif isinstance(transport, KafkaTransport):
            self.mode = "kafka"
            self._kafka = KafkaDelivery(transport.kafka_config)
            # One lane: the producer keeps the order; a batch is one flush (one wait for the acknowledgements).
            self.inflight = InFlight(blocking(self._kafka.send), lanes=1, max_pending=self.max_pending,
                                     max_batch=500, linger=0.005, name="OpenLineage kafka").start()
        else:
            self._confirm_kafka_children(transport)
        if self.mode != "client" and transport is not None:
            transport.close(0)  # replaced by the delivery above (an unused session, an idle producer)
            from openlineage.client import OpenLineageClient

            # The same configuration (tags, facets, filters), with a transport that hands the events back.
            self._handback = _HandBack()
            self._enrich = Enrichment(OpenLineageClient(transport=self._handback,  # type: ignore[arg-type]
                                                        config=self._config), self._handback,
                                      share=self.translator.renderer.share)
        kind = getattr(transport, "kind", type(self.client).__name__)
        log.info("OpenLineage transport: %s (%s)", kind, {
            "http": f"{self.concurrency or 1} requests in flight, committed when confirmed",
            "kafka": "committed when the broker acknowledged"}.get(self.mode, "one event at a time"))

    def _confirm_kafka_children(self, transport: Any) -> None:
        from openlineage.client.transport.kafka import KafkaTransport

        children = getattr(transport, "transports", None) if _children(transport) else None
        if children is None:
            return
        for i, child in enumerate(children):
            if isinstance(child, KafkaTransport):
                confirmed = ConfirmedKafkaTransport(child.kafka_config, self.translator.renderer)
                confirmed.name, confirmed.priority = child.name, child.priority
                child.close(0)
                children[i] = confirmed  # the composite's own list (a cached property): it emits through ours
            else:
                self._confirm_kafka_children(child)

    def handle(self, record: Record) -> int:
        assert record.event is not None  # the runtime hands this handler decoded events only
        events = self.translator.translate(record.event)
        if self._enrich is None:
            return self._emit_by_client(record, events)
        message_key = self._kafka.message_key if self._kafka is not None else None
        out: list[Rendered] = []
        to_json = self.translator.to_json
        for ev in events:
            e = self._enrich(ev)  # what openlineage-python's client adds, and its filters
            if e is not None:
                out.append(Rendered(to_json(e), kafka_message_key(e, message_key), record.where))
        assert self.inflight is not None  # noqa: S101 - set with _enrich
        if self.concurrency == 0:
            self._deliver_here(self.inflight, out)
            return len(out)
        self.inflight.submit(record, out)
        return 0  # counted when confirmed, by batch_done and tick

    def _deliver_here(self, inflight: InFlight[Rendered], out: list[Rendered]) -> None:
        """Delivers ``out`` one at a time, on this thread (``concurrency`` 0): raises EmitError unless delivered."""
        if not out:
            return
        if self._http is not None:
            inflight.call(self._http.send(out))
        elif self._kafka is not None:
            self._kafka.send(out)

    def _emit_by_client(self, record: Record, events: list[Any]) -> int:
        """Sends ``events`` one by one through the client's own ``emit`` (a transport of openlineage-python's
        that the service does not deliver itself); EmitError names the first one not sent."""
        for ev in events:
            try:
                self.client.emit(ev)
            except Exception as exc:  # noqa: BLE001 - any transport failure means the backend did not take it
                state = ev.eventType.value if ev.eventType else "event"
                raise EmitError(f"{record.where}: OpenLineage {state} for run {ev.run.runId} "
                                f"not sent: {type(exc).__name__}: {exc}") from exc
        return len(events)

    def batch_done(self) -> int:
        return self.inflight.check() if self.inflight is not None else 0

    def tick(self, now: float) -> int:
        return self.inflight.check() if self.inflight is not None else 0

    def durable_offsets(self) -> dict[tuple[str, int], int] | None:
        if self.inflight is None or self.concurrency == 0:
            return None  # every event handle() returned for is delivered
        return self.inflight.durable_offsets()

    def rejected(self) -> list[Rejected]:
        """Records whose events the backend refused for good (``RefusedError``), for the dead-letter topic."""
        return self.inflight.rejected() if self.inflight is not None else []

    def give_up(self, since: float) -> bool:
        return self.inflight is not None and self.inflight.give_up(since)

    def on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        if self.inflight is not None:
            self.inflight.revoke(partitions)

    def close(self) -> None:
        try:
            if self.inflight is not None:
                # What is not confirmed within 10 s stays uncommitted (durable_offsets), for the next run.
                self.inflight.close(10, then=self._http.close if self._http is not None else None)
            if self._kafka is not None:
                self._kafka.close()
        finally:
            if self._client is not None:
                try:
                    self._client.close(10)
                except Exception as exc:  # noqa: BLE001 - closing must not hide the shutdown
                    log.warning("closing the OpenLineage transport failed: %s", exc)


def _transport_section(client: Any) -> dict[str, Any]:
    """The ``transport`` section of the client's configuration, as given (its public ``config``)."""
    try:
        section = client.config.transport
    except Exception:  # noqa: BLE001 - a client without a config: nothing extra set
        return {}
    return section if isinstance(section, dict) else {}


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in {"1", "true", "yes", "on"}
