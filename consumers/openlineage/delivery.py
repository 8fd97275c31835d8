"""Deliveries that confirm each OpenLineage event, for ``InFlight`` (concurrent, ordered, committed when confirmed).

* ``HttpDelivery``: the ``http`` transport's settings (openlineage-python's
  ``HttpConfig``: url, endpoint, timeout, verify, sslContext, auth, compression,
  custom headers), sent with **aiohttp**: one ``ClientSession`` with a pooled
  keep-alive connector, as many requests in flight as ``InFlight`` has lanes.
  A request counts as confirmed on a 2xx answer. A 4xx other than 401, 403,
  407, 408 and 429 raises ``RefusedError`` (a ``PermanentError``): the backend
  will never take that event, so its record is dead-lettered and its lane goes
  on. Anything else raises ``EmitError`` and the runtime retries it (no retries
  inside: the runtime's backoff is the one).
  ``trust_env`` is off (no proxy variables, no ``.netrc``) unless the transport
  config says ``trust_env: true``.
* ``KafkaDelivery``: the ``kafka`` transport's settings (``KafkaConfig``:
  producer config, topic, messageKey), produced with confluent-kafka; a batch
  counts as confirmed when the broker acknowledged every message of it (the
  delivery callback), so nothing is committed that Kafka did not take.
* ``ConfirmedKafkaTransport``: the same for a ``kafka`` child of a ``composite``
  transport (an openlineage-python ``Transport`` whose ``emit`` waits for the
  acknowledgement and raises when there is none).

Why aiohttp (measured on this 2-core machine, 1.6 KB POSTs to the Go receiver of
``bench/receiver``, docs/consumers.md has the table): aiohttp with 16 in flight
took 90-130 µs of CPU per request; httpx's sync client 460 µs and its async one
more; urllib3's pool on 16 threads 210 µs; requests (openlineage-python's
``http`` transport) about 1,000 µs with ``trust_env`` on. The standard library's
``http.client`` on 16 threads took 80-100 µs, but leaves pooling, proxies and
TLS set-up to us; aiohttp gives them for a few µs more.

The message key of ``KafkaDelivery`` follows openlineage-python's kafka transport
(documented there): ``messageKey`` when set, else ``run:<namespace>/<name>`` of
the parent's root job, else of the parent job, else of the event's job, so a
job's events (and its children's) stay in one partition, in order.
"""

from __future__ import annotations

import gzip
import logging
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from lineagewire.exceptions import LineagewireError, MissingExtraError

try:
    from openlineage.client.transport import Config, Transport
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("openlineage-python", "openlineage", "The OpenLineage service") from exc

from lineagewire.consumers.runtime.retry import refused_for_good

from .exceptions import EmitError, RefusedError

log = logging.getLogger(__name__)

__all__ = ["ConfirmedKafkaTransport", "HttpDelivery", "KafkaDelivery", "Rendered", "kafka_message_key"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One OpenLineage event ready to send: its JSON text and its Kafka message key."""

    body: str
    key: str
    where: str  # the lineagewire record it came from, topic[partition]@offset, for error messages


class HttpDelivery:
    """POSTs rendered events with one aiohttp session (see the module docstring). Open and close it on the
    ``InFlight`` loop (``InFlight.call(delivery.open())``)."""

    def __init__(self, config: Any, *, concurrency: int = 32, trust_env: bool = False) -> None:
        self.url = urljoin(config.url.strip(), config.endpoint)
        self.timeout = float(config.timeout)
        self.auth = config.auth
        self.compression = str(config.compression) if config.compression else None
        self.headers = {"Content-Type": "application/json", **(config.custom_headers or {})}
        if self.compression == "gzip":
            self.headers["Content-Encoding"] = "gzip"
        self.ssl = _ssl_context(config)
        self.concurrency = concurrency
        self.trust_env = trust_env
        self._session: Any = None

    async def open(self) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=self.ssl, keepalive_timeout=30)
        self._session = aiohttp.ClientSession(connector=connector, trust_env=self.trust_env,
                                              timeout=aiohttp.ClientTimeout(total=self.timeout))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, batch: list[Rendered]) -> None:
        """POST each event of ``batch`` in order; raise ``EmitError`` unless the backend answered 2xx."""
        import aiohttp

        for item in batch:
            headers = self.headers
            bearer = self.auth.get_bearer() if self.auth is not None else None
            if bearer:
                headers = {**headers, "Authorization": bearer}
            # Bytes, not text: aiohttp wraps a str in a payload that looks up its charset on every request.
            data = item.body.encode()
            if self.compression == "gzip":
                data = gzip.compress(data, compresslevel=3)
            try:
                async with self._session.post(self.url, data=data, headers=headers) as resp:
                    answer = await resp.read()
                    if resp.status >= 300:
                        raise status_error(item, self.url, resp.status, resp.reason, answer)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise EmitError(f"{item.where}: OpenLineage backend {self.url} not reached: "
                                f"{type(exc).__name__}: {exc}") from exc


def status_error(item: Rendered, url: str, status: int, reason: str | None, answer: bytes) -> EmitError | RefusedError:
    """The error for a non-2xx answer to ``item``: ``RefusedError`` (dead-lettered) when the status says the
    backend will never take it, ``EmitError`` (retried) otherwise."""
    if not refused_for_good(status):
        return EmitError(f"{item.where}: OpenLineage backend {url} answered {status} {reason}; expected 2xx")
    said = answer[:300].decode("utf-8", "replace").strip()
    return RefusedError(f"{item.where}: OpenLineage backend {url} refused the event with {status} {reason}"
                        f"{f' ({said})' if said else ''}; expected 2xx: a 4xx answer other than 401, 403, 407, 408 "
                        "and 429 means the backend will never take this event, so it is dead-lettered")


def _ssl_context(config: Any) -> ssl.SSLContext | bool:
    if not config.url.strip().lower().startswith("https"):
        return False
    if not config.verify:
        return False
    ctx_config = getattr(config, "ssl_context", None)
    ctx = ssl.create_default_context(cafile=getattr(ctx_config, "ca_cert_path", None) or None)
    cert = getattr(ctx_config, "client_cert_path", None)
    if cert:
        ctx.load_cert_chain(cert, getattr(ctx_config, "client_key_path", None) or None)
    return ctx


def kafka_message_key(event: Any, message_key: str | None = None) -> str:
    """The key openlineage-python's kafka transport gives a RunEvent (see the module docstring)."""
    if message_key:
        return message_key
    job = event.job
    parent = (event.run.facets or {}).get("parent")
    if parent is not None:
        root = getattr(parent, "root", None)
        job = root.job if root is not None else parent.job
    return f"run:{job.namespace}/{job.name}"


class KafkaDelivery:
    """Produces rendered events to the OpenLineage topic through lineagewire's one publisher and waits for the
    broker's acknowledgement of each (``Publisher.deliver``).

    The transport's ``config`` (librdkafka properties) is laid over lineagewire's producer defaults and
    Kafka settings (idempotent, ``acks=all``; the cluster's security where the transport names none).
    """

    def __init__(self, config: Any, *, timeout: float = 30.0) -> None:
        from lineagewire.config import Settings
        from lineagewire.kafka.publisher import Publisher

        self.topic = config.topic
        self.message_key = config.messageKey
        self.timeout = timeout
        self.publisher = Publisher(Settings(), producer_config=dict(config.config), queue_full_timeout=timeout)

    def send(self, batch: list[Rendered]) -> None:
        """Produce ``batch`` in order and wait; raise ``EmitError`` unless every message was acknowledged."""
        from lineagewire.kafka.publisher import Outgoing

        failed = self.publisher.deliver([Outgoing(self.topic, item.body.encode(), key=item.key, label=item.where)
                                         for item in batch], self.timeout)
        if failed:
            first = failed[min(failed)]
            raise EmitError(f"{batch[0].where}: OpenLineage kafka topic {self.topic}: {len(failed)} of "
                            f"{len(batch)} events not acknowledged: {first.reason}")

    def close(self, timeout: float = 10.0) -> None:
        try:
            self.publisher.flush(timeout)
        except LineagewireError as exc:
            log.warning("OpenLineage kafka topic %s: not everything was acknowledged at close: %s", self.topic, exc)


class ConfirmedKafkaTransport(Transport):
    """openlineage-python's ``kafka`` transport for a ``composite``, with ``emit`` raising unless acknowledged."""

    kind = "kafka"
    config_class = Config

    def __init__(self, config: Any, renderer: Any) -> None:
        self.delivery = KafkaDelivery(config)
        self.renderer = renderer
        self.name = getattr(config, "name", None)

    def emit(self, event: Any) -> None:
        key = kafka_message_key(event, self.delivery.message_key)
        self.delivery.send([Rendered(self.renderer.to_json(event), key, "event")])

    def close(self, timeout: float = -1) -> bool:
        self.delivery.close(10 if timeout < 0 else timeout)
        return True
