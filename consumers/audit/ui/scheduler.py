"""What the UI reads from the scheduler's REST API (``--scheduler-url``): a refresh workflow and its table's health
(the job page), a materialized table's inputs, their health and why its refresh is held (the table page).

Read over HTTP, not by importing the scheduler: services stay independent (the import-linter contract), and the
UI may run on another machine than the scheduler. A scheduler that is down or answers an error never breaks a
page: the section says what went wrong instead (``Answer.error``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["Answer", "SchedulerReader", "hold_text"]

#: seconds the UI waits for the scheduler before showing the page without its answer
TIMEOUT = 2.0

#: a hold condition (the contract's HoldCondition) in words
_CONDITIONS = {"UPSTREAM_FAILED": "upstream failed", "UPSTREAM_RUNNING": "upstream still running",
               "BREAKING_CHANGE": "breaking change upstream", "INPUT_STALE": "input stale"}


@dataclass(frozen=True)
class Answer:
    """The scheduler's JSON answer (``data``), or why there is none (``error``: a sentence naming the scheduler)."""

    data: Any = None
    error: str | None = None
    #: the scheduler answered 404: it does not know what was asked for (a table it does not declare)
    missing: bool = False


def hold_text(condition: str) -> str:
    """A hold condition in words (``UPSTREAM_FAILED`` -> ``upstream failed``); an unknown one as it is."""
    return _CONDITIONS.get(condition, condition)


class SchedulerReader:
    """GETs on the scheduler's REST API at ``url`` (None: no scheduler given, every answer says so)."""

    def __init__(self, url: str | None) -> None:
        self.url = url

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    def get(self, client: httpx.Client, path: str) -> Answer:
        """``GET path`` with ``client`` (one per page, so a page's requests share a connection)."""
        try:
            resp = client.get(path)
            if resp.status_code == 404:
                return Answer(error=f"scheduler at {self.url}: {_detail(resp)}", missing=True)
            resp.raise_for_status()
            return Answer(data=resp.json())
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            return Answer(error=f"scheduler at {self.url}: {exc}")

    def client(self) -> httpx.Client:
        assert self.url is not None
        return httpx.Client(base_url=self.url, timeout=TIMEOUT)

    def workflows(self, workflow_ids: list[str]) -> list[dict[str, Any]]:
        """``GET /workflows/{id}`` of each of the (first five) workflows: ``{workflow_id, info, error}``."""
        if not self.url or not workflow_ids:
            return []
        with self.client() as client:
            answers = [(wf, self.get(client, f"/workflows/{quote(wf, safe='')}")) for wf in workflow_ids[:5]]
        return [{"workflow_id": wf, "info": a.data, "error": a.error} for wf, a in answers]

    def table(self, table: str) -> dict[str, Answer]:
        """A materialized table: ``status`` (``GET /tables/{t}/status``: health, held and why) and ``inputs``
        (``GET /tables/{t}/inputs``: each input's last write and health, what would hold a refresh now, the
        held refreshes)."""
        assert self.url is not None
        name = quote(table, safe="")
        with self.client() as client:
            return {"status": self.get(client, f"/tables/{name}/status"),
                    "inputs": self.get(client, f"/tables/{name}/inputs")}

    def tables(self) -> Answer:
        """``GET /tables``: every materialized table the scheduler declares."""
        assert self.url is not None
        with self.client() as client:
            return self.get(client, "/tables")


def _detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except json.JSONDecodeError:
        return f"{resp.status_code} {resp.text[:200]}"
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)
