"""``lineagewire consume datahub`` through the real broker: the REST sink against a GMS stand-in that checks
GMS's contract, the Kafka MCP sink with confluent-kafka's mock schema registry, and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from unittest import mock

import pytest

from lineagewire.consumers.datahub.config import load_config
from lineagewire.consumers.datahub.handler import DataHubHandler, make_sinks
from lineagewire.consumers.datahub.proposals import record as render
from lineagewire.consumers.datahub.translate import Translator
from lineagewire.consumers.runtime import ConsumerRuntime, RetryPolicy
from lineagewire.kafka.publisher import Publisher
from lineagewire.schemas import Codec
from tests.consumers.openlineage.samples import app_run, refresh_run
from tests.helpers import wait_for

from .gms import FakeGms, problems_of

pytestmark = pytest.mark.integration

FAST = RetryPolicy(initial=0.05, maximum=0.5, jitter=0.01)


def publish(settings, events: list[dict]) -> None:  # noqa: ANN001
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)


def wire(mcp: dict) -> tuple[str, str, str, str]:
    """A proposal as GMS receives it, reduced to what identifies its content (no client-stamped metadata)."""
    value = mcp["aspect"]["value"] if "value" in mcp["aspect"] else json.dumps(mcp["aspect"]["json"])
    return mcp["entityUrn"], mcp["aspectName"], mcp["changeType"], json.dumps(json.loads(value), sort_keys=True)


def expected(events: list[dict]) -> set[tuple[str, str, str, str]]:
    t = Translator()
    return {wire(render(p)) for e in events for p in t.translate(e)}


def start(rt: ConsumerRuntime) -> threading.Thread:
    t = threading.Thread(target=rt.run, daemon=True)
    t.start()
    return t


def test_rest_sink_sends_every_proposal_as_gms_accepts_it(settings, group_id) -> None:  # noqa: ANN001
    events = app_run() + app_run("hourly", fail=True) + refresh_run()
    publish(settings, events)
    want = expected(events)
    with FakeGms(token="s3cret") as gms:
        cfg = load_config(rest={"gms_url": gms.url, "token": "s3cret"})
        rt = ConsumerRuntime(settings, DataHubHandler(cfg), group_id=group_id, retry=FAST)
        t = start(rt)
        wait_for(lambda: {wire(m) for m in gms.snapshot()} >= want, timeout=90)
        rt.stop()
        t.join(30)
        assert gms.rejected == []
        assert {wire(m) for m in gms.snapshot()} == want
        methods = {(m, p.split("?")[0]) for m, p, _ in gms.requests}
        assert methods == {("GET", "/config"), ("POST", "/aspects")}
        assert all(h.get("Authorization") == "Bearer s3cret" for _, _, h in gms.requests)
    assert rt.stats.dead_lettered == 0 and rt.stats.handled == len(events)


def test_gms_down_then_back_loses_nothing(settings, group_id) -> None:  # noqa: ANN001
    events = app_run(actions=1)
    publish(settings, events)
    want = expected(events)
    with FakeGms() as gms:
        gms.down = True
        rt = ConsumerRuntime(settings, DataHubHandler(load_config(rest={"gms_url": gms.url})), group_id=group_id,
                             retry=FAST)
        t = start(rt)
        wait_for(lambda: sum(m == "POST" for m, _, _ in gms.requests) >= 4, timeout=60)
        assert gms.snapshot() == []
        committed_while_down = dict(rt.stats.committed)
        gms.down = False
        wait_for(lambda: {wire(m) for m in gms.snapshot()} >= want, timeout=60)
        rt.stop()
        t.join(30)
    assert sum(committed_while_down.values()) == 0  # nothing committed while GMS refused every batch
    assert sum(rt.metrics.value("lineagewire_consumer_failed_total", stage=s) for s in ("batch", "tick")) >= 3


def _committed(settings, group: str) -> dict[int, int]:  # noqa: ANN001
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**settings.as_librdkafka_dict(), "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition(settings.topics.jobs, p) for p in range(3)], timeout=30)}
    finally:
        c.close()


def test_a_record_gms_refuses_is_dead_lettered_and_the_rest_of_its_batch_delivered(settings, group_id) -> None:  # noqa: ANN001
    from tests.helpers import read_topic

    runs = [app_run(f"job{i}", actions=1) for i in range(4)]
    events = [e for run in zip(*runs, strict=True) for e in run]
    publish(settings, events)
    messages = read_topic(settings, settings.topics.jobs, len(events), decode=False)
    by_id = {m.value(): m for m in messages}
    codec = Codec()
    decoded = {codec.decode(m.value())["header"]["event_id"]: m for m in by_id.values()}
    # job2's RUNNING status: one proposal (its run's STARTED run event), batched with other records' proposals.
    bad = next(e for e in events if e["header"]["job_name"] == "job2" and e["header"]["sequence"] == 1)
    original = decoded[bad["header"]["event_id"]]
    refused = expected([bad])
    want = expected([e for e in events if e is not bad])
    ends = {}
    for m in messages:
        ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
    with FakeGms(refuse=lambda mcp: wire(mcp) in refused) as gms:
        cfg = load_config(rest={"gms_url": gms.url, "linger": 0.05, "lanes": 1})  # batches of several records
        rt = ConsumerRuntime(settings, DataHubHandler(cfg), group_id=group_id, retry=FAST, commit_interval=0.1)
        t = start(rt)
        wait_for(lambda: {wire(m) for m in gms.snapshot()} >= want, timeout=90)
        # Nothing stalls (no give_up_after): every partition is committed to its end.
        wait_for(lambda: all(_committed(settings, group_id).get(p) == end for p, end in ends.items()), timeout=60)
        rt.stop()
        t.join(30)
    got = {wire(m) for m in gms.snapshot()}
    assert got == want and not got & refused
    assert max(gms.refused) > 1 and gms.refused[-1] == 1  # a batch refused, then the record alone
    assert rt.stats.dead_lettered == 1
    [letter] = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "datahub"), 1, decode=False)
    assert (letter.value(), letter.key()) == (original.value(), original.key())
    headers = {k: v.decode() for k, v in letter.headers()}
    assert headers["lineagewire.error.class"] == "lineagewire.consumers.datahub.exceptions.RefusedError"
    assert "refused 1 proposals" in headers["lineagewire.error.message"] and "with 400" in headers[
        "lineagewire.error.message"] and "is invalid" in headers["lineagewire.error.message"]
    assert headers["lineagewire.original.offset"] == str(original.offset())


@pytest.mark.slow
def test_give_up_after_with_gms_down_dead_letters_exactly_the_records_never_confirmed(settings, group_id) -> None:  # noqa: ANN001
    from tests.helpers import read_topic

    def wave(prefix: str) -> list[dict]:
        return [e for run in zip(*(app_run(f"{prefix}{i}", actions=1) for i in range(3)), strict=True) for e in run]

    first, later = wave("down"), wave("back")
    codec = Codec()
    retry = RetryPolicy(initial=0.05, maximum=0.2, jitter=0.01, give_up_after=1.0)
    with FakeGms() as gms:
        gms.down = True  # everything down: each lane's batch fails until it is given up (from tick, batch_done)
        # Every proposal sent with its record (none skipped as unchanged), so each record's delivery shows.
        cfg = load_config(rest={"gms_url": gms.url}, skip_unchanged=0)
        rt = ConsumerRuntime(settings, DataHubHandler(cfg), group_id=group_id, retry=retry, commit_interval=0.1)
        publish(settings, first)
        t = start(rt)
        wait_for(lambda: rt.stats.dead_lettered >= len(first), timeout=90)
        gms.down = False
        publish(settings, later)  # handed after the give-up: delivered, never dead-lettered
        messages = read_topic(settings, settings.topics.jobs, len(first) + len(later), decode=False)
        ends: dict[int, int] = {}
        for m in messages:
            ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
        wait_for(lambda: all(_committed(settings, group_id).get(p) == end for p, end in ends.items()), timeout=90)
        rt.stop()
        t.join(30)
    by_pos = {(m.partition(), m.offset()): m for m in messages}
    first_ids = {e["header"]["event_id"] for e in first}
    never_confirmed = {pos for pos, m in by_pos.items() if codec.decode(m.value())["header"]["event_id"] in first_ids}
    assert rt.stats.dead_lettered == len(first)
    letters = read_topic(settings, settings.topics.dlq(settings.topics.jobs, "datahub"), len(first), decode=False)
    dead = {}
    for letter in letters:
        h = dict(letter.headers())
        pos = int(h["lineagewire.original.partition"]), int(h["lineagewire.original.offset"])
        assert letter.value() == by_pos[pos].value()
        assert b"did not confirm its outputs" in h["lineagewire.error.message"], h["lineagewire.error.message"]
        dead[pos] = letter
    assert set(dead) == never_confirmed  # exactly those, each once
    got = {wire(m) for m in gms.snapshot()}
    assert expected(later) <= got
    own = expected(first) - expected(later)  # the datasets read and their schemas are the same in both waves
    assert own and not own & got  # the dead-lettered records' proposals never reached GMS


def test_gms_killed_mid_stream_loses_nothing_and_commits_only_what_it_confirmed(settings, group_id) -> None:  # noqa: ANN001
    """GMS dies while batches are in flight; the service is stopped while it is dead, then started again with
    GMS back. Everything arrives: nothing was committed that GMS had not confirmed. (Commit what was handed
    instead, e.g. ``durable_offsets`` answering the handled offsets, and the events in flight are lost.)"""
    events = [e for i in range(6) for e in app_run(f"job{i}", actions=3)]
    publish(settings, events)
    want = expected(events)
    cfg = load_config(rest={"gms_url": "http://127.0.0.1:1", "max_batch": 4, "linger": 0, "lanes": 4})
    with FakeGms(delay=0.03) as gms:
        cfg.sinks.rest.gms_url = gms.url  # type: ignore[union-attr]
        rt = ConsumerRuntime(settings, DataHubHandler(cfg), group_id=group_id, retry=FAST)
        t = start(rt)
        wait_for(lambda: len(gms.snapshot()) >= 20, timeout=90, every=0.005)
        gms.kill()
        first = gms.snapshot()
        assert {wire(m) for m in first} < want, "everything arrived before GMS was killed: nothing was in flight"
        failed = lambda: sum(rt.metrics.value("lineagewire_consumer_failed_total", stage=s)  # noqa: E731
                             for s in ("batch", "tick", "handle", "output"))
        wait_for(lambda: failed() >= 3, timeout=60)
        committed = dict(rt.stats.committed)
        wait_for(lambda: failed() >= 6, timeout=60)
        assert rt.stats.committed == committed  # nothing committed while GMS is dead
        rt.stop()
        t.join(60)
        assert not t.is_alive()
    assert sum(rt.stats.committed.values()) < len(events)
    with FakeGms() as again:
        cfg.sinks.rest.gms_url = again.url  # type: ignore[union-attr]
        rt2 = ConsumerRuntime(settings, DataHubHandler(cfg), group_id=group_id, retry=FAST)
        t2 = start(rt2)
        wait_for(lambda: {wire(m) for m in first + again.snapshot()} >= want, timeout=90)
        rt2.stop()
        t2.join(60)
        assert again.rejected == []


def test_one_jobs_proposals_arrive_in_event_order_with_batches_in_flight(settings, group_id) -> None:  # noqa: ANN001
    events = [e for i in range(8) for e in app_run(f"job{i}", actions=2)]
    publish(settings, events)
    want = expected(events)
    with FakeGms(delay=0.01) as gms:
        cfg = load_config(rest={"gms_url": gms.url, "max_batch": 3, "linger": 0, "lanes": 4}, skip_unchanged=0)
        rt = ConsumerRuntime(settings, DataHubHandler(cfg), group_id=group_id, retry=FAST)
        t = start(rt)
        wait_for(lambda: {wire(m) for m in gms.snapshot()} >= want, timeout=90)
        rt.stop()
        t.join(60)
        got = gms.snapshot()
    assert gms.most_in_flight >= 2  # batches were in flight at once (4 lanes)
    # Per job, its DataJobs' proposals arrive in the order of its events (their times increase job by job).
    seen: dict[str, list[int]] = {}
    for m in got:
        if m["entityType"] == "dataJob":
            flow = m["entityUrn"].split(",")[1]
            seen.setdefault(flow, []).append(m["systemMetadata"]["lastObserved"])
    assert len(seen) == 8 and all(len(times) >= 6 for times in seen.values())
    for flow, times in seen.items():
        assert times == sorted(times), (flow, times)
    for urn in {m["entityUrn"] for m in got if m["aspectName"] == "dataProcessInstanceRunEvent"}:
        points = [json.loads(m["aspect"]["value"])["timestampMillis"] for m in got
                  if m["entityUrn"] == urn and m["aspectName"] == "dataProcessInstanceRunEvent"]
        assert points == sorted(points), (urn, points)


def test_an_embedded_database_dataset_is_named_and_its_event_kept(settings, group_id, tmp_path) -> None:  # noqa: ANN001
    """Issue 21 item 4: an action reading an embedded Derby database (namespace ``derby:/path/db``) used to be
    dead-lettered whole; now every dataset and the column lineage of the action reach DataHub."""
    from lineagewire.schemas import action_lineage, dataset, header

    run = app_run("derby_job", actions=1)
    action = run[2]
    action["inputs"].append(dataset("derby:/var/lib/shop/db", "APP.CUSTOMERS"))
    odd = action_lineage(header("ActionLineageEvent", job_namespace="spark", job_name="odd", run_id="r1"), "0", "Save",
                         inputs=[dataset("sqlite:app.db", "orders"), dataset("Some Store", "x")],
                         outputs=[dataset("/data/out", "part")])
    events = [*run, odd]
    publish(settings, events)
    out = tmp_path / "out.json"
    rt = ConsumerRuntime(settings, DataHubHandler(load_config(file={"path": str(out)})), group_id=group_id,
                         retry=FAST)
    rt.run(max_events=len(events))
    assert rt.stats.dead_lettered == 0 and rt.stats.handled == len(events)
    urns = {r["entityUrn"] for r in json.loads(out.read_text())}
    assert {"urn:li:dataset:(urn:li:dataPlatform:derby,/var/lib/shop/db/APP.CUSTOMERS,PROD)",
            "urn:li:dataset:(urn:li:dataPlatform:sqlite,app.db/orders,PROD)",
            "urn:li:dataset:(urn:li:dataPlatform:some-store,x,PROD)",
            "urn:li:dataset:(urn:li:dataPlatform:file,/data/out/part,PROD)"} <= urns
    assert {u for u in urns if u.startswith("urn:li:dataset:")} >= expected_datasets(run)


def expected_datasets(events: list[dict]) -> set[str]:
    return {urn for urn, *_ in expected(events) if urn.startswith("urn:li:dataset:")}


def test_stand_in_rejects_what_gms_would_reject() -> None:
    # Guard for the tests above: the contract check is not a pass-through.
    good = {"entityType": "dataset", "entityUrn": "urn:li:dataset:(urn:li:dataPlatform:file,/x,PROD)",
            "changeType": "UPSERT", "aspectName": "status",
            "aspect": {"contentType": "application/json", "value": '{"removed": false}'}}
    assert problems_of(good) == []
    assert problems_of({**good, "aspectName": "dataFlowInfo"})
    assert problems_of({**good, "aspect": {"json": {"removed": False}}})
    assert problems_of({**good, "aspect": {"contentType": "application/json", "value": '{"removed": "no"}'}})
    assert problems_of({k: v for k, v in good.items() if k != "entityUrn"})
    patch = {**good, "changeType": "PATCH", "aspectName": "datasetProperties",
             "aspect": {"contentType": "application/json-patch+json",
                        "value": '[{"op": "add", "path": "/customProperties/a", "value": "b"}]'}}
    assert problems_of(patch) == []
    assert problems_of({**patch, "aspect": {**patch["aspect"], "contentType": "application/json"}})
    assert problems_of({**good, "aspect": {**good["aspect"], "contentType": "application/json-patch+json"}})


def test_kafka_sink_produces_mcps_datahub_can_read(settings, group_id, topic_factory) -> None:  # noqa: ANN001
    """DataHub's Kafka emitter against the real broker; its schema registry is confluent-kafka's mock client
    (no Confluent-compatible registry installs here), wired in where the emitter builds its client."""
    from confluent_kafka import Consumer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from datahub.metadata.schema_classes import MetadataChangeProposalClass
    from datahub.metadata.schemas import getMetadataChangeProposalSchema

    events = app_run(actions=1)
    publish(settings, events)
    mcp_topic = topic_factory("mcp", partitions=1)
    registry = SchemaRegistryClient.new_client({"url": f"mock://{uuid.uuid4().hex}"})
    cfg = load_config(kafka={"schema_registry_url": "http://registry.invalid", "topic": mcp_topic})
    with mock.patch("datahub.emitter.kafka_emitter.SchemaRegistryClient", lambda conf: registry):
        handler = DataHubHandler(cfg, make_sinks(cfg, bootstrap_servers=settings.bootstrap_servers))
        rt = ConsumerRuntime(settings, handler, group_id=group_id, retry=FAST)
        rt.run(max_events=len(events))
    want = expected(events)
    deserialize = AvroDeserializer(registry, getMetadataChangeProposalSchema())
    consumer = Consumer({**settings.as_librdkafka_dict(), "group.id": f"read-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([mcp_topic])
    got: list[dict] = []
    deadline = time.monotonic() + 60
    try:
        while not {wire(m) for m in got} >= want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            obj = deserialize(msg.value(), SerializationContext(mcp_topic, MessageField.VALUE))
            mcp = MetadataChangeProposalClass.from_obj(obj, tuples=True)
            assert msg.key().decode() == mcp.entityUrn
            got.append(mcp.to_obj())
    finally:
        consumer.close()
    assert len(got) > 10
    assert {wire(m) for m in got} == want
    # The service stopped after the last event: its close() waited for the broker's delivery reports, so the
    # final commit covers every event (a commit before them would be lost on a crash).
    assert sum(rt.stats.committed.values()) == len(events) and rt.stats.handled == len(events)


def _service(settings, args: list[str], cwd) -> subprocess.Popen:  # noqa: ANN001
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers, "PYTHONUNBUFFERED": "1",
           "DATAHUB_TELEMETRY_ENABLED": "false"}
    return subprocess.Popen([sys.executable, "-m", "lineagewire", "consume", "datahub", *args,
                             "--topic", settings.topics.jobs, "--consumer-property", "session.timeout.ms=6000"],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def consume_into_file(settings, out, count: int, cwd) -> str:  # noqa: ANN001
    """Runs ``consume datahub --file out`` in a new group until the file holds proposals of ``count`` events
    (every event of these tests has some: stopping earlier could stop before the last is consumed), stops it,
    checks it exited 0, and returns its stderr."""
    proc = _service(settings, ["--file", str(out), "--group", f"dh-{uuid.uuid4().hex[:8]}"], cwd)
    try:
        wait_for(lambda: len({r["systemMetadata"]["properties"]["lineagewire.eventId"]
                              for r in _read(out)}) == count, timeout=90)
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err[-2000:]
    return err


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""


@pytest.mark.slow
def test_cli_file_sink_restart_and_replay_give_the_same_file(settings, tmp_path) -> None:  # noqa: ANN001
    from .check import check_metadata_file

    events = app_run() + app_run("hourly", fail=True)
    publish(settings, events)
    out = tmp_path / "out.json"
    err = consume_into_file(settings, out, len(events), tmp_path)
    assert "datahub: stopped; consumed 10" in err
    check_metadata_file(out)
    # The same range again in a new group, into a new file: the same proposals, byte for byte.
    again = tmp_path / "again.json"
    proc = _service(settings, ["--file", str(again), "--group", f"dh-{uuid.uuid4().hex[:8]}"], tmp_path)
    try:
        wait_for(lambda: len(_read(again)) >= len(_read(out)), timeout=90)
    finally:
        _stop(proc)
    assert _records(out) == _records(again)
    # Restarting on the same file with a new group (everything redelivered) adds nothing.
    before = out.read_text()
    rt = ConsumerRuntime(settings, DataHubHandler(load_config(file={"path": str(out)})),
                         group_id=f"dh-{uuid.uuid4().hex[:8]}", retry=FAST)
    rt.run(max_events=len(events))
    assert rt.stats.handled == len(events) and rt.stats.emitted == 0
    assert out.read_text() == before


def test_cli_rejects_bad_options_in_one_line(settings, tmp_path) -> None:  # noqa: ANN001
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers}
    for args, needle in ((["--gms-url", "127.0.0.1:8080"], "gms_url"), ([], "no DataHub sink selected"),
                         (["--gms-url", "http://"], "gms_url='http://' has no host"),
                         (["--file", "x.json", "--env", "MARS"], "env='MARS'")):
        proc = subprocess.run([sys.executable, "-m", "lineagewire", "consume", "datahub", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_cli_names_a_server_that_is_not_gms_or_a_refused_token(settings, tmp_path) -> None:  # noqa: ANN001
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers}
    for gms, args, needle in ((FakeGms(no_code=False), [], "frontend service"),
                              (FakeGms(token="right"), ["--token", "wrong"], "authentication error")):
        with gms:
            proc = subprocess.run([sys.executable, "-m", "lineagewire", "consume", "datahub", "--gms-url", gms.url,
                                   *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _read(path) -> list[dict]:  # noqa: ANN001
    """The records of a file the service may be writing: a read can catch a write half-way (not yet JSON)."""
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def _records(path) -> list[str]:  # noqa: ANN001
    """The proposals of a file as JSON text, sorted: partitions interleave differently from one consumption
    to the next, so only the order across jobs may differ."""
    return sorted(json.dumps(r) for r in json.loads(path.read_text()))
