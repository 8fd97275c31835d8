"""The offline OpenLineage spec check: <repo>/../shared/tools/validate_openlineage.py, when it exists."""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[3]
VALIDATOR = ROOT.parent / "shared" / "tools" / "validate_openlineage.py"


def load_validator() -> Callable[[list[dict[str, Any]]], list[str]] | None:
    """A function returning the spec errors of events, or None when ../shared is absent."""
    if not VALIDATOR.is_file():
        return None
    spec = importlib.util.spec_from_file_location("validate_openlineage", VALIDATOR)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    registry, facets = mod._registry()

    def validate(events: list[dict[str, Any]]) -> list[str]:
        return [f"#{i}: {e}" for i, ev in enumerate(events) for e in mod.validate(ev, registry, facets)]
    return validate
