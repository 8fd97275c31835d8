"""The handler adds to each event exactly what openlineage-python's ``OpenLineageClient.emit`` adds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.generated import tags_run
from openlineage.client.serde import Serde

from lineagewire.consumers.openlineage import Translator
from lineagewire.consumers.openlineage.handler import Enrichment, _HandBack
from lineagewire.consumers.openlineage.render import Renderer
from lineagewire.schemas import Codec
from tests.drift import assert_same

from .samples import app_run, refresh_run

codec = Codec()
EVENTS = app_run() + app_run(fail=True) + refresh_run()


def _translated(own_tags: bool) -> list[Any]:
    out = [o for e in EVENTS for o in Translator().translate(codec.decode(codec.encode(e)))]
    if own_tags:  # events that carry tags of their own: the client merges its tags into them
        for ev in out:
            ev.run.facets["tags"] = tags_run.TagsRunFacet(tags=[
                tags_run.TagsRunFacetFields(key="team", value="lineage", source="INTEGRATION"),
                tags_run.TagsRunFacetFields(key="Tier", value="bronze", source="INTEGRATION")])
    return out


CONFIGS = [
    {},
    {"tags": {"run": {"tier": "gold"}, "job": {"owner": "data-eng"}}},
    {"facets": {"environment_variables": ["LINEAGEWIRE_TEST_TEAM"]}},
    {"filters": [{"type": "exact", "match": "daily_orders"}]},
]


@pytest.mark.upstream
@pytest.mark.parametrize("own_tags", [False, True])
@pytest.mark.parametrize("config", CONFIGS)
def test_the_same_events_as_the_clients_emit(config: dict[str, Any], own_tags: bool, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("LINEAGEWIRE_TEST_TEAM", "data-eng")
    theirs_back = _HandBack()
    theirs = OpenLineageClient(transport=theirs_back, config=config)  # type: ignore[arg-type]
    for ev in _translated(own_tags):
        theirs.emit(ev)
    ours_back = _HandBack()
    renderer = Renderer()  # the tags facets are shared between events and rendered once
    enrich = Enrichment(OpenLineageClient(transport=ours_back, config=config), ours_back,  # type: ignore[arg-type]
                        share=renderer.share)
    assert enrich.public  # the public methods, not the emit fallback
    ours = [e for e in (enrich(ev) for ev in _translated(own_tags)) if e is not None]
    theirs = theirs_back.events
    assert_same([json.loads(Serde.to_json(e)) for e in ours], [json.loads(Serde.to_json(e)) for e in theirs],
                library="openlineage-python", what="the events Enrichment gives and those OpenLineageClient.emit sends")
    for i, (o, t) in enumerate(zip(ours, theirs, strict=True)):
        assert_same(renderer.to_json(o), Serde.to_json(t), library="openlineage-python",
                    what=f"Renderer.to_json of enriched event {i}")
    assert ours, "every event was filtered out"
    tags = [{(t["key"], t["value"]) for t in json.loads(Serde.to_json(e))["run"]["facets"]["tags"]["tags"]}
            for e in ours]
    assert all(any(k == "openlineage_client_version" for k, _ in t) for t in tags)
    if own_tags:  # the event's own tags are kept, a user tag of the same key (any case) replaces it
        assert all(("team", "lineage") in t for t in tags)
        assert all(("Tier", "gold") in t for t in tags) if "tags" in config else True
