"""Aspects rendered from a template with the times and run ids put in equal acryl-datahub's rendering of each."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from avro.errors import AvroTypeException
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DataProcessInstancePropertiesClass,
    DataProcessInstanceRelationshipsClass,
    DatasetLineageTypeClass,
    UpstreamClass,
    UpstreamLineageClass,
)

from lineagewire.consumers.datahub import stamp
from lineagewire.consumers.datahub.aspect_json import slow_obj
from lineagewire.consumers.datahub.render import Renderer, render
from lineagewire.consumers.datahub.stamp import Stamped
from lineagewire.consumers.datahub.translate import Translator
from tests.consumers.openlineage.samples import app_run


def at(events: list[dict], shift: dt.timedelta) -> list[dict]:
    for e in events:
        e["header"]["event_time"] += shift
        if "transition_time" in e:
            e["transition_time"] += shift
    return events


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list:
    """The aspects rendered in full (not from a template)."""
    done: list = []
    full = stamp.render_text

    def counted(aspect: object) -> str:
        done.append(aspect)
        return full(aspect)
    monkeypatch.setattr(stamp, "render_text", counted)
    return done


STAMPED = ("upstreamLineage", "dataProcessInstanceRunEvent", "dataProcessInstanceProperties",
           "dataProcessInstanceRelationships")


def test_same_content_at_other_times_gives_acryl_datahubs_rendering_with_each_time(renders: list) -> None:
    # Runs of one job at other times (and two actions of each): the same upstreamLineage, run events and
    # action runs' properties and relationships but for their times and run ids.
    events = [e for i in range(8) for e in at(app_run(actions=2), dt.timedelta(minutes=7 * i, milliseconds=i))]
    t, renderer = Translator(), Renderer()
    stamped, times, runs = 0, set(), set()
    for e in events:
        when = int(e["header"]["event_time"].timestamp() * 1000)
        for i, p in enumerate(t.translate(e)):
            want = render(p)
            want.setdefault("systemMetadata", {})["properties"] = {"n": str(i)}
            assert renderer.line(p, {"n": str(i)}) == json.dumps(want)
            if p.aspectName == "upstreamLineage":
                stamped += 1
                assert {u["auditStamp"]["time"] for u in want["aspect"]["json"]["upstreams"]} == {when}
                times.add(when)
            elif p.aspectName in STAMPED:
                stamped += 1
            if p.aspectName == "dataProcessInstanceProperties" and "actionId" in want["aspect"]["json"][
                    "customProperties"]:
                aspect = want["aspect"]["json"]
                assert aspect["name"] == f"{e['header']['run_id']}/{e['action_id']}"
                assert aspect["customProperties"]["runId"] == e["header"]["run_id"]
                assert aspect["created"]["time"] == when
                runs.add(e["header"]["run_id"])
    assert len(times) == 24 and len(runs) == 8 and stamped > 100
    # Most were put together from their content's template, not rendered.
    assert len([a for a in renders if a.ASPECT_NAME in STAMPED]) < stamped / 3


def upstreams(dataset: str) -> Stamped:
    return Stamped(lambda when: UpstreamLineageClass(upstreams=[
        UpstreamClass(dataset=dataset, type=DatasetLineageTypeClass.TRANSFORMED,
                      auditStamp=AuditStampClass(time=when, actor="urn:li:corpuser:datahub"))]))


S1, S2 = stamp._sentinels(int, 0)


@pytest.mark.parametrize("name", ["plain", str(S1), f"x{S2}", f"{S1}{S2}"])
def test_a_template_is_refused_when_the_content_holds_the_sentinels_digits(name: str, renders: list) -> None:
    make = upstreams(f"urn:li:dataset:(urn:li:dataPlatform:hive,{name},PROD)")
    for when in (1, 1_700_000_000_123, 1_700_000_000_124, 9):
        aspect = make(when)
        assert stamp.text(aspect) == json.dumps(slow_obj(aspect))
    used = str(S1) not in name
    assert len([a for a in renders if type(a) is UpstreamLineageClass]) == (3 if used else 6)


def test_a_time_avro_cannot_take_raises_avrogens_error() -> None:
    make = upstreams("urn:li:dataset:(urn:li:dataPlatform:hive,a,PROD)")
    for when in (1, 2):
        stamp.text(make(when))
    with pytest.raises(AvroTypeException):
        stamp.text(make(1 << 63))


ODD = ['quote " and \\ back', "é ü \u2028 \U0001f600", "\x00\x01 00\x02", "", "run/1"]


@pytest.mark.parametrize("odd", ODD)
def test_string_values_are_put_in_as_json_escapes_them(odd: str, renders: list) -> None:
    make = Stamped(lambda run, action, when: DataProcessInstancePropertiesClass(
        name=f"{run}/{action}", created=AuditStampClass(time=when, actor="urn:li:corpuser:datahub"),
        customProperties={"runId": run, "actionId": action, "fixed": "x"}), (str, str, int))
    for values in (("r1", "0", 5), ("r2", "1", 6), (odd, odd + "b", 7), (f"a{odd}", "2", 8), ("r3", odd, 9)):
        aspect = make(*values)
        assert stamp.text(aspect) == json.dumps(slow_obj(aspect))
    assert len(renders) == 3  # the first, then the two sentinel sets: the rest from the template


@pytest.mark.parametrize("values", [(None, "0", 5), ("r", None, 5), ("r", "0", "5"), ("r", "0", True), ("r", "0", 1.5)])
def test_a_value_of_another_type_is_rendered_in_full(values: tuple, renders: list) -> None:
    make = Stamped(lambda run, action, when: DataProcessInstanceRelationshipsClass(
        upstreamInstances=[str(when)], parentTemplate=action, parentInstance=run), (str, str, int))
    for v in (("a", "b", 1), ("c", "d", 2), values):
        aspect = make(*v)
        assert stamp.text(aspect) == json.dumps(slow_obj(aspect))
    assert len(renders) == 4


def test_a_string_template_is_refused_when_the_content_holds_a_sentinel(renders: list) -> None:
    sentinel = stamp._sentinels(str, 0)[0]
    make = Stamped(lambda run: DataProcessInstanceRelationshipsClass(
        upstreamInstances=[sentinel], parentInstance=run), (str,))
    for run in ("a", "b", "c", "d"):
        aspect = make(run)
        assert stamp.text(aspect) == json.dumps(slow_obj(aspect))
    assert len(renders) == 6


def test_an_event_with_more_stamped_aspects_than_the_renderer_keeps_is_written_right() -> None:
    from datahub.emitter.mcp import MetadataChangeProposalWrapper

    from lineagewire.consumers.datahub.render import RECENT

    makes = [upstreams(f"urn:li:dataset:(urn:li:dataPlatform:hive,t{i},PROD)") for i in range(3 * RECENT)]
    renderer = Renderer()
    for when in (1_700_000_000_000, 1_700_000_000_500, 1_700_000_001_000):  # three events, all outputs each
        proposals = [MetadataChangeProposalWrapper(entityUrn=f"urn:li:dataset:(urn:li:dataPlatform:hive,o{i},PROD)",
                                                   aspect=make(when)) for i, make in enumerate(makes)]
        prints = [renderer.aspect_fingerprint(p.aspect) for p in proposals]  # choosing what changed, then lines
        assert [renderer.line(p) for p in proposals] == [json.dumps(render(p)) for p in proposals]
        assert len(set(prints)) == len(prints)
