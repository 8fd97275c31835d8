"""``build_app``: the registry's REST app with the UI's pages, read-only."""

from __future__ import annotations

import secrets
from typing import Any

from ..registry_api import create_app
from ..registry_store import RegistryStore
from .app import add_ui

__all__ = ["build_app"]


def build_app(store: RegistryStore, *, alerts_db: str | None = None, scheduler_url: str | None = None,
              token: str | None = None, promises: Any = None) -> Any:
    """The registry's app over ``store`` with the UI under ``/ui``; ``promises``
    (``lineagewire.freshness.Promises``): the freshness promises its dataset pages show.

    Read-only: the registry's one changing route (``POST /events``) gets a random token nobody is told, so
    it refuses every request. ``token`` (if given) guards every route, pages and API alike.
    """
    app = create_app(store, secrets.token_urlsafe(32))
    return add_ui(app, store, alerts_db=alerts_db, scheduler_url=scheduler_url, token=token, promises=promises)
