"""A small HTTP client of the scheduler service (what ``lineagewire workflows`` uses).

``transport`` may be passed in (``httpx.ASGITransport(app)`` or a mock) so code
using the client is testable without a server.
"""

from __future__ import annotations

from typing import Any

from lineagewire.exceptions import require

from .exceptions import ServiceError

httpx = require("httpx", "scheduler", "The workflows CLI")

__all__ = ["SchedulerClient"]

DEFAULT_URL = "http://127.0.0.1:8765"


class SchedulerClient:
    """Calls the service; an error answer raises ServiceError with the server's message."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *, timeout: float = 30.0,
                 transport: Any = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)
        self.url = url

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SchedulerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ServiceError(0, f"cannot reach the scheduler at {self.url}{path}: {exc}; is "
                               "`lineagewire scheduler serve` running (or set LINEAGEWIRE_SCHEDULER__URL)?") from exc
        if resp.status_code >= 400:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text
            if not isinstance(detail, str):
                detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}" for d in detail) \
                    if isinstance(detail, list) else str(detail)
            raise ServiceError(resp.status_code, detail)
        return resp.json() if resp.content else None

    # one method per endpoint
    def tables(self) -> list[dict[str, Any]]:
        return self.request("GET", "/tables")

    def list_workflows(self, table: str | None = None) -> list[dict[str, Any]]:
        return self.request("GET", "/workflows", params={"table": table} if table else None)

    def create(self, table: str, **fields: Any) -> dict[str, Any]:
        return self.request("POST", "/workflows", json={"table": table, **{k: v for k, v in fields.items()
                                                                            if v is not None}})

    def show(self, workflow_id: str, limit: int = 20) -> dict[str, Any]:
        return self.request("GET", f"/workflows/{workflow_id}", params={"limit": limit})

    def suspend(self, workflow_id: str) -> dict[str, Any]:
        return self.request("POST", f"/workflows/{workflow_id}/suspend")

    def resume(self, workflow_id: str, catch_up: bool = False) -> dict[str, Any]:
        return self.request("POST", f"/workflows/{workflow_id}/resume", json={"catch_up": catch_up})

    def set_cron(self, workflow_id: str, cron: str, time_zone: str | None = None) -> dict[str, Any]:
        return self.request("PUT", f"/workflows/{workflow_id}/cron", json={"cron": cron, "time_zone": time_zone})

    def delete(self, workflow_id: str) -> None:
        self.request("DELETE", f"/workflows/{workflow_id}")

    def refresh(self, table: str, nominal_time: str | None = None, force: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"nominal_time": nominal_time}
        if force:
            body["force"] = True
        return self.request("POST", f"/tables/{table}/refresh", json=body)

    def table_inputs(self, table: str) -> dict[str, Any]:
        return self.request("GET", f"/tables/{table}/inputs")

    def backfill(self, workflow_id: str, start: str, end: str) -> list[dict[str, Any]]:
        return self.request("POST", f"/workflows/{workflow_id}/backfill", json={"start": start, "end": end})

    def cancel(self, command_id: str, reason: str = "") -> dict[str, Any]:
        return self.request("POST", f"/refreshes/{command_id}/cancel", json={"reason": reason})

    def refreshes(self, table: str | None = None, workflow_id: str | None = None, limit: int = 50) -> list[Any]:
        params = {k: v for k, v in {"table": table, "workflow_id": workflow_id, "limit": limit}.items() if v}
        return self.request("GET", "/refreshes", params=params)

    def table_status(self, table: str) -> dict[str, Any]:
        return self.request("GET", f"/tables/{table}/status")
