"""Deliveries that confirm each OpenLineage event, for ``InFlight`` (concurrent, ordered, committed when confirmed).

* ``HttpDelivery``: the ``http`` transport's settings (openlineage-python's
  ``HttpConfig``: url, endpoint, timeout, verify, sslContext, auth, compression,
  custom headers), sent through libcurl (``curl.CurlPool``, pycurl): one pool of
  kept-alive connections, as many requests in flight as ``InFlight`` has lanes.
  ``curl_options`` turns those settings into libcurl's options (timeouts, TLS,
  redirects, proxies), the same for every request.
  A request counts as confirmed on a 2xx answer. A 4xx other than 401, 403,
  407, 408 and 429 raises ``RefusedError`` (a ``PermanentError``): the backend
  will never take that event, so its record is dead-lettered and its lane goes
  on. Anything else raises ``EmitError`` and the runtime retries it (no retries
  inside: the runtime's backoff is the one).
  Proxy variables and ``.netrc`` are not read unless the transport config says
  ``trust_env: true``.
* ``KafkaDelivery``: the ``kafka`` transport's settings (``KafkaConfig``:
  producer config, topic, messageKey), produced with confluent-kafka; a batch
  counts as confirmed when the broker acknowledged every message of it (the
  delivery callback), so nothing is committed that Kafka did not take.
* ``ConfirmedKafkaTransport``: the same for a ``kafka`` child of a ``composite``
  transport (an openlineage-python ``Transport`` whose ``emit`` waits for the
  acknowledgement and raises when there is none).

Why libcurl: see ``curl``'s module docstring and docs/consumers.md (a request costs
about half of aiohttp's CPU, and its socket work runs without the GIL).

The message key of ``KafkaDelivery`` follows openlineage-python's kafka transport
(documented there): ``messageKey`` when set, else ``run:<namespace>/<name>`` of
the parent's root job, else of the parent job, else of the event's job, so a
job's events (and its children's) stay in one partition, in order.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from lineagewire.exceptions import ConfigError, LineagewireError, MissingExtraError

try:
    from openlineage.client.transport import Config, Transport
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("openlineage-python", "openlineage", "The OpenLineage service") from exc

from lineagewire.consumers.runtime.retry import refused_for_good, retried_4xx_text

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
    """POSTs rendered events through one ``curl.CurlPool`` (see the module docstring). Open and close it on the
    ``InFlight`` loop (``InFlight.call(delivery.open())``)."""

    def __init__(self, config: Any, *, concurrency: int = 32, trust_env: bool = False) -> None:
        self.url = urljoin(config.url.strip(), config.endpoint)
        self.auth = config.auth
        self.compression = str(config.compression) if config.compression else None
        self.custom_headers = dict(config.custom_headers or {})
        for name, value in self.custom_headers.items():
            if not (str(name).isascii() and str(value).isascii()):
                raise ConfigError(f"OpenLineage http transport custom_headers {name!r}: {value!r} is not ASCII; "
                                  "expected HTTP header names and values in ASCII")
        self.base_headers = {"Content-Type": "application/json"}
        if self.compression == "gzip":
            self.base_headers["Content-Encoding"] = "gzip"
        # openlineage-python's order: its own headers, then the token's Authorization, then custom_headers
        self.headers = {**self.base_headers, **self.custom_headers}
        self.options = curl_options(config, self.url, trust_env)
        self.concurrency = concurrency
        self._pool: Any = None
        self._slots: asyncio.Semaphore | None = None

    async def open(self) -> None:
        from .curl import CurlPool

        self._pool = CurlPool(self.options, headers=header_lines(self.headers), connections=self.concurrency)
        # InFlight has more lanes than connections: the lanes past ``concurrency`` wait here, not inside libcurl,
        # whose timeout would count the wait for a connection as the request's own time.
        self._slots = asyncio.Semaphore(self.concurrency)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def send(self, batch: list[Rendered]) -> None:
        """POST each event of ``batch`` in order; raise ``EmitError`` unless the backend answered 2xx."""
        from .curl import CurlError

        pool, slots = self._pool, self._slots
        assert slots is not None  # noqa: S101 - set by open()
        for item in batch:
            headers = None
            bearer = self.auth.get_bearer() if self.auth is not None else None
            if bearer:
                headers = header_lines({**self.base_headers, "Authorization": bearer, **self.custom_headers})
            data = item.body.encode()
            if self.compression == "gzip":
                data = gzip.compress(data, compresslevel=3)
            try:
                async with slots:
                    answer = await pool.post(data, headers)
            except CurlError as exc:
                raise EmitError(f"{item.where}: OpenLineage backend {self.url} not reached: {exc}") from exc
            if answer.status >= 300 or answer.status < 200:
                raise status_error(item, self.url, answer.status, answer.reason, answer.body)


def status_error(item: Rendered, url: str, status: int, reason: str | None, answer: bytes) -> EmitError | RefusedError:
    """The error for a non-2xx answer to ``item``: ``RefusedError`` (dead-lettered) when the status says the
    backend will never take it, ``EmitError`` (retried) otherwise."""
    said = answer[:300].decode("utf-8", "replace").strip()
    if not refused_for_good(status):
        return EmitError(f"{item.where}: OpenLineage backend {url} answered {status} {reason}"
                         f"{f': {said}' if said else ''}; expected 2xx")
    return RefusedError(f"{item.where}: OpenLineage backend {url} refused the event with {status} {reason}"
                        f"{f' ({said})' if said else ''}; expected 2xx: a 4xx answer other than {retried_4xx_text()} "
                        "means the backend will never take this event, so it is dead-lettered")


def curl_options(config: Any, url: str, trust_env: bool) -> dict[int, Any]:
    """The libcurl options of every request for openlineage-python's ``HttpConfig`` ``config``: its timeout (to
    connect, and for the whole request), TLS, redirects, and with ``trust_env`` the proxy variables and
    ``~/.netrc`` (proxies as ``urllib`` reads them: ``HTTP_PROXY`` too, which libcurl ignores, and ``NO_PROXY``)."""
    from lineagewire import __version__

    from .curl import pycurl  # (which says what to install when pycurl is missing)

    ms = max(int(float(config.timeout) * 1000), 1)
    options = {pycurl.URL: url, pycurl.POST: 1, pycurl.USERAGENT: f"lineagewire/{__version__}", pycurl.NOSIGNAL: 1,
               pycurl.TIMEOUT_MS: ms, pycurl.CONNECTTIMEOUT_MS: ms,
               pycurl.PROXY: _proxy(url) if trust_env else "",  # "" is no proxy: libcurl would read http_proxy itself
               pycurl.NETRC: pycurl.NETRC_OPTIONAL if trust_env else pycurl.NETRC_IGNORED}
    tls = _tls_options(config)
    options.update(tls)
    # Never with a client certificate, as openlineage-python: it would be shown to another endpoint. A redirect is
    # followed as a POST with its body: a 2xx from a GET would not mean the event was taken.
    if pycurl.SSLCERT not in tls:
        options.update({pycurl.FOLLOWLOCATION: 1, pycurl.MAXREDIRS: 5, pycurl.POSTREDIR: pycurl.REDIR_POST_ALL})
    return options


def _proxy(url: str) -> str:
    """The proxy for ``url`` as ``urllib`` reads the environment, or "" for none."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return ""
    return str(proxy)


def _tls_options(config: Any) -> dict[int, Any]:
    """The libcurl TLS options of ``config``'s ``verify`` and ``ssl_context``: the CA bundle (its own, else the
    system's), verification, and the client certificate and key."""
    from .curl import pycurl

    ctx = getattr(config, "ssl_context", None)
    ca_file, cert, key = (getattr(ctx, name, None) or None
                          for name in ("ca_cert_path", "client_cert_path", "client_key_path"))
    options: dict[int, Any] = {}
    # As openlineage-python's http transport: a CA bundle of its own turns verification on, whatever ``verify`` says.
    if not config.verify and ca_file is None:
        options.update({pycurl.SSL_VERIFYPEER: 0, pycurl.SSL_VERIFYHOST: 0})
    ca_file, ca_dir = (ca_file, None) if ca_file else system_ca()
    for option, value in ((pycurl.CAINFO, ca_file), (pycurl.CAPATH, ca_dir), (pycurl.SSLCERT, cert),
                          (pycurl.SSLKEY, key if cert else None)):
        if value:
            options[option] = value
    return options


def system_ca() -> tuple[str | None, str | None]:
    """The CA bundle and folder Python's ``ssl`` uses (``SSL_CERT_FILE`` and ``SSL_CERT_DIR``, else OpenSSL's own),
    and certifi's bundle when there is no such file: pycurl's wheels bring a libcurl that looks where the wheel was
    built (a RHEL path), which other systems lack."""
    paths = ssl.get_default_verify_paths()
    if paths.cafile is None:
        try:
            import certifi
        except ImportError:  # pragma: no cover - requests, which openlineage-python needs, needs certifi
            return None, paths.capath
        return certifi.where(), paths.capath
    return paths.cafile, paths.capath


def header_lines(headers: dict[str, str]) -> list[str]:
    """libcurl's ``HTTPHEADER`` lines for ``headers``: an empty value as ``Name;`` (libcurl drops ``Name:`` with
    nothing after it), and ``Expect:`` so a large body is not held back for a ``100 Continue``."""
    return [f"{k}: {v}" if str(v) else f"{k};" for k, v in headers.items()] + ["Expect:"]


def kafka_message_key(event: Any, message_key: str | None = None) -> str:
    """The key openlineage-python's kafka transport gives an event (see the module docstring)."""
    if message_key:
        return message_key
    dataset = getattr(event, "dataset", None)
    if dataset is not None:  # a DatasetEvent (ingested), keyed as openlineage-python keys it
        return f"dataset:{dataset.namespace}/{dataset.name}"
    job = event.job
    if getattr(event, "run", None) is None:  # a JobEvent (ingested)
        return f"job:{job.namespace}/{job.name}"
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
