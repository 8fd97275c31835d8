"""Fixtures of the OpenLineage service tests: the receiver and the offline spec validator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .receiver import Receiver
from .spec import load_validator

_VALIDATE = load_validator()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


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
