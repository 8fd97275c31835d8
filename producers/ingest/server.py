"""Running the receiver: ``run`` (the command, until SIGTERM) and ``serve`` (in-process, for tests and demos).

Both build the same pieces from the settings: the ``Intake`` (validate,
translate, encode), the ``DurableSink`` on the outbox folder, the ASGI
``ReceiverApp``, served by uvicorn with httptools' parser and uvloop when they
are installed (the ``ingest`` extra brings both). One process, one Kafka
producer, one outbox folder: a second receiver on the same folder spools into
a folder of its own inside it (``lineagewire.kafka.outbox``). ``workers`` > 1
starts that many processes on the one port (uvicorn's workers), each its own
receiver, so the receiver uses more than one core.

    with serve(IngestSettings(port=0, token="k"), kafka_settings) as url:
        # url: "http://127.0.0.1:PORT"; OpenLineage clients post to url + "/api/v1/lineage"
        ...
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from lineagewire.config import Settings
from lineagewire.exceptions import ConfigError, require

from .intake import Intake, Translator
from .receiver import ReceiverApp
from .settings import IngestSettings
from .sink import DurableSink, StrictOutbox

log = logging.getLogger(__name__)

__all__ = ["WORKER_ENV", "build", "run", "serve", "worker_app"]

#: where ``run`` tells its worker processes which config file and flags the command was given
WORKER_ENV = "LINEAGEWIRE_INGEST_WORKER_SOURCES"


def build(ingest: IngestSettings, settings: Settings, *, translator: Translator | None = None) -> ReceiverApp:
    """The receiver's ASGI app, its sink started (close it with ``app.sink.close()``)."""
    intake = Intake(settings, topic=ingest.topic, translator=translator)
    outbox = StrictOutbox(ingest.outbox_path(), int(ingest.outbox_max_mb * (1 << 20)))
    sink = DurableSink(settings, outbox, ack_timeout=ingest.ack_timeout)
    return ReceiverApp(intake, sink, token=ingest.token, max_body_bytes=ingest.max_body_bytes)


def _uvicorn_options(host: str, port: int, log_level: str) -> dict[str, Any]:
    """uvicorn's options for the receiver (``uvicorn.run`` and ``uvicorn.Config`` take the same)."""
    require("uvicorn", "ingest", "The OpenLineage receiver")
    fast = importlib.util.find_spec("httptools") is not None
    return {"host": host, "port": port, "log_level": log_level, "access_log": False, "lifespan": "off",
            "proxy_headers": False, "server_header": False, "http": "httptools" if fast else "h11",
            "loop": "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio",
            # producers keep their connection (openlineage-python's session): keep it open a while
            "timeout_keep_alive": 30, "backlog": 2048}


@contextlib.contextmanager
def serve(ingest: IngestSettings, settings: Settings, *, translator: Translator | None = None,
          start_timeout: float = 30.0) -> Iterator[str]:
    """The receiver served on a thread of this process; its base URL (``http://HOST:PORT``, the port the server
    really bound when ``ingest.port`` is 0). Leaving the block stops the server, then flushes the sink."""
    import uvicorn

    app = build(ingest, settings, translator=translator)
    server = uvicorn.Server(uvicorn.Config(app, **_uvicorn_options(ingest.host, ingest.port, "warning")))
    thread = threading.Thread(target=server.run, name="lineagewire-ingest-http", daemon=True)
    try:
        thread.start()
        deadline = time.monotonic() + start_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the OpenLineage receiver did not start on {ingest.host}:{ingest.port} within "
                                  f"{start_timeout:.0f}s; expected a free port (see the log above)")
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://{ingest.host}:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        app.sink.close()


def run(ingest: IngestSettings, settings: Settings, *, log_level: str = "warning",
        sources: dict[str, Any] | None = None) -> ReceiverApp | None:
    """Serve until SIGINT/SIGTERM (uvicorn finishes the requests in flight), then flush; the app, for its counters
    (None with several workers, whose apps live in their own processes).

    ``sources``: where the settings came from (``{"config_file", "ingest", "kafka"}``: the config file and the
    flags given), which each worker process loads again under the same rule when ``ingest.workers`` > 1.
    """
    import uvicorn

    from lineagewire.consumers.runtime import tune_gc

    if ingest.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving the OpenLineage receiver on %s: reachable from other machines%s", ingest.host,
                    "" if ingest.token else ", with no token required")
    options = _uvicorn_options(ingest.host, ingest.port, log_level)
    if ingest.workers > 1:
        # uvicorn starts each worker from an import string: the worker builds its app from the same sources.
        os.environ[WORKER_ENV] = json.dumps(sources or {})
        uvicorn.run(f"{__name__}:worker_app", factory=True, workers=ingest.workers, **{**options, "lifespan": "on"})
        return None
    app = build(ingest, settings)
    tune_gc()
    server = uvicorn.Server(uvicorn.Config(app, **options))
    with _stop_signals_noted(server):
        try:
            server.run()
        finally:
            app.sink.close()
    if not server.started and not server.should_exit:
        raise ConfigError(f"the OpenLineage receiver could not serve on {ingest.host}:{ingest.port} (see uvicorn's "
                          "error above); expected a free port on an address of this machine")
    return app


@contextlib.contextmanager
def _stop_signals_noted(server: Any) -> Iterator[None]:
    """SIGINT and SIGTERM stop ``server`` and are otherwise only noted, while it serves and the sink flushes.

    uvicorn handles the signal while it serves (it stops), then raises it again once it has stopped, under the
    handlers that were in place before it started: Python's would end the process there (SIGTERM: killed;
    SIGINT: KeyboardInterrupt), before the sink is flushed and the command reports. These let ``run`` return,
    so a stop is a clean exit 0 with nothing in flight lost; one that comes before uvicorn listens stops it too."""
    def stop(sig: int, _frame: Any) -> None:
        log.debug("signal %d: the receiver stops, flushes and exits", sig)
        server.should_exit = True

    noted = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in noted.items():
            signal.signal(sig, handler)


def worker_app() -> ReceiverApp:
    """The app of one worker process of ``run`` (uvicorn's factory): the settings loaded again from the sources the
    command was given (``WORKER_ENV``); its sink closes at the server's shutdown (ASGI lifespan)."""
    from lineagewire.config import load_settings
    from lineagewire.consumers.runtime import tune_gc

    sources = json.loads(os.environ.get(WORKER_ENV) or "{}")
    config_file = sources.get("config_file")
    ingest = IngestSettings.load(config_file, **sources.get("ingest", {}))
    app = build(ingest, load_settings(config_file, **sources.get("kafka", {})))
    tune_gc()
    return app
