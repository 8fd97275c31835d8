"""Fixtures for the emitter tests: an emitter factory that always closes what it made."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def emitter_config(tmp_path) -> dict[str, str]:  # noqa: ANN001
    """Per-test emitter settings: own outbox folder, short timeouts, no streaming listener unless asked."""
    return {"outbox_dir": str(tmp_path / "outbox"), "flush_timeout": "20", "delivery_timeout": "5",
            "streaming_listener": "false"}


@pytest.fixture
def make_emitter(spark, emitter_config) -> Iterator[Any]:  # noqa: ANN001
    from lineagewire.producers.spark import install

    made: list[Any] = []

    def make(**kwargs: Any) -> Any:
        kwargs["config"] = {**emitter_config, **kwargs.get("config", {})}
        emitter = install(spark, **kwargs)
        made.append(emitter)
        return emitter

    yield make
    for emitter in made:
        emitter.close(5)
