"""A DataHub GMS stand-in on 127.0.0.1 that checks every request against GMS's documented Rest.li contract.

GMS itself ships only as a Docker image; this checks what acryl-datahub's ``DatahubRestEmitter``
sends, as GMS would accept it:

* ``GET /config`` answers ``{"noCode": "true", ...}`` (the emitter refuses a server without it);
* writes are ``POST /aspects?action=ingestProposal`` (``{"proposal": MCP, "async": "true"|"false"}``) or
  ``POST /aspects?action=ingestProposalBatch`` (``{"proposals": [MCP...], "async": ...}``), with
  ``Content-Type: application/json``, ``X-RestLi-Protocol-Version: 2.0.0`` and, when a token is set,
  ``Authorization: Bearer <token>`` (401 otherwise);
* each MCP has ``entityType``, ``entityUrn``, ``changeType``, ``aspectName`` and
  ``aspect: {"contentType": "application/json", "value": "<JSON text>"}``; it must deserialize into
  DataHub's ``MetadataChangeProposalClass``, its UPSERT aspect into the generated class named by
  ``aspectName`` (valid against its Avro schema), and the aspect must belong to the entity type.
  A request that breaks any of this gets 400 with ``{"message": ...}``, as GMS answers.

``refuse(mcp)``: True for a proposal this GMS takes for invalid (400, as for one that breaks the contract);
``refused`` lists how many proposals each request refused so carried.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from datahub.metadata.schema_classes import ASPECT_NAME_MAP, ENTITY_TYPE_TO_ASPECT_NAMES, MetadataChangeProposalClass

from tests.helpers import LocalServer, latency

_MCP_KEYS = {"entityType", "entityUrn", "entityKeyAspect", "changeType", "aspectName", "aspect", "systemMetadata",
             "headers", "auditHeader"}



def problems_of(mcp: Any) -> list[str]:
    """What is wrong with one proposal as GMS reads it (empty: nothing)."""
    if not isinstance(mcp, dict):
        return [f"proposal is a {type(mcp).__name__}; expected an object"]
    out = [f"unknown field {k!r}" for k in mcp if k not in _MCP_KEYS]
    for key in ("entityType", "entityUrn", "changeType", "aspectName", "aspect"):
        if key not in mcp:
            out.append(f"missing {key}")
    if out:
        return out
    aspect = mcp["aspect"]
    # GMS reads an UPSERT's aspect as JSON and a PATCH's as a JSON Patch (GenericRecordUtils' JSON / JSON_PATCH,
    # the content type acryl-datahub's patch builders give)
    content = "application/json-patch+json" if mcp["changeType"] == "PATCH" else "application/json"
    if set(aspect) != {"contentType", "value"} or aspect["contentType"] != content or \
            not isinstance(aspect["value"], str):
        return [f"aspect {aspect!r:.200}: expected {{contentType: {content}, value: <JSON text>}}"]
    try:
        MetadataChangeProposalClass.from_obj(mcp)
        value = json.loads(aspect["value"])
    except Exception as exc:  # noqa: BLE001 - any failure is the client's fault
        return [f"not a MetadataChangeProposal: {exc}"]
    if mcp["aspectName"] not in ENTITY_TYPE_TO_ASPECT_NAMES.get(mcp["entityType"], ()):
        out.append(f"aspect {mcp['aspectName']} does not belong to entity type {mcp['entityType']}")
    if mcp["changeType"] == "UPSERT":
        cls = ASPECT_NAME_MAP.get(mcp["aspectName"])
        if cls is None:
            out.append(f"unknown aspect {mcp['aspectName']}")
        else:
            try:
                if not cls.from_obj(value).validate():
                    out.append(f"{mcp['aspectName']} does not validate against its schema")
            except Exception as exc:  # noqa: BLE001
                out.append(f"{mcp['aspectName']}: {exc}")
    elif mcp["changeType"] == "PATCH":
        if not isinstance(value, list) or not all({"op", "path"} <= set(op) for op in value):
            out.append("PATCH value: expected a JSON Patch array of {op, path, value}")
    else:
        out.append(f"changeType {mcp['changeType']}: expected UPSERT or PATCH")
    return out


class FakeGms:
    """``proposals``: every accepted MCP (as sent); ``requests``: (method, path, headers) of every request."""

    def __init__(self, token: str | None = None, no_code: bool = True, delay: float = 0.0, port: int = 0,
                 refuse: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.token = token
        self.no_code = no_code
        self.delay = delay  # seconds each write takes (a slower backend keeps several batches in flight)
        self.down = False
        self.in_flight = 0
        self.most_in_flight = 0  # the most writes handled at the same time
        self.proposals: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.rejected: list[str] = []
        self.refuse = refuse
        self.refused: list[int] = []
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if outer.token is None or self.headers.get("Authorization") == f"Bearer {outer.token}":
                    return True
                with outer._lock:
                    outer.rejected.append(f"{self.command} {self.path}: bad or missing bearer token")
                self._answer(401, {"message": "Unauthorized", "status": 401})
                return False

            def do_GET(self) -> None:  # noqa: N802
                with outer._lock:
                    outer.requests.append(("GET", self.path, dict(self.headers)))
                if not self._authorized():
                    return
                if urlsplit(self.path).path != "/config":
                    self._answer(404, {"message": f"no GET {self.path}"})
                    return
                body: dict[str, Any] = {"versions": {"acryldata/datahub": {"version": "v1.3.0"}}}
                if outer.no_code:
                    body["noCode"] = "true"
                self._answer(200, body)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer._lock:
                    outer.requests.append(("POST", self.path, dict(self.headers)))
                if not self._authorized():
                    return
                if outer.down:
                    self._answer(503, {"message": "GMS is down", "status": 503})
                    return
                with outer._lock:
                    outer.in_flight += 1
                    outer.most_in_flight = max(outer.most_in_flight, outer.in_flight)
                try:
                    if outer.delay:
                        latency(outer.delay)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1
                url = urlsplit(self.path)
                action = parse_qs(url.query).get("action", [""])[0]
                errors = []
                if url.path != "/aspects" or action not in ("ingestProposal", "ingestProposalBatch"):
                    errors.append(f"POST {self.path}: expected /aspects?action=ingestProposal[Batch]")
                if self.headers.get("X-RestLi-Protocol-Version") != "2.0.0":
                    errors.append("missing header X-RestLi-Protocol-Version: 2.0.0")
                if not (self.headers.get("Content-Type") or "").startswith("application/json"):
                    errors.append("Content-Type is not application/json")
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError as exc:
                    body, errors = {}, [*errors, f"body is not JSON: {exc}"]
                many = action == "ingestProposalBatch"
                key = "proposals" if many else "proposal"
                if set(body) - {key, "async"} or key not in body or body.get("async", "false") not in ("true",
                                                                                                       "false"):
                    errors.append(f"body keys {sorted(body)}: expected {key!r} and 'async' ('true' or 'false')")
                mcps = body.get(key, []) if many else [body.get(key)]
                if many and not isinstance(mcps, list):
                    errors.append("'proposals' is not an array")
                    mcps = []
                for i, m in enumerate(mcps):
                    errors += [f"proposal {i}: {p}" for p in problems_of(m)]
                refused = [f"proposal {i}: {m['aspectName']} of {m['entityUrn']} is invalid" for i, m in enumerate(mcps)
                           if outer.refuse is not None and isinstance(m, dict) and outer.refuse(m)]
                if refused:
                    with outer._lock:
                        outer.refused.append(len(mcps))
                    self._answer(400, {"message": "; ".join(refused[:5]), "status": 400})
                    return
                if errors:
                    with outer._lock:
                        outer.rejected += errors
                    self._answer(400, {"message": "; ".join(errors[:5]), "status": 400})
                    return
                with outer._lock:
                    outer.proposals += mcps
                urns = [m["entityUrn"] for m in mcps]
                self._answer(200, {"value": urns if many else urns[0]})

        self._http = LocalServer(_H, port=port)
        self.url = self._http.url

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.proposals)

    def __enter__(self) -> FakeGms:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def kill(self) -> None:
        """Stop answering at once: the listening socket is closed (connections are refused)."""
        self._http.kill()
