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
    assert released, f"schemas/released/v{latest}/ holds no .avsc file"
    current = {p.name: p.read_text() for p in AVSC}
    if latest == _repository.SCHEMA_VERSION:
        # Changing a released version in place would break readers that already have it.
        assert released == current
        return
    # The version is ahead of the latest release: nothing released may disappear, and every released
    # event schema must resolve to the current one and back (with data, in test_evolution).
    assert latest < _repository.SCHEMA_VERSION
    assert not set(released) - set(current), f"removed since v{latest}: {sorted(set(released) - set(current))}"
    from tests.schemas.test_evolution import assert_resolves_both_ways

    for name, old in _repository.released()[latest].items():
        assert_resolves_both_ways(old.schema, _repository.current()[name].schema, examples=5)


@pytest.mark.slow
def test_a_version_ahead_of_the_release_is_still_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once SCHEMA_VERSION moves past the latest release, an incompatible current schema still fails."""
    import copy

    latest = max(_repository.released())
    real = _repository.current()
    name = next(iter(real))
    broken_schema = copy.deepcopy(real[name].schema)
    broken_schema["fields"].append({"name": "mandatory_new", "type": "string", "doc": "no default"})
    broken = {**real, name: _repository.EventSchema(name, latest + 1, broken_schema, None, "", "")}  # type: ignore[arg-type]
    monkeypatch.setattr(_repository, "SCHEMA_VERSION", latest + 1)
    monkeypatch.setattr(_repository, "current", lambda: broken)
    with pytest.raises(Exception, match=r"mandatory_new|No default"):
        test_current_schemas_equal_the_latest_release_or_are_compatible()
