"""Running the receiver: ``run`` (the command, until SIGTERM) and ``serve`` (in-process, for tests and demos).

Both build the same pieces from the settings: the ``Intake`` (validate,
translate, encode), the ``DurableSink`` on the outbox folder, the ASGI
``ReceiverApp``, served by uvicorn with httptools' parser and uvloop when they
are installed (the ``ingest`` extra brings both). One process, one Kafka
producer, one outbox folder: a second receiver on the same folder spools into
a folder of its own inside it (``lineagewire.kafka.outbox``).

    with serve(IngestSettings(port=0, token="k"), kafka_settings) as url:
        # url: "http://127.0.0.1:PORT"; OpenLineage clients post to url + "/api/v1/lineage"
        ...
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
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

__all__ = ["build", "run", "serve"]


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


def run(ingest: IngestSettings, settings: Settings, *, log_level: str = "warning") -> ReceiverApp:
    """Serve until SIGINT/SIGTERM (uvicorn finishes the requests in flight), then flush; the app, for its counters."""
    import uvicorn

    if ingest.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving the OpenLineage receiver on %s: reachable from other machines%s", ingest.host,
                    "" if ingest.token else ", with no token required")
    app = build(ingest, settings)
    try:
        uvicorn.run(app, **_uvicorn_options(ingest.host, ingest.port, log_level))
    finally:
        app.sink.close()
    return app
