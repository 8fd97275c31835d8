"""The OpenLineage HTTP receiver: ``POST /api/v1/lineage`` as Marquez serves it, as a plain ASGI app.

Any OpenLineage HTTP transport (openlineage-python, -java, -spark, Airflow's
provider, ``dbt-ol``) points at it unchanged:

* ``POST /api/v1/lineage`` with one event, or a JSON array of events;
  ``Content-Type: application/json`` (415 otherwise); ``Content-Encoding: gzip``
  or none (415 for another); ``Authorization: Bearer <token>`` when a token is
  set (401 otherwise); at most ``max_body_bytes`` after gunzip (413).
* 201 with an empty body, as Marquez answers, once every event of the request
  is on Kafka or in the outbox (``sink.DurableSink``); 400 with the event and the
  field for an event that is not JSON, that the spec rejects or that cannot be
  translated (``intake.Intake``): nothing of such a request is published; 503
  when the events could be stored nowhere (the producer retries).
* Every refusal answers ``{"error": "<reason>"}``. ``GET /healthz`` answers
  ``{"status": "ok", ...counters}``.

Why a plain ASGI app and not FastAPI: the receiver is one route whose cost is
per request (openlineage-python posts one event per request), and FastAPI's
routing, dependency injection and response models cost more per request than
validating and translating the event does. uvicorn serves it with httptools'
HTTP parser and uvloop (``server.py``).
"""

from __future__ import annotations

import hmac
import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic import SecretStr

from .http_errors import IngestRejected, InvalidEvent
from .intake import Intake
from .sink import DurableSink

log = logging.getLogger(__name__)

__all__ = ["LINEAGE_PATH", "ReceiverApp"]

LINEAGE_PATH = "/api/v1/lineage"
_HEALTH_PATH = "/healthz"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ReceiverApp:
    """The ASGI app of the receiver; see the module docstring."""

    def __init__(self, intake: Intake, sink: DurableSink, *, token: SecretStr | None = None,
                 max_body_bytes: int = 16 << 20) -> None:
        self.intake = intake
        self.sink = sink
        self._token = f"Bearer {token.get_secret_value()}".encode() if token is not None else None
        self.max_body_bytes = max_body_bytes
        self.accepted = 0
        self.rejected = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == LINEAGE_PATH:
            if method != "POST":
                await _answer(send, 405, {"error": f"{method} {path}: expected POST"}, {"allow": "POST"})
                return
            await self._lineage(scope, receive, send)
        elif path == _HEALTH_PATH and method in ("GET", "HEAD"):
            await _answer(send, 200, {"status": "ok", "accepted_requests": self.accepted,
                                      "rejected_requests": self.rejected, **self.sink.stats()})
        else:
            await _answer(send, 404, {"error": f"{method} {path}: no such resource; expected POST {LINEAGE_PATH}"})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """The server's start and stop: at stop (its requests answered) the sink hands what is left to the outbox."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.sink.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _lineage(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            headers = _headers(scope)
            self._check_token(headers.get(b"authorization"))
            _check_content_type(headers.get(b"content-type"))
            gzipped = _encoding(headers.get(b"content-encoding"))
            body = await self._body(receive, headers.get(b"content-length"), gzipped)
            messages = self.intake.messages(self.intake.parse(body))
            await self.sink.store(messages)
        except IngestRejected as exc:
            self.rejected += 1
            log.debug("%s %s: %d %s", scope["method"], scope["path"], exc.status, exc.reason)
            await _answer(send, exc.status, {"error": exc.reason}, exc.headers)
            return
        except Exception as exc:  # a bug of ours: say so, and let the producer retry (5xx)
            self.rejected += 1
            log.exception("%s %s: unexpected failure", scope["method"], scope["path"])
            await _answer(send, 500, {"error": f"internal error: {type(exc).__name__}: {exc}"})
            return
        self.accepted += 1
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    def _check_token(self, given: bytes | None) -> None:
        if self._token is None:
            return
        if given is None:
            raise IngestRejected(401, "no Authorization header; expected 'Authorization: Bearer <token>' (the "
                                 "transport's api_key)", headers={"www-authenticate": "Bearer"})
        if not hmac.compare_digest(given, self._token):
            raise IngestRejected(401, "the bearer token is wrong; expected the receiver's token (the transport's "
                                 "api_key)", headers={"www-authenticate": 'Bearer error="invalid_token"'})

    async def _body(self, receive: Receive, length: bytes | None, gzipped: bool) -> bytes:
        limit = self.max_body_bytes
        if length is not None and not gzipped and length.isdigit() and int(length) > limit:
            raise _too_large(int(length), limit)
        body = _Body(limit, gzipped)
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise IngestRejected(400, "the client closed the connection before the body was complete")
            body.add(message.get("body", b""))
            if not message.get("more_body", False):
                return body.done()


class _Body:
    """A request body read chunk by chunk, gunzipped on the way when it is gzip, never past ``limit`` bytes."""

    def __init__(self, limit: int, gzipped: bool) -> None:
        self.limit = limit
        self.size = 0
        self.chunks: list[bytes] = []
        self.inflate = zlib.decompressobj(wbits=31) if gzipped else None

    def add(self, chunk: bytes) -> None:
        if self.inflate is not None and chunk:
            try:
                # bounded: a small gzip bomb must not inflate past the limit in memory
                chunk = self.inflate.decompress(chunk, self.limit + 1 - self.size)
            except zlib.error as exc:
                raise InvalidEvent(f"the body is not valid gzip ({exc}); expected gzip data with "
                                   "Content-Encoding: gzip") from None
            if self.inflate.unconsumed_tail:
                raise _too_large(None, self.limit)
        self.size += len(chunk)
        if self.size > self.limit:
            raise _too_large(self.size, self.limit)
        self.chunks.append(chunk)

    def done(self) -> bytes:
        if self.inflate is not None and not self.inflate.eof:
            raise InvalidEvent("the gzip body ends early; expected a complete gzip stream")
        return b"".join(self.chunks)


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {k.lower(): v for k, v in scope["headers"]}


def _check_content_type(value: bytes | None) -> None:
    media = (value or b"").split(b";", 1)[0].strip().lower()
    if media != b"application/json" and not media.endswith(b"+json"):
        shown = value.decode("latin-1")[:100] if value is not None else "none"
        raise IngestRejected(415, f"Content-Type {shown}; expected application/json")


def _encoding(value: bytes | None) -> bool:
    """True for a gzip body; 415 for an encoding other than gzip or identity."""
    enc = (value or b"identity").strip().lower()
    if enc in (b"identity", b""):
        return False
    if enc in (b"gzip", b"x-gzip"):
        return True
    raise IngestRejected(415, f"Content-Encoding {enc.decode('latin-1')[:50]}; expected gzip or none")


def _too_large(size: int | None, limit: int) -> IngestRejected:
    said = f"{size} bytes" if size is not None else "more"
    return IngestRejected(413, f"the body is {said} (after gunzip); expected at most {limit} bytes (max_body_bytes)")


async def _answer(send: Send, status: int, doc: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    body = orjson.dumps(doc)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
