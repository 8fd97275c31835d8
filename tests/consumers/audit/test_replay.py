"""``lineagewire replay`` against the real broker: ranges, filters, outputs, identical OpenLineage twice."""

from __future__ import annotations

import json
import pathlib

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from lineagewire.cli import main_group
from lineagewire.consumers.audit.replay import replay_range
from lineagewire.consumers.openlineage.handler import OpenLineageHandler
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from tests.consumers.openlineage.receiver import Receiver
from tests.consumers.openlineage.samples import app_run, refresh_run
from tests.consumers.openlineage.spec import load_validator

pytestmark = pytest.mark.integration


@pytest.fixture
def published(settings) -> list[dict]:  # noqa: ANN001
    events = app_run("alpha") + app_run("beta", fail=True) + refresh_run("gamma")
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)
    return events


def cli(settings, *args: str):  # noqa: ANN001, ANN201
    result = CliRunner().invoke(main_group, ["--bootstrap-servers", settings.bootstrap_servers, "replay",
                                             "--topic", settings.topics.jobs, *args], catch_exceptions=False)
    return result


def test_same_range_twice_gives_identical_openlineage_events(settings, published, tmp_path) -> None:  # noqa: ANN001
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        r = cli(settings, "--into", "file", "--output", str(path), "--format", "openlineage")
        assert r.exit_code == 0, r.output
    # Identical events, byte for byte; partitions interleave as they arrive, so compare per job (one job,
    # one partition: its order is fixed) and as a whole regardless of that interleaving.
    lines_a, lines_b = a.read_text().splitlines(), b.read_text().splitlines()
    assert sorted(lines_a) == sorted(lines_b)

    def per_job(lines: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for line in lines:
            out.setdefault(json.loads(line)["job"]["name"].split(".")[0], []).append(line)
        return out
    assert per_job(lines_a) == per_job(lines_b)
    lines = [json.loads(x) for x in lines_a]
    assert len(lines) == len(published) - 1  # the refresh command gives no OpenLineage event
    validate = load_validator()
    if validate is not None:
        assert validate(lines) == []
    assert "replayed 15 events" in r.stderr
    assert "RefreshCommand 1" in r.stderr and "0 errors" in r.stderr


def test_job_filter_and_offset_range(settings, published) -> None:  # noqa: ANN001
    r = cli(settings, "--job", "spark/beta")
    assert r.exit_code == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    assert [e["event"]["header"]["event_id"] for e in events] == \
        [e["header"]["event_id"] for e in published if e["header"]["job_name"] == "beta"]
    r = cli(settings, "--from", "1", "--to", "3")
    offsets = sorted((e["partition"], e["offset"]) for e in map(json.loads, r.stdout.splitlines()))
    assert offsets and all(1 <= off < 3 for _, off in offsets)


def test_time_range(settings, published) -> None:  # noqa: ANN001
    r = cli(settings, "--from", "2000-01-01T00:00:00Z", "--to", "2000-01-02T00:00:00Z")
    assert r.exit_code == 0 and r.stdout == ""
    r = cli(settings, "--from", "2000-01-01T00:00:00Z")
    assert len(r.stdout.splitlines()) == len(published)


def test_replay_moves_no_live_group_offsets(settings, published, group_id) -> None:  # noqa: ANN001
    class Count(OpenLineageHandler):
        def __init__(self) -> None:
            super().__init__(client=object())
            self.n = 0

        def handle(self, record) -> int:  # noqa: ANN001
            self.n += 1
            return 0

    h = Count()
    ConsumerRuntime(settings, h, group_id=group_id).run(max_events=4)
    parts = [TopicPartition(settings.topics.jobs, p) for p in range(3)]

    def committed() -> list[int]:
        c = Consumer({**settings.as_librdkafka_dict(), "group.id": group_id})
        try:
            return [tp.offset for tp in c.committed(parts, timeout=30)]
        finally:
            c.close()

    before = committed()
    assert sum(max(0, o) for o in before) == 4
    summary = replay_range(settings, settings.topics.jobs, start="beginning", end="end", sink=lambda rec: 1)
    assert summary.events == len(published)
    assert committed() == before


def test_into_openlineage_posts_the_same_events_as_the_file(settings, published, tmp_path) -> None:  # noqa: ANN001
    cfg = tmp_path / "openlineage.yml"
    with Receiver() as rx:
        cfg.write_text(f"transport:\n  type: http\n  url: {rx.url}\n")
        r = cli(settings, "--into", "openlineage", "--openlineage-config", str(cfg))
        assert r.exit_code == 0, r.stderr
        posted = rx.snapshot()
    for e in posted:
        # openlineage-python's client adds its own version as a run tag; the rest is the translator's output.
        assert e["run"]["facets"].pop("tags")["tags"][0]["key"] == "openlineage_client_version"
    out = tmp_path / "ol.jsonl"
    cli(settings, "--into", "file", "--output", str(out), "--format", "openlineage")
    from tests.consumers.openlineage.receiver import event_key

    from_file = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(posted, key=event_key) == sorted(from_file, key=event_key)


def test_undecodable_messages_are_counted_as_errors(settings, published) -> None:  # noqa: ANN001
    with Publisher(settings) as pub:
        pub.produce_raw(settings.topics.jobs, b"garbage", key=b"x", partition=0)
    r = cli(settings, "--into", "stdout")
    assert r.exit_code == 1
    assert f"{settings.topics.jobs}[0]@" in r.stderr and "skipped undecodable message" in r.stderr
    assert "1 errors" in r.stderr
    assert len(r.stdout.splitlines()) == len(published)


def test_bad_arguments_are_named(settings, tmp_path: pathlib.Path) -> None:  # noqa: ANN001
    r = CliRunner().invoke(main_group, ["replay", "--into", "file"])
    assert r.exit_code != 0 and "--into file needs --output" in r.output
    r = CliRunner().invoke(main_group, ["replay", "--from", "yesterday-ish"])
    assert r.exit_code != 0


def test_to_before_from_says_why_and_exits_2(settings) -> None:  # noqa: ANN001
    for frm, to in (("2026-02-01T00:00:00Z", "2026-01-01T00:00:00Z"), ("10", "3")):
        r = cli(settings, "--from", frm, "--to", to)
        assert r.exit_code == 2, r.output
        assert f"'{to}' is before --from '{frm}', so the range is empty" in r.stderr


def test_into_file_refuses_to_overwrite_and_can_append_or_force(settings, published, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "events.jsonl"
    out.write_text("kept\n")
    r = cli(settings, "--into", "file", "--output", str(out))
    assert r.exit_code == 2 and "exists; pass --force to replace it or --append to add to it" in r.stderr
    assert out.read_text() == "kept\n"
    r = cli(settings, "--into", "file", "--output", str(out), "--append")
    assert r.exit_code == 0, r.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "kept" and len(lines) == 1 + len(published)
    r = cli(settings, "--into", "file", "--output", str(out), "--force")
    assert r.exit_code == 0, r.stderr
    assert len(out.read_text().splitlines()) == len(published)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]  # no temporary file left behind


@pytest.mark.slow
def test_into_file_leaves_an_existing_output_untouched_when_the_broker_is_down(tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "events.jsonl"
    out.write_text("kept\n")
    for flags in ([], ["--force"], ["--append"]):
        r = CliRunner().invoke(main_group, ["--bootstrap-servers", "127.0.0.1:1", "replay", "--into", "file",
                                            "--output", str(out), *flags])
        assert r.exit_code != 0
        assert out.read_text() == "kept\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]


def test_replay_sets_up_its_process_as_the_openlineage_service_does() -> None:
    import gc
    import sys

    from lineagewire.consumers.audit.replay import _service

    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(0.005)
    try:
        handler = _service("openlineage")
        assert handler.name == "openlineage"
        assert sys.getswitchinterval() < 0.001  # as `consume openlineage` has it (prepare_process)
        assert handler.concurrency == 0  # one event at a time: each failure is reported with its event
    finally:
        sys.setswitchinterval(interval)
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.parametrize(("damage", "fmt"), [("flipped byte", 2), ("truncated", 2), ("deleted", 2), ("garbage", 2),
                                             ("flipped byte", 1), ("garbage", 1)])
def test_a_damaged_archive_file_is_one_line_naming_it_and_exit_1(settings, tmp_path, damage, fmt) -> None:  # noqa: ANN001
    """Archived files of this test's (empty) topic, one of them damaged: ``replay --archive`` names it."""
    from lineagewire.consumers.audit.archive import ArchiveHandler
    from tests.consumers.audit.test_verify_query import records, to_format1

    handler = ArchiveHandler(str(tmp_path / "archive"), roll_records=4)
    for rec in records(app_run("alpha") + app_run("beta"), topic=settings.topics.jobs):
        handler.handle(rec)
    handler.close()
    if fmt == 1:
        to_format1(tmp_path / "archive", settings.topics.jobs)
    target = sorted((tmp_path / "archive").rglob("*.parquet"))[2]
    data = bytearray(target.read_bytes())
    if damage == "flipped byte":
        data[len(data) // 2] ^= 0x10
        target.write_bytes(bytes(data))
    elif damage == "truncated":
        target.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "deleted":
        target.unlink()
    else:
        target.write_bytes(b"garbage " * 100)
    r = cli(settings, "--archive", str(tmp_path / "archive"), "--into", "file", "--output", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"error: {target}: "), r.stderr
    assert not (tmp_path / "out").exists()
