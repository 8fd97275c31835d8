"""LineagewireClient: openlineage-python's client, emitting the same events with less work per event."""

from __future__ import annotations

import json
from typing import Any

from openlineage.client import OpenLineageClient

from lineagewire.consumers.openlineage import Translator
from lineagewire.consumers.openlineage.client import LineagewireClient
from lineagewire.consumers.openlineage.handler import make_client
from lineagewire.schemas import Codec

from .samples import app_run

codec = Codec()
EVENTS = app_run()


def _emit(client_type: type, config: dict[str, Any], path: Any, times: int = 1) -> list[dict[str, Any]]:
    client = client_type(config={**config, "transport": {"type": "file", "log_file_path": str(path),
                                                          "append": True}})
    try:
        for e in EVENTS:
            for ev in Translator().translate(codec.decode(codec.encode(e))):
                for _ in range(times):  # the same event object again: a caller's own retry
                    client.emit(ev)
    finally:
        client.close()
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_make_client_builds_it() -> None:
    client = make_client({"transport": {"type": "console"}})
    assert isinstance(client, LineagewireClient)
    assert isinstance(client, OpenLineageClient)


def test_same_events_as_openlineage_client_without_environment_variables(tmp_path) -> None:  # noqa: ANN001
    ours = _emit(LineagewireClient, {}, tmp_path / "ours.jsonl")
    theirs = _emit(OpenLineageClient, {}, tmp_path / "theirs.jsonl")
    assert ours == theirs
    assert len(ours) == 5
    assert all("environmentVariables" not in e["run"]["facets"] for e in ours)
    assert all(e["run"]["facets"]["tags"]["tags"] for e in ours)  # the client's own run tag is still added


def test_configured_environment_variables_are_still_collected(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("LINEAGEWIRE_TEST_TEAM", "data-eng")
    config = {"facets": {"environment_variables": ["LINEAGEWIRE_TEST_TEAM"]}}
    ours = _emit(LineagewireClient, config, tmp_path / "ours.jsonl")
    theirs = _emit(OpenLineageClient, config, tmp_path / "theirs.jsonl")
    assert ours == theirs
    assert all(e["run"]["facets"]["environmentVariables"]["environmentVariables"] ==
               [{"name": "LINEAGEWIRE_TEST_TEAM", "value": "data-eng"}] for e in ours)


def test_same_tags_as_openlineage_client_with_user_run_and_job_tags(tmp_path) -> None:  # noqa: ANN001
    # Run tags only: the shared, built-once facet; run and job tags: openlineage-python's own path.
    for n, tags in enumerate([{"run": {"team": "data-eng"}}, {"run": {"team": "data-eng"}, "job": {"tier": "gold"}}]):
        ours = _emit(LineagewireClient, {"tags": tags}, tmp_path / f"ours{n}.jsonl", times=2)
        theirs = _emit(OpenLineageClient, {"tags": tags}, tmp_path / f"theirs{n}.jsonl", times=2)
        assert len(ours) == 2 * len(EVENTS)
        assert ours == theirs
        assert all({"key": "team", "value": "data-eng", "source": "USER"} in e["run"]["facets"]["tags"]["tags"]
                   for e in ours)
        assert all(("tags" in e["job"]["facets"]) == ("job" in tags) for e in ours)


def test_shared_tags_facet_renders_the_same_with_the_one_pass_serialiser(tmp_path) -> None:  # noqa: ANN001
    from lineagewire.consumers.openlineage import serde

    theirs = (tmp_path / "theirs.jsonl")
    _emit(OpenLineageClient, {}, theirs)
    assert serde.install()
    try:
        ours = tmp_path / "ours.jsonl"
        _emit(LineagewireClient, {}, ours)
    finally:
        serde.uninstall()
    assert ours.read_text() == theirs.read_text()
    assert ours.read_text().count('"openlineage_client_version"') == len(EVENTS)
