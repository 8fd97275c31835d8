"""The OpenLineage service: translate each event and send it through an OpenLineage transport.

Transport configuration is OpenLineage's own, with its own precedence
(openlineage-python's ``OpenLineageClient``):

1. ``config`` passed here (``lineagewire consume openlineage --openlineage-config FILE``
   loads that YAML, ``--url`` means ``{"transport": {"type": "http", "url": URL}}``);
2. ``openlineage.yml`` from ``$OPENLINEAGE_CONFIG``, the working directory or ``~/.openlineage/``;
3. ``OPENLINEAGE__TRANSPORT__TYPE=http``, ``OPENLINEAGE__TRANSPORT__URL=...`` style variables;
4. ``OPENLINEAGE_URL`` (+ ``OPENLINEAGE_API_KEY``, ``OPENLINEAGE_ENDPOINT``): HTTP;
5. nothing configured: the console transport (events in the log).

Any transport openlineage-python has works: http, kafka, file, console,
composite (and its dotted-path plugins).

Retries belong to the runtime (``--retry-initial``/``--retry-max``/``--give-up-after``):
an HTTP transport (also inside a composite) whose config does not set ``retry``
gets ``{"total": 0}`` instead of openlineage-python's default of five urllib3
retries with backoff (about 9.5 s per attempt of the runtime, interleaved with
its backoff). A ``retry`` section set in the config is kept; then each runtime
attempt makes up to 1 + ``total`` requests, and the two backoffs add up.
"""

from __future__ import annotations

import logging
import pathlib
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from lineagewire.consumers.runtime.base import Handler
from lineagewire.exceptions import ConfigError, require

from . import serde
from .exceptions import EmitError
from .translate import Translator

if TYPE_CHECKING:
    from lineagewire.consumers.runtime.record import Record

log = logging.getLogger(__name__)

__all__ = ["OpenLineageHandler", "load_openlineage_config", "make_client"]


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

    It is a ``LineagewireClient``: openlineage-python's client, spared a scan of the environment per event.
    """
    require("openlineage.client", "openlineage", "The OpenLineage service")
    from .client import LineagewireClient

    # openlineage-python logs a WARNING of its own before raising for an unknown transport type; the
    # ConfigError below says it in one line.
    quiet = logging.getLogger("openlineage.client.utils")
    drop = logging.Filter("nothing")  # passes no record of this logger
    quiet.addFilter(drop)
    try:
        client = LineagewireClient(config=config)
    except (ValueError, TypeError, RuntimeError, KeyError, ImportError, AttributeError) as exc:
        raise ConfigError(f"OpenLineage transport configuration is invalid: {type(exc).__name__}: {exc}; expected "
                          "a transport type such as http, kafka, file, console or composite (see "
                          "https://openlineage.io/docs/client/python#configuration)") from exc
    finally:
        quiet.removeFilter(drop)
    runtime_owns_retries(getattr(client, "transport", None))
    return client


def runtime_owns_retries(transport: Any) -> None:
    """Turn off urllib3's retries in HTTP transports whose config left ``retry`` at its default (see above)."""
    from openlineage.client.transport.http import DEFAULT_RETRY_CONFIG, HttpTransport

    for t in getattr(transport, "transports", None) or [transport]:
        if getattr(t, "transports", None):
            runtime_owns_retries(t)
        elif isinstance(t, HttpTransport) and t.config.retry is DEFAULT_RETRY_CONFIG:
            # The default is one shared dict (attrs' default): identity tells "not set by the user".
            t.config.retry = {"total": 0}
            if t._session is not None:  # else built from the config on the first emit
                t._prepare_session(t._session)


class OpenLineageHandler(Handler):
    """Sends each lineagewire event to OpenLineage as RunEvents (see ``translate``).

    ``client``: anything with ``emit(event)`` and ``close()`` (an ``OpenLineageClient``,
    or a fake in unit tests); by default one is built from ``config`` and the environment.
    """

    name: ClassVar[str] = "openlineage"

    def __init__(self, client: Any = None, *, config: dict[str, Any] | None = None,
                 translator: Translator | None = None) -> None:
        self._client = client
        self._config = config
        self.translator = translator or Translator()

    @classmethod
    def prepare_process(cls) -> None:
        """The one-pass JSON rendering of RunEvents, for every transport of this process (see ``serde``)."""
        serde.install()

    @classmethod
    def from_options(cls, *, url: str | None = None, openlineage_config: str | None = None,
                     **options: Any) -> OpenLineageHandler:
        """``--url`` / ``--openlineage-config`` as ``lineagewire consume openlineage`` takes them."""
        return cls(config=load_openlineage_config(openlineage_config, url), **options)

    def render(self, record: Record) -> list[str]:
        """The RunEvents of ``record`` as OpenLineage JSON (what the transport would send)."""
        from openlineage.client.serde import Serde

        return [Serde.to_json(ev) for ev in self.translator.translate(record.event)]

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self._config)
        return self._client

    def open(self) -> None:
        kind = getattr(getattr(self.client, "transport", None), "kind", type(self.client).__name__)
        log.info("OpenLineage transport: %s (one-pass JSON rendering: %s)", kind,
                 "on" if serde.installed() else "off, openlineage-python's Serde")

    def handle(self, record: Record) -> int:
        events = self.translator.translate(record.event)
        for ev in events:
            try:
                self.client.emit(ev)
            except Exception as exc:  # noqa: BLE001 - any transport failure means the backend did not take it
                state = ev.eventType.value if ev.eventType else "event"
                raise EmitError(f"{record.where}: OpenLineage {state} for run {ev.run.runId} "
                                f"not sent: {type(exc).__name__}: {exc}") from exc
        return len(events)

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close(10)
            except Exception as exc:  # noqa: BLE001 - closing must not hide the shutdown
                log.warning("closing the OpenLineage transport failed: %s", exc)
