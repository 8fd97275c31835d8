"""The two ways a Codec decodes: with the compiled reader (``_native.native_reader``, the extension built from
native/ where cargo is on PATH) and with fastavro alone (an install without cargo)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from lineagewire.schemas import _native
from lineagewire.schemas._native import Reader

PATHS = ["native", "fastavro"]


def require_native() -> None:
    """The compiled reader's tests fail where cargo could have built it (so CI cannot fall back to fastavro
    unseen); they skip only where there is no cargo."""
    if _native.AVAILABLE:
        return
    if shutil.which("cargo"):
        pytest.fail("lineagewire.schemas._avro is not importable although cargo is on PATH: the install did not "
                    "build native/ (run `make setup`, or pip install -e . and read cargo's error)")
    pytest.skip("the compiled Avro reader is not built here (no cargo on PATH); fastavro decodes")


@pytest.fixture
def make_reader() -> Callable[..., Reader]:
    """The compiled reader, ``make_reader(schema, keep=None)``, held to fastavro by the tests that take it."""
    require_native()
    return _native.native_reader


@pytest.fixture(params=PATHS)
def decode_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A Codec made now decodes with the compiled reader (``native``) or, as an install without cargo does,
    with fastavro alone (``fastavro``)."""
    if request.param == "native":
        require_native()
    else:
        monkeypatch.setattr(_native, "AVAILABLE", False)
    return request.param
