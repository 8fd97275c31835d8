"""``audit verify`` catches each tampering; ``audit query`` answers the auditor's questions of docs/audit.md.

The archive is written by the real handler from records built the way the runtime builds them (the broker
path is covered by test_archive.py); verify and query only read files.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import pathlib
import re
import shutil

import pytest
from click.testing import CliRunner

from lineagewire.cli import main_group
from lineagewire.consumers.audit.archive import ArchiveHandler
from lineagewire.consumers.runtime import Record
from lineagewire.schemas import Codec, job_key
from tests.consumers.openlineage.samples import app_run

DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs" / "audit.md"


def records(events: list[dict], topic: str = "lineage.jobs", start_ms: int = 0) -> list[Record]:
    codec = Codec()
    out = []
    for i, e in enumerate(events):
        value = codec.encode(e)
        ts = start_ms or int(e["header"]["event_time"].timestamp() * 1000)
        out.append(Record(topic, 0, i, job_key(e), ts + (i if start_ms else 0), codec.decode(value), value=value,
                          timestamp_type=1, key_bytes=job_key(e).encode()))
    return out


@pytest.fixture
def archive(tmp_path: pathlib.Path) -> pathlib.Path:
    """Three runs of daily_orders in November 2026 (one failed) and one of other_job; 4 records per file."""
    events = []
    for day, fail in ((1, False), (2, True), (3, False)):
        run = app_run("daily_orders", fail=fail)
        shift = dt.timedelta(days=day - 1)
        for e in run:
            e["header"]["event_time"] += shift
            if "transition_time" in e:
                e["transition_time"] += shift
        events += run
    events += app_run("other_job", actions=1)
    handler = ArchiveHandler(str(tmp_path), roll_records=4)
    for rec in records(events):
        handler.handle(rec)
    handler.close()
    return tmp_path


def cli(*args: str):  # noqa: ANN201
    return CliRunner().invoke(main_group, list(args), catch_exceptions=False)


def files(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(root.rglob("*.parquet"))


def test_verify_passes_on_an_intact_archive(archive: pathlib.Path) -> None:
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 0, r.output
    assert re.search(r"verify ok: 7 files, 19 records", r.stderr)
    assert r.stdout == ""


def test_verify_catches_one_changed_byte(archive: pathlib.Path) -> None:
    target = files(archive)[3]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1
    rel = target.relative_to(archive).as_posix()
    assert r.stdout.splitlines() == [next(x for x in r.stdout.splitlines() if x.startswith(f"changed: {rel}: "))]


def test_verify_catches_a_deleted_file(archive: pathlib.Path) -> None:
    target = files(archive)[0]
    target.unlink()
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1
    rel = target.relative_to(archive).as_posix()
    assert [x.split(": ")[0:2] for x in r.stdout.splitlines()] == [["missing", rel]]


def test_verify_catches_two_swapped_files(archive: pathlib.Path) -> None:
    a, b = files(archive)[1], files(archive)[2]
    tmp = a.with_suffix(".swap")
    shutil.move(a, tmp)
    shutil.move(b, a)
    shutil.move(tmp, b)
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1
    ra, rb = a.relative_to(archive).as_posix(), b.relative_to(archive).as_posix()
    assert sorted(r.stdout.splitlines()) == sorted([f"reordered: {ra}: holds the content listed for {rb} "
                                                    "(files swapped or moved)",
                                                    f"reordered: {rb}: holds the content listed for {ra} "
                                                    "(files swapped or moved)"])


def test_verify_catches_an_edited_manifest(archive: pathlib.Path) -> None:
    manifest = archive / "_manifests" / "lineage.jobs+0.jsonl"
    lines = manifest.read_text().splitlines()
    lines[1], lines[2] = lines[2], lines[1]
    manifest.write_text("\n".join(lines) + "\n")
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1
    assert "chain: _manifests/lineage.jobs+0.jsonl: line 2" in r.stdout and "reordered:" in r.stdout


def doc_queries() -> dict[str, str]:
    """The SQL blocks of docs/audit.md under a '<!-- query: NAME -->' marker."""
    text = DOCS.read_text()
    return dict(re.findall(r"<!-- query: (\S+) -->\s*```sql\n(.*?)```", text, flags=re.S))


def test_the_auditor_questions_of_the_docs(archive: pathlib.Path) -> None:
    queries = doc_queries()
    assert set(queries) == {"runs-in-month", "runs-that-wrote", "status-timeline"}

    r = cli("audit", "query", "--archive", str(archive), "--format", "json", queries["runs-in-month"])
    assert r.exit_code == 0, r.output
    runs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["final_status"] for x in runs] == ["FINISHED", "FAILED", "FINISHED"]
    assert [x["started"][:10] for x in runs] == ["2026-11-01", "2026-11-02", "2026-11-03"]

    r = cli("audit", "query", "--archive", str(archive), "--format", "csv", queries["runs-that-wrote"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert len(rows) == 3 and {x["job_name"] for x in rows} == {"daily_orders"}

    run_id = runs[1]["run_id"]
    r = cli("audit", "query", "--archive", str(archive), queries["status-timeline"].replace("RUN_ID", run_id))
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["event_time", "kind", "old_status", "status"]
    statuses = [line.split()[-1] for line in lines[2:-1]]
    assert statuses == ["CREATED", "RUNNING", "SUCCEEDED", "SUCCEEDED", "FAILED"] and lines[-1] == "(5 rows)"


def test_raw_columns_are_queryable_and_bad_sql_is_one_line(archive: pathlib.Path) -> None:
    r = cli("audit", "query", "--archive", str(archive), "--format", "json",
            'SELECT topic, partition, "offset", key, value, timestamp FROM events ORDER BY "offset" LIMIT 1')
    row = json.loads(r.stdout)
    assert row["offset"] == 0 and row["key"] == "spark/daily_orders" and row["value"]
    r = CliRunner().invoke(main_group, ["audit", "query", "--archive", str(archive), "SELEC nonsense"])
    assert r.exit_code != 0
    from lineagewire.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["audit", "query", "--archive", str(archive), "SELECT nope FROM events"])
    assert exit_info.value.code == 2


def test_an_empty_archive_answers_with_no_rows(tmp_path: pathlib.Path) -> None:
    r = cli("audit", "query", "--archive", str(tmp_path), "SELECT count(*) AS n FROM events")
    assert r.exit_code == 0 and r.stdout.splitlines()[2].strip() == "0"


def test_replay_from_the_archive_filters_by_columns_before_decoding(archive: pathlib.Path) -> None:
    """--status and --job are answered from the decoded columns: only the matching values are decoded."""
    from lineagewire.consumers.audit.archive_read import read_archive
    from lineagewire.consumers.audit.storage import Storage
    from lineagewire.consumers.audit.subscribe import matches

    class Counting(Codec):
        decoded = 0

        def decode(self, data: bytes | None) -> dict:
            Counting.decoded += 1
            return super().decode(data)

    storage = Storage(str(archive))
    everything = list(read_archive(storage, "lineage.jobs", start="beginning", end="end"))
    assert len(everything) == 19
    for job, status in ((None, "FAILED"), ("daily_orders", "FINISHED"), ("spark/other_job", None)):
        Counting.decoded = 0
        got = list(read_archive(storage, "lineage.jobs", start="beginning", end="end", job=job, status=status,
                                codec=Counting()))
        want = [r for r in everything if matches(r.event, job, status)]
        assert [(r.offset, r.event) for r in got] == [(r.offset, r.event) for r in want] and want
        assert Counting.decoded == len(want)
