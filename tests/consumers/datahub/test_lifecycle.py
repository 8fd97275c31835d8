"""Lifecycle changes (issue 39.2) in DataHub: a DROP soft-deletes, a RENAME moves to the new URN and links the old,
the schema follows each change, a CREATE after a DROP brings the dataset back; offline and through the service."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import pytest
from datahub.ingestion.sink.file import write_metadata_file

from lineagewire.consumers.datahub.config import load_config
from lineagewire.consumers.datahub.handler import DataHubHandler
from lineagewire.consumers.datahub.lifecycle import previous_dataset
from lineagewire.consumers.datahub.proposals import record as render
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import Codec
from tests.consumers.openlineage.samples import LIFECYCLE_STEPS, app_run, lifecycle_run, table
from tests.helpers import wait_for

from .check import check_aspects_belong, check_metadata_file
from .gms import FakeGms

OLD = "urn:li:dataset:(urn:li:dataPlatform:hive,sales.orders,PROD)"
NEW = "urn:li:dataset:(urn:li:dataPlatform:hive,sales.orders_v2,PROD)"
codec = Codec()


def records(events: list[dict]) -> list[dict]:
    t = Translator()
    return [render(p) for e in events for p in t.translate(codec.decode(codec.encode(e)))]


def aspect_json(r: dict) -> Any:
    """An aspect's JSON whether a file record (``aspect.json``) or what GMS received (``aspect.value``)."""
    a = r["aspect"]
    return a["json"] if "json" in a else json.loads(a["value"])


class State:
    """What DataHub holds after applying proposals in order: upserts replace, datasetProperties patches add keys,
    operations (timeseries) accumulate."""

    def __init__(self, recs: list[dict]) -> None:
        self.aspects: dict[tuple[str, str], Any] = {}
        self.history: dict[tuple[str, str], list[Any]] = {}
        self.operations: dict[str, list[str]] = {}
        for r in recs:
            key, value = (r["entityUrn"], r["aspectName"]), aspect_json(r)
            if r["aspectName"] == "operation":
                self.operations.setdefault(r["entityUrn"], []).append(
                    value.get("customOperationType") or value["operationType"])
            elif r["changeType"] == "PATCH":
                props = self.aspects.setdefault(key, {"customProperties": {}})
                for op in value:
                    props["customProperties"][op["path"].rsplit("/", 1)[1]] = op["value"]
            else:
                self.aspects[key] = value
                self.history.setdefault(key, []).append(value)

    def removed(self, urn: str) -> bool:
        return bool(self.aspects[(urn, "status")]["removed"])

    def columns(self, urn: str) -> list[str]:
        return [f["fieldPath"] for f in self.aspects[(urn, "schemaMetadata")]["fields"]]

    def props(self, urn: str) -> dict[str, str]:
        return self.aspects[(urn, "datasetProperties")]["customProperties"]


def test_each_change_is_an_operation_and_the_state_follows_it() -> None:
    events = lifecycle_run()
    first_steps = 2 + 2  # JobCreated, RUNNING, CREATE, ALTER
    s = State(records(events[:first_steps]))
    assert not s.removed(OLD) and s.columns(OLD) == ["id", "amount", "customer", "customer.name"]
    assert s.history[(OLD, "schemaMetadata")][0]["fields"][-1]["fieldPath"] == "amount"  # CREATE: 2
    s = State(records(events[:first_steps + 1]))  # the RENAME
    assert s.removed(OLD) and not s.removed(NEW)
    assert s.columns(NEW) == s.columns(OLD)
    assert s.props(OLD) == {"renamedTo": NEW} and s.props(NEW) == {"renamedFrom": OLD}
    s = State(records(events[:first_steps + 3]))  # TRUNCATE, DROP
    assert s.removed(NEW) and s.columns(NEW) == ["id", "amount", "customer", "customer.name"]
    s = State(records(events))  # CREATE again, one column
    assert not s.removed(NEW) and s.columns(NEW) == ["id"] and s.removed(OLD)
    assert s.operations == {OLD: ["CREATE", "ALTER"], NEW: ["RENAME", "TRUNCATE", "DROP", "CREATE"]}
    assert [c for _, _, c, _ in LIFECYCLE_STEPS] == s.operations[OLD] + s.operations[NEW]


def test_an_operation_names_the_run_and_action_that_made_it() -> None:
    events = lifecycle_run()
    drop = next(r for r in records(events) if r["aspectName"] == "operation" and aspect_json(r)["operationType"] ==
                "DROP")
    assert aspect_json(drop)["customProperties"] == {"runId": events[0]["header"]["run_id"], "actionId": "4"}
    assert aspect_json(drop)["timestampMillis"] == int(events[6]["header"]["event_time"].timestamp() * 1000)
    assert aspect_json(drop)["sourceType"] == "DATA_PROCESS"


def test_events_without_a_change_give_what_they_gave_before() -> None:
    events = app_run(actions=1)
    plain = copy.deepcopy(events)
    for e in plain:
        for d in e.get("outputs") or []:
            d.pop("lifecycle_change", None), d.pop("previous_identifier", None)
    recs = records(events)
    assert recs == records(plain)
    assert not [r for r in recs if r["aspectName"] == "operation" or r["changeType"] == "PATCH"]


@pytest.mark.parametrize(("before", "symlinks", "urn"), [
    # a managed table: the old location's folder is the old table's name
    ({"namespace": "file", "name": "/warehouse/sales.db/orders/"}, True, OLD),
    # the old name given as the table itself
    ({"namespace": "hive://metastore", "name": "sales.orders"}, True, OLD),
    # a path dataset: the old path
    ({"namespace": "file", "name": "/data/old"}, False, "urn:li:dataset:(urn:li:dataPlatform:file,/data/old,PROD)"),
])
def test_the_old_urn_of_a_rename(before: dict, symlinks: bool, urn: str) -> None:
    d = table("orders_v2", 1, lifecycle_change="RENAME", previous_identifier=before)
    if not symlinks:
        d["symlinks"] = []
    old = previous_dataset(d)
    assert old is not None and Translator().names.urn(old) == urn
    assert previous_dataset(table("orders_v2", 1, lifecycle_change="CREATE")) is None


@pytest.mark.upstream
def test_lifecycle_output_passes_datahubs_own_check(tmp_path) -> None:  # noqa: ANN001
    t = Translator()
    path = tmp_path / "mcps.json"
    write_metadata_file(path, [p for e in lifecycle_run() for p in t.translate(e)])
    check_metadata_file(path)
    check_aspects_belong(json.loads(path.read_text()))


@pytest.mark.integration
def test_the_service_drops_renames_and_recreates_in_datahub(settings, group_id) -> None:  # noqa: ANN001
    events = lifecycle_run()
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
    with FakeGms() as gms:
        rt = ConsumerRuntime(settings, DataHubHandler(load_config(rest={"gms_url": gms.url})), group_id=group_id,
                             retry=RetryPolicy(initial=0.05, maximum=0.5, jitter=0.01))
        t = threading.Thread(target=rt.run, daemon=True)
        t.start()
        wait_for(lambda: len(State(gms.snapshot()).operations.get(NEW, [])) == 4, timeout=90)
        rt.stop()
        t.join(30)
        assert gms.rejected == []
        s = State(gms.snapshot())
    assert s.removed(OLD) and not s.removed(NEW) and s.columns(NEW) == ["id"]
    assert s.props(OLD) == {"renamedTo": NEW} and s.props(NEW) == {"renamedFrom": OLD}
    assert s.operations == {OLD: ["CREATE", "ALTER"], NEW: ["RENAME", "TRUNCATE", "DROP", "CREATE"]}
    # the DROP's removed=true reached DataHub before the CREATE's removed=false
    assert [h["removed"] for h in s.history[(NEW, "status")]][-2:] == [True, False]
