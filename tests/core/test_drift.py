"""``tests.drift.assert_same``: a comparison test's failure shows our output and the library's side by side."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from tests.drift import assert_same

EVENT = {"eventType": "START", "run": {"runId": "r-1", "facets": {"spark": {"version": "4.0.0", "cores": 2}}},
         "job": {"namespace": "spark", "name": "daily_orders"}}
WIDTH = 72  # tests.drift's column


def failure(ours: object, theirs: object) -> list[str]:
    with pytest.raises(AssertionError) as caught:
        assert_same(ours, theirs, library="openlineage-python", what="the START event")
    return str(caught.value).splitlines()


def columns(row: str) -> tuple[str, str, str]:
    """(mark, ours, theirs) of a row: a mark, our column, the mark again, the library's column."""
    return row[0], row[2:2 + WIDTH].rstrip(), row[2 + WIDTH + 3:]


def test_equal_outputs_pass() -> None:
    assert_same(json.dumps(EVENT), json.dumps(EVENT), library="openlineage-python", what="the START event")


def test_a_difference_shows_both_values_on_one_row_and_names_the_librarys_version() -> None:
    theirs = json.loads(json.dumps(EVENT))
    theirs["run"]["facets"]["spark"]["version"] = "4.1.0"
    rows = failure(json.dumps(EVENT), json.dumps(theirs))
    version = importlib.metadata.version("openlineage-python")
    assert rows[0] == f"the START event: ours differs from openlineage-python {version}'s"
    assert columns(rows[1])[1:] == ("ours (lineagewire)", f"openlineage-python {version}")
    changed = [columns(r) for r in rows if r.startswith("| ")]
    assert changed == [("|", '    "version": "4.0.0",', '    "version": "4.1.0",')]
    # the lines around it, the same on both sides, give the place
    assert (" ", '    "cores": 2', '    "cores": 2') in [columns(r) for r in rows]


def test_a_key_only_one_side_has_is_marked_on_its_side() -> None:
    theirs = json.loads(json.dumps(EVENT))
    theirs["job"]["facets"] = {}
    rows = [columns(r) for r in failure(EVENT, theirs) if r[:2] in ("< ", "> ")]
    assert rows and all(mark == ">" and not ours and theirs_ for mark, ours, theirs_ in rows)


def test_the_same_json_written_differently_shows_the_texts_and_where_they_part() -> None:
    ours, theirs = json.dumps(EVENT), json.dumps(EVENT, separators=(",", ":"))
    rows = failure(ours, theirs)
    at = ours.index(": ") + 1  # the space json.dumps writes after a colon
    assert rows[0].endswith(f"(the same JSON written differently: first difference at character {at})")
    first = next(columns(r) for r in rows if r.startswith("| "))
    assert (first[1], first[2]) == (ours[:WIDTH], theirs[:WIDTH])


def test_json_text_inside_a_value_is_compared_line_by_line() -> None:
    # A DataHub proposal carries its aspect as JSON text: a change inside it gets rows of its own.
    aspect = {"name": "daily_orders", "customProperties": {"engine": "spark"}}
    ours = {"aspect": {"value": json.dumps(aspect), "contentType": "application/json"}}
    theirs = {"aspect": {"value": json.dumps({**aspect, "customProperties": {"engine": "flink"}}),
                         "contentType": "application/json"}}
    changed = [columns(r) for r in failure(ours, theirs) if r.startswith("| ")]
    assert changed == [("|", '     "engine": "spark"', '     "engine": "flink"')]
