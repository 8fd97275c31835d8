"""Both Avro readers under test: the generated Python one (``reader.python_reader``) and the compiled one
(``_native.native_reader``, the extension built from native/)."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from lineagewire.schemas import _native
from lineagewire.schemas.reader import READER_ENV, Reader, implementation, python_reader

IMPLEMENTATIONS = ["python", "native"]


def require_native() -> None:
    """The compiled reader's tests fail where cargo could have built it (so CI cannot fall back to the Python
    reader unseen); they skip only where there is no cargo."""
    if _native.AVAILABLE:
        return
    if shutil.which("cargo"):
        pytest.fail("lineagewire.schemas._avro is not importable although cargo is on PATH: the install did not "
                    "build native/ (run `make setup`, or pip install -e . and read cargo's error)")
    pytest.skip("the compiled Avro reader is not built here (no cargo on PATH); the generated one serves")


@pytest.fixture(params=IMPLEMENTATIONS)
def make_reader(request: pytest.FixtureRequest) -> Callable[..., Reader]:
    """``compile_reader`` of one implementation: ``make_reader(schema, keep=None)``."""
    if request.param == "native":
        require_native()
        return _native.native_reader
    return python_reader


@pytest.fixture(params=IMPLEMENTATIONS)
def reader_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``LINEAGEWIRE_AVRO_READER`` set so that ``compile_reader``, and so a ``Codec`` made now, use one
    implementation."""
    if request.param == "native":
        require_native()
        monkeypatch.delenv(READER_ENV, raising=False)
    else:
        monkeypatch.setenv(READER_ENV, "python")
    assert implementation() == request.param
    return request.param
