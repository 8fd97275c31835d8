"""Aspects rendered from a template with the time put in equal acryl-datahub's rendering of each aspect."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from avro.errors import AvroTypeException
from datahub.metadata.schema_classes import (
    AuditStampClass,
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


def test_same_content_at_other_times_gives_acryl_datahubs_rendering_with_each_time(renders: list) -> None:
    # Runs of one job at other times (and two actions of each): the same upstreamLineage and run events
    # but for their times.
    events = [e for i in range(8) for e in at(app_run(actions=2), dt.timedelta(minutes=7 * i, milliseconds=i))]
    t, renderer = Translator(), Renderer()
    stamped, times = 0, set()
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
            elif p.aspectName == "dataProcessInstanceRunEvent":
                stamped += 1
    assert len(times) == 24 and stamped > 60
    # Most were put together from their content's template, not rendered.
    full = [a for a in renders if a.ASPECT_NAME in ("upstreamLineage", "dataProcessInstanceRunEvent")]
    assert len(full) < stamped / 2


def upstreams(dataset: str) -> Stamped:
    return Stamped(lambda when: UpstreamLineageClass(upstreams=[
        UpstreamClass(dataset=dataset, type=DatasetLineageTypeClass.TRANSFORMED,
                      auditStamp=AuditStampClass(time=when, actor="urn:li:corpuser:datahub"))]))


@pytest.mark.parametrize("name", ["plain", str(stamp._S1), f"x{stamp._S2}", f"{stamp._S1}{stamp._S2}"])
def test_a_template_is_refused_when_the_content_holds_the_sentinels_digits(name: str, renders: list) -> None:
    make = upstreams(f"urn:li:dataset:(urn:li:dataPlatform:hive,{name},PROD)")
    for when in (1, 1_700_000_000_123, 1_700_000_000_124, 9):
        aspect = make(when)
        assert stamp.text(aspect) == json.dumps(slow_obj(aspect))
    used = name == "plain" or str(stamp._S1) not in name
    assert len([a for a in renders if type(a) is UpstreamLineageClass]) == (3 if used else 6)


def test_a_time_avro_cannot_take_raises_avrogens_error() -> None:
    make = upstreams("urn:li:dataset:(urn:li:dataPlatform:hive,a,PROD)")
    for when in (1, 2):
        stamp.text(make(when))
    with pytest.raises(AvroTypeException):
        stamp.text(make(1 << 63))
