"""The file sink: a valid JSON array after every event, no duplicates after a restart, repaired after a crash."""

from __future__ import annotations

import copy
import datetime as dt
import json
import pathlib
import uuid

import pytest

from lineagewire.consumers.datahub.config import DataHubConfig, load_config
from lineagewire.consumers.datahub.handler import DataHubHandler
from lineagewire.consumers.runtime.record import Record
from lineagewire.exceptions import ConfigError
from tests.consumers.openlineage.samples import app_run
from tests.drift import assert_same

from .check import check_aspects_belong, check_metadata_file


def handler(path: pathlib.Path) -> DataHubHandler:
    h = DataHubHandler(load_config(file={"path": str(path)}))
    h.open()
    return h


def feed(h: DataHubHandler, events: list[dict], start: int = 0) -> int:
    return sum(h.handle(Record("t", 0, start + i, None, 0, e)) for i, e in enumerate(events))


def test_file_is_valid_after_every_event_and_passes_datahubs_check(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "out.json"
    h = handler(path)
    total = 0
    for i, e in enumerate(app_run() + app_run("hourly", fail=True)):
        total += feed(h, [e], i)
        assert len(json.loads(path.read_text())) == total  # valid JSON between events, nothing lost
    h.close()
    assert total > 40
    check_metadata_file(path)
    check_aspects_belong(json.loads(path.read_text()))


def test_restart_and_redelivery_add_no_duplicates(tmp_path) -> None:  # noqa: ANN001
    events = app_run() + app_run("hourly")
    path = tmp_path / "out.json"
    h = handler(path)
    feed(h, events[:7])
    h.close()
    after_first = path.read_text()
    h = handler(path)
    assert feed(h, events[:7]) == 0  # redelivered after the restart: already in the file
    assert path.read_text() == after_first
    feed(h, events[7:], 7)
    h.close()
    once = tmp_path / "once.json"
    h = handler(once)
    feed(h, events)
    h.close()
    assert path.read_text() == once.read_text()


def test_file_cut_mid_write_is_repaired_and_the_event_comes_again(tmp_path) -> None:  # noqa: ANN001
    events = app_run(actions=1)
    whole = tmp_path / "whole.json"
    h = handler(whole)
    feed(h, events)
    h.close()
    lines = whole.read_text().splitlines(keepends=True)
    # A crash while the last event was being appended: its first record and half of the second are on disk.
    last_id = events[-1]["header"]["event_id"]
    firsts = [i for i, line in enumerate(lines) if last_id in line]
    assert firsts, "the last event wrote nothing"
    cut = tmp_path / "cut.json"
    text = "".join(lines[:firsts[0] + 1]) + lines[firsts[0] + 1][:40] if len(firsts) > 1 else \
        "".join(lines[:firsts[0]]) + lines[firsts[0]][:40]
    cut.write_text(text)
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.read_text())
    h = handler(cut)
    json.loads(cut.read_text())  # valid again at once
    assert not h.sinks[0].written(last_id) and h.sinks[0].written(events[0]["header"]["event_id"])
    feed(h, events)  # Kafka redelivers from the last commit
    h.close()
    assert cut.read_text() == whole.read_text()


def test_a_file_this_service_did_not_write_is_refused_with_the_reason(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "other.json"
    path.write_text('{"not": "an array"}')
    with pytest.raises(ConfigError, match="does not begin with the '\\[' line of the JSON array"):
        handler(path)


def test_commits_wait_for_fsync(tmp_path) -> None:  # noqa: ANN001
    h = handler(tmp_path / "out.json")
    events = app_run(actions=1)
    feed(h, events)
    assert h.durable_offsets() == {}
    h.tick(0.0)
    assert h.durable_offsets() == {("t", 0): len(events)}
    h.close()


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"env": "MARS"}, "env='MARS'; expected a DataHub fabric"),
    ({"cluster": "a,b"}, "cluster='a,b'"),
    ({"rest": {"gms_url": "127.0.0.1:8080"}}, "gms_url='127.0.0.1:8080'; expected an http"),
    ({"rest": {"gms_url": "http://"}}, "gms_url='http://' has no host; expected an http"),
    ({"rest": {"gms_url": "https://:8080"}}, "gms_url='https://:8080' has no host"),
    ({"rest": {"gms_url": "http://gms:port"}}, "gms_url='http://gms:port': Port could not be cast"),
    ({"path_specs": {"s3": ["bucket/*"]}}, "expected a path with a '{table}' segment"),
])
def test_bad_config_is_named(kwargs: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace("{", r"\{").replace("}", r"\}")):
        load_config(**kwargs)


def test_yaml_config_and_flags_on_top(tmp_path) -> None:  # noqa: ANN001
    cfg = tmp_path / "datahub.yml"
    cfg.write_text("env: dev\ncluster: lake\nsinks:\n  file: a.json\n  rest: {gms_url: 'http://127.0.0.1:1'}\n")
    c = load_config(cfg, cluster="other", file={"path": "b.json"})
    assert isinstance(c, DataHubConfig)
    assert (c.env, c.cluster, str(c.sinks.file.path), c.sinks.rest.gms_url) == ("DEV", "other", "b.json",
                                                                               "http://127.0.0.1:1")
    bad = tmp_path / "bad.yml"
    bad.write_text("sinks: [1, 2]\n")
    with pytest.raises(ConfigError, match=r"bad\.yml.*sinks. is a list"):
        load_config(bad)


@pytest.mark.upstream
def test_each_line_is_datahubs_file_format() -> None:
    """``line`` (the aspect's JSON text put in as it is) gives ``record``, which is what acryl-datahub's own
    ``write_metadata_file`` writes for the proposal, with the sink's properties added."""
    from datahub.ingestion.sink.file import write_metadata_file

    from lineagewire.consumers.datahub.proposals import line, record, system_json
    from lineagewire.consumers.datahub.translate import Translator
    from tests.consumers.openlineage.samples import refresh_run

    t = Translator()
    events = app_run() + app_run() + app_run("x", fail=True) + refresh_run() + split_action()
    proposals = [p for e in events for p in t.translate(e)]
    kinds, changes = set(), set()
    for i, p in enumerate(proposals):
        props = {"k": str(i)}
        assert_same(line(p, system_json(p.systemMetadata), json.dumps(props)), json.dumps(record(p, props)),
                    library="acryl-datahub", what=f"the file line of the {p.aspectName} proposal {i} (line, and "
                    "record: acryl-datahub's rendering)")
        kinds.add(p.aspectName)
        changes.add(p.changeType)
    assert len(kinds) >= 11 and len(proposals) > 100 and changes == {"UPSERT", "PATCH"}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "theirs.json"
        write_metadata_file(path, proposals)
        assert_same([record(p) for p in proposals], json.loads(path.read_text()), library="acryl-datahub",
                    what="the records of the proposals (record, and write_metadata_file's)")


@pytest.mark.upstream
def test_lines_with_system_metadata_of_any_shape_are_datahubs_file_format() -> None:
    from datahub.emitter.mcp import MetadataChangeProposalWrapper
    from datahub.metadata.schema_classes import StatusClass, SystemMetadataClass

    from lineagewire.consumers.datahub.proposals import line, record, system_json

    urn = "urn:li:dataset:(urn:li:dataPlatform:hive,a.b,PROD)"
    for sm in (None, SystemMetadataClass(lastObserved=5), SystemMetadataClass(lastObserved=5, runId="r"),
               SystemMetadataClass(lastObserved=5, pipelineName="p", version="1")):
        p = MetadataChangeProposalWrapper(entityUrn=urn, aspect=StatusClass(removed=False),
                                          systemMetadata=sm).make_mcp()
        for props in (None, {"k": "v"}):
            assert_same(line(p, system_json(sm), json.dumps(props) if props else None), json.dumps(record(p, props)),
                        library="acryl-datahub", what=f"the file line of a proposal with systemMetadata {sm} "
                        "(line, and record: acryl-datahub's rendering)")


def split_action() -> list[dict]:
    """An action whose column lineage comes in two parts (the second one is a PATCH)."""
    run = app_run("split", actions=1)
    first = copy.deepcopy(run[2])
    first["parts"] = 2
    second = copy.deepcopy(first)
    second["part"] = 1
    second["header"]["event_id"] = str(uuid.uuid4())
    return [first, second]


def test_identical_aspects_are_written_once_and_a_restart_on_the_file_gives_the_same_file(tmp_path) -> None:  # noqa: ANN001
    events = app_run() + app_run() + app_run("hourly") + split_action() + app_run("split", actions=1)
    path = tmp_path / "out.json"
    h = handler(path)
    feed(h, events)
    h.close()
    records = json.loads(path.read_text())
    versioned = [(r["entityUrn"], r["aspectName"], json.dumps(r["aspect"]["json"])) for r in records
                 if r["changeType"] == "UPSERT" and r["aspectName"] != "dataProcessInstanceRunEvent"]
    # The second run of daily_orders repeats its flow, job and datasets: written once, not again.
    flow = "urn:li:dataFlow:(spark,daily_orders,prod)"
    assert sorted(v[1] for v in versioned if v[0] == flow) == ["dataFlowInfo", "status"]
    # Everything skipped was identical to what is already in the file for its URN.
    every = DataHubHandler(load_config(file={"path": str(tmp_path / "all.json")}, skip_unchanged=0))
    every.open()
    feed(every, events)
    every.close()
    full = json.loads((tmp_path / "all.json").read_text())
    assert len(full) > len(records) + 20
    assert {(r["entityUrn"], r["aspectName"], json.dumps(r["aspect"].get("json"))) for r in full} == \
        {(r["entityUrn"], r["aspectName"], json.dumps(r["aspect"].get("json"))) for r in records}
    # A patch makes the next identical upsert of its aspect be written again.
    patched = next(r["entityUrn"] for r in records if r["changeType"] == "PATCH")
    job_io = [r for r in records if r["aspectName"] == "dataJobInputOutput" and r["entityUrn"] == patched]
    assert [r["changeType"] for r in job_io] == ["UPSERT", "PATCH", "UPSERT"]
    check_metadata_file(path)
    # Stopped half-way and restarted on the same file: the same file as one run (the memory is refilled from it).
    cut = tmp_path / "cut.json"
    for part in (events[:8], events):
        h = handler(cut)
        feed(h, part)
        h.close()
    assert cut.read_text() == path.read_text()


def test_two_jobs_interleaved_either_way_give_the_same_records(tmp_path) -> None:  # noqa: ANN001
    # Both jobs read sales.orders. Their events are on two partitions, so a replay may interleave them the
    # other way: what each job writes must not depend on that (the replay test of test_service compares).
    daily, hourly = app_run(), app_run("hourly", fail=True)
    files = []
    for name, order in (("a", daily + hourly), ("b", [e for pair in zip(hourly, daily, strict=True)
                                                       for e in pair])):
        path = tmp_path / f"{name}.json"
        h = handler(path)
        feed(h, order)
        h.close()
        files.append(sorted(json.dumps(r) for r in json.loads(path.read_text())))
    assert files[0] == files[1]
    orders = "urn:li:dataset:(urn:li:dataPlatform:hive,sales.orders,PROD)"
    jobs = {json.loads(r)["systemMetadata"]["properties"]["lineagewire.job"] for r in files[0]
            if json.loads(r)["entityUrn"] == orders and json.loads(r)["aspectName"] == "schemaMetadata"}
    assert jobs == {"spark/daily_orders", "spark/hourly"}


def test_each_line_is_datahubs_rendering_with_the_sinks_properties(tmp_path) -> None:  # noqa: ANN001
    from lineagewire.consumers.datahub.proposals import record as render
    from lineagewire.consumers.datahub.translate import Translator
    from lineagewire.consumers.datahub.unchanged import Unchanged
    from lineagewire.schemas import job_key
    from tests.consumers.openlineage.samples import refresh_run

    # Runs of a job at other times (their upstream lineage, run events and action runs' properties have the times
    # and run ids set in their JSON), a refresh, a split action.
    later = [app_run(fail=i == 1) for i in range(3)]
    for i, run in enumerate(later):
        for e in run:
            e["header"]["event_time"] += dt.timedelta(hours=i + 1, milliseconds=7 * i)
            if "transition_time" in e:
                e["transition_time"] += dt.timedelta(hours=i + 1, milliseconds=7 * i)
    events = app_run() + app_run("hourly", fail=True) + [e for run in later for e in run] + refresh_run() + \
        split_action()
    path = tmp_path / "out.json"
    h = handler(path)
    feed(h, events)
    h.close()
    translator, unchanged, want = Translator(), Unchanged(), []
    for e in events:
        fresh, marks = unchanged.select(translator.translate(e), job_key(e))
        unchanged.commit(marks)
        for i, p in enumerate(fresh, 1):
            obj = render(p)
            obj["systemMetadata"]["properties"] = {"lineagewire.eventId": e["header"]["event_id"],
                                                   "lineagewire.record": f"{i}/{len(fresh)}",
                                                   "lineagewire.job": job_key(e)}
            want.append(json.dumps(obj))
    assert [line.rstrip(",") for line in path.read_text().splitlines()[1:-1]] == want


def written(path: pathlib.Path, events: list[dict], start: int = 0, **file: object) -> DataHubHandler:
    """A handler writing ``events`` to ``path`` (file sink options ``file``), opened, fed and closed."""
    h = DataHubHandler(load_config(file={"path": str(path), **file}))
    h.open()
    feed(h, events, start)
    h.close()
    return h


def _records_of(paths: list[pathlib.Path]) -> list[str]:
    return [json.dumps(r) for p in paths for r in json.loads(p.read_text())]


def test_files_roll_by_size_each_a_valid_file_with_nothing_lost_or_doubled(tmp_path) -> None:  # noqa: ANN001
    events = [e for i in range(6) for e in app_run(f"job{i}")]
    path = tmp_path / "out.json"
    written(path, events, roll_bytes=40_000)
    rolled = sorted(tmp_path.glob("out.*.json"))
    assert len(rolled) >= 3
    once = tmp_path / "once" / "out.json"
    written(once, events)
    assert _records_of([*rolled, path]) == _records_of([once])  # in order, across the files
    for p in rolled:
        assert json.loads(p.read_text()) and p.stat().st_size < 40_000 + 20_000
    check_metadata_file(rolled[-1])  # each rolled file is complete (one checked: the check takes ~10 s)


def test_a_restart_after_a_roll_skips_the_events_of_the_newest_rolled_file(tmp_path) -> None:  # noqa: ANN001
    events = [e for i in range(6) for e in app_run(f"job{i}")]
    path = tmp_path / "out.json"
    written(path, events, roll_bytes=40_000)
    rolled = sorted(tmp_path.glob("out.*.json"))
    newest = max(rolled, key=lambda p: p.stat().st_mtime_ns)
    assert newest == rolled[-1]  # the names sort in the order the files were written
    ids = {r["systemMetadata"]["properties"]["lineagewire.eventId"] for r in json.loads(newest.read_text())}
    h = DataHubHandler(load_config(file={"path": str(path), "roll_bytes": 40_000}))
    h.open()
    again = [e["header"]["event_id"] for e in events if e["header"]["event_id"] in ids]
    assert again and all(h.sinks[0].written(i) for i in again)  # redelivered after the restart: skipped
    h.close()


def test_files_roll_by_age_on_a_quiet_topic(tmp_path) -> None:  # noqa: ANN001
    from tests.helpers import wait_for

    path = tmp_path / "out.json"
    h = DataHubHandler(load_config(file={"path": str(path), "roll_seconds": 0.2}))
    h.open()
    h.batch_done()
    assert list(tmp_path.glob("out.*.json")) == []  # an empty file is not rolled
    feed(h, app_run(actions=1))
    wait_for(lambda: h.tick(0.0) == 0 and list(tmp_path.glob("out.*.json")), timeout=10, every=0.05)
    assert json.loads(path.read_text()) == []
    h.close()


def test_a_restart_reads_only_the_tail_and_skips_what_is_in_it(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import os

    events = [e for i in range(12) for e in app_run(f"job{i}")]
    path = tmp_path / "out.json"
    written(path, events, tail_bytes=8192)
    size = path.stat().st_size
    assert size > 20 * 8192
    read = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: read.append(n) or real(fd, n, at))
    h = DataHubHandler(load_config(file={"path": str(path), "tail_bytes": 8192}))
    h.open()
    assert 0 < sum(read) <= 2 * 8192 + 16  # the tail (doubled at most once if an event reaches further back)
    assert feed(h, events[-2:], len(events) - 2) == 0  # redelivered after the restart: in the tail, skipped
    h.close()
    assert path.stat().st_size == size


def test_a_cut_deep_in_a_large_file_keeps_what_is_before_it(tmp_path) -> None:  # noqa: ANN001
    events = [e for i in range(12) for e in app_run(f"job{i}")]
    whole = tmp_path / "whole.json"
    written(whole, events, tail_bytes=4096)
    text = whole.read_text()
    last_id = events[-1]["header"]["event_id"]
    cut = tmp_path / "cut.json"
    cut.write_text(text[:text.index(last_id) + 10])  # the crash: the last event's first record half-written
    h = DataHubHandler(load_config(file={"path": str(cut), "tail_bytes": 4096}))
    h.open()
    assert not h.sinks[0].written(last_id) and h.sinks[0].written(events[-2]["header"]["event_id"])
    feed(h, events[-1:], len(events) - 1)
    h.close()
    assert cut.read_text() == text
