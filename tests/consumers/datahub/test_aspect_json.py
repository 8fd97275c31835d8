"""The compiled aspect rendering equals acryl-datahub's own (``pre_json_transform(aspect.to_obj())``)."""

from __future__ import annotations

import json

import pytest
from avro.errors import AvroTypeException
from datahub.emitter.aspect import ASPECT_MAP
from datahub.metadata.schema_classes import (
    AzkabanJobTypeClass,
    CostClass,
    CostCostClass,
    CostTypeClass,
    DataJobInfoClass,
    DataProcessInstanceRunEventClass,
    StatusClass,
)

from lineagewire.consumers.datahub import aspect_json
from lineagewire.consumers.datahub.aspect_json import aspect_obj, slow_obj
from lineagewire.consumers.datahub.translate import Translator
from tests.consumers.openlineage.samples import app_run, refresh_run


def same(aspect: object) -> str:
    want = json.dumps(slow_obj(aspect))
    assert json.dumps(aspect_obj(aspect)) == want
    return want


def test_every_aspect_class_with_its_defaults() -> None:
    checked = 0
    for cls in ASPECT_MAP.values():
        aspect = cls._construct_with_defaults()
        try:
            slow_obj(aspect)
        except (AvroTypeException, KeyError) as exc:  # defaults that are not a valid aspect
            with pytest.raises(type(exc)):
                aspect_obj(aspect)
            continue
        same(aspect)
        checked += 1
    assert checked > 200


def test_every_aspect_the_translator_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    slow: list[str] = []
    real = aspect_json.slow_obj
    monkeypatch.setattr(aspect_json, "slow_obj", lambda a: slow.append(type(a).__name__) or real(a))
    t = Translator()
    aspects = {id(p.aspect): p.aspect for e in app_run() + app_run("x", fail=True) + refresh_run()
               for p in t.translate(e) if p.aspect is not None}
    for aspect in aspects.values():
        same(aspect)
    assert len({type(a) for a in aspects.values()}) >= 10
    assert slow == []  # none of them needs acryl-datahub's slow walk


def test_unions_pick_and_name_the_branch_as_avrogen_does() -> None:
    # type: union {AzkabanJobType, string}: a symbol matches both branches and avrogen takes the last
    assert '"type": {"string": "HIVE"}' in same(DataJobInfoClass(name="j", type=AzkabanJobTypeClass.HIVE))
    assert '"type": {"string": "SPARK"}' in same(DataJobInfoClass(name="j", type="SPARK"))
    # a record branch of a union is named by its record, renamed com.linkedin.pegasus2avro. -> com.linkedin.
    run = DataProcessInstanceRunEventClass(timestampMillis=1, status="STARTED")
    assert '"partitionSpec": {"partition": "FULL_TABLE_SNAPSHOT"' in same(run)


def test_what_it_cannot_vouch_for_goes_acryl_datahubs_way() -> None:
    # a union with aliases (fieldDiscriminator) and a map key that pre_json_transform treats specially
    same(CostClass(costType=CostTypeClass.ORG_COST_TYPE, cost=CostCostClass(fieldDiscriminator="costCode",
                                                                            costCode="x")))
    same(DataJobInfoClass(name="j", type="SPARK", customProperties={"fieldDiscriminator": "a", "a": "b"}))
    same(DataJobInfoClass(name="j", type="SPARK", customProperties={"com.linkedin.pegasus2avro.x": "y"}))


def test_an_invalid_aspect_raises_avrogens_error() -> None:
    status = StatusClass(removed=False)
    status._inner_dict["removed"] = "no"
    with pytest.raises(AvroTypeException):
        aspect_obj(status)
    info = DataJobInfoClass(name="j", type="SPARK")
    info._inner_dict["customProperties"] = {"n": 1}
    with pytest.raises(AvroTypeException):
        aspect_obj(info)
