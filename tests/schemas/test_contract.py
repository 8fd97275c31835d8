"""The .avsc files are the public API: documented, one record per file, matching the typed events."""

from __future__ import annotations

import json
import typing

import pytest

from lineagewire.schemas import _repository, events

AVSC = sorted(_repository.CURRENT_DIR.glob("*.avsc"))


@pytest.mark.parametrize("path", AVSC, ids=lambda p: p.stem)
def test_every_record_and_field_has_a_doc(path) -> None:  # noqa: ANN001
    doc = json.loads(path.read_text())
    assert doc.get("doc"), f"{path.name}: the record needs a doc"
    for field in doc.get("fields", []):
        assert field.get("doc"), f"{path.name}: field {field['name']} needs a doc"
    assert doc["namespace"].startswith("io.lineagewire."), "a namespace per product area"


@pytest.mark.parametrize("path", AVSC, ids=lambda p: p.stem)
def test_typed_event_classes_match_the_schema(path) -> None:  # noqa: ANN001
    doc = json.loads(path.read_text())
    if doc["type"] != "record":
        return
    cls = getattr(events, doc["name"])
    assert set(typing.get_type_hints(cls)) == {f["name"] for f in doc["fields"]}


def test_every_enum_has_a_default_for_forward_compatibility() -> None:
    for path in AVSC:
        doc = json.loads(path.read_text())
        if doc["type"] == "enum":
            assert doc.get("default") in doc["symbols"], path.name


def test_current_schemas_equal_the_latest_release_or_are_compatible() -> None:
    latest = max(_repository.released())
    released = {p.name: p.read_text() for p in (_repository.RELEASED_DIR / f"v{latest}").glob("*.avsc")}
    if latest == _repository.SCHEMA_VERSION:
        # Changing a released version in place would break readers that already have it.
        assert released == {p.name: p.read_text() for p in AVSC}
