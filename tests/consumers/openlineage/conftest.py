"""Fixtures of the OpenLineage service tests: the receiver and the offline spec validator."""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .receiver import Receiver

ROOT = pathlib.Path(__file__).resolve().parents[3]
VALIDATOR = ROOT.parent / "shared" / "tools" / "validate_openlineage.py"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def _load_validator() -> Callable[[list[dict[str, Any]]], list[str]] | None:
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


_VALIDATE = _load_validator()


@pytest.fixture
def assert_valid_openlineage() -> Callable[[list[dict[str, Any]]], None]:
    """Checks events against ../shared/tools/validate_openlineage.py; only this check is skipped without it."""

    def check(events: list[dict[str, Any]]) -> None:
        assert events, "no OpenLineage events to validate"
        if _VALIDATE is None:
            return  # ../shared is absent: only the spec check is skipped, the test's own asserts still run
        errors = _VALIDATE(events)
        assert not errors, "\n".join(errors[:20])
    return check
