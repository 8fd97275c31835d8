"""``lineagewire ui``: a read-only web UI over the job registry, its alerts and refresh health.

Served by the registry's own FastAPI app (``registry_api.create_app``) with the pages added by
``app.add_ui``; ``build_app`` puts the two together. See docs/ui.md.
"""

from __future__ import annotations

from .server import build_app

__all__ = ["build_app"]
