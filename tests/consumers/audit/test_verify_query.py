"""``audit verify`` catches each tampering; ``audit query`` answers the auditor's questions of docs/audit.md.

The archive is written by the real handler from records built the way the runtime builds them (the broker
path is covered by test_archive.py); verify and query only read files.
"""

from __future__ import annotations

import csv
import dataclasses
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


MANIFEST = pathlib.Path("_manifests") / "lineage.jobs+0.jsonl"


def manifest_lines(root: pathlib.Path, topic: str = "lineage.jobs") -> list[dict]:
    return [json.loads(x) for x in (root / "_manifests" / f"{topic}+0.jsonl").read_text().splitlines()]


def write_manifest(root: pathlib.Path, lines: list[dict], topic: str = "lineage.jobs") -> None:
    (root / "_manifests" / f"{topic}+0.jsonl").write_text(
        "".join(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n" for e in lines))


def to_format1(root: pathlib.Path, topic: str = "lineage.jobs") -> None:
    """Rewrite the manifest as lineagewire wrote it before format 2: no ``v``, a chain over hash and path only."""
    from lineagewire.consumers.audit.layout import GENESIS, chain_hash

    lines, previous = manifest_lines(root, topic), GENESIS
    for e in lines:
        e.pop("v", None)
        e["chain"] = previous = chain_hash(previous, e["sha256"], e["file"])
    write_manifest(root, lines, topic)


FIELDS = {"records": 1, "first_offset": -1, "last_offset": 1, "bytes": 7, "min_timestamp_ms": -1000,
          "max_timestamp_ms": 1000}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_verify_checks_every_field_of_a_manifest_line_against_its_file(archive: pathlib.Path, name: str) -> None:
    lines = manifest_lines(archive)
    held = lines[2][name]
    lines[2][name] += FIELDS[name]
    write_manifest(archive, lines)
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1, r.output
    says = held + FIELDS[name]
    assert (f"manifest: {lines[2]['file']}: {name} is {held} in the file, _manifests/lineage.jobs+0.jsonl line 3 "
            f"says {says}") in r.stdout.splitlines()
    # the chain covers every field too; and the count is the files' own, not the edited line's
    assert "chain: _manifests/lineage.jobs+0.jsonl: line 3: chain hash does not follow" in r.stdout
    assert re.search(r"verify FAILED: 7 files, 19 records", r.stderr)


def test_a_line_edited_and_re_chained_is_caught_by_its_file(archive: pathlib.Path) -> None:
    """An editor who recomputes the chain after the edit still loses against the file the line describes."""
    from lineagewire.consumers.audit.layout import GENESIS, line_chain

    lines, previous = manifest_lines(archive), GENESIS
    lines[4]["records"] += 1
    for e in lines:
        e["chain"] = previous = line_chain(previous, e)
    write_manifest(archive, lines)
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [f"manifest: {lines[4]['file']}: records is {lines[4]['records'] - 1} in the "
                                     f"file, _manifests/lineage.jobs+0.jsonl line 5 says {lines[4]['records']}"]


def test_an_archive_of_format_1_still_verifies_its_fields_are_checked_and_new_lines_chain_on(
        archive: pathlib.Path) -> None:
    to_format1(archive)
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 0, r.output
    assert "note: 7 manifest lines are of format 1" in r.stderr
    head = re.search(r"head lineage.jobs\[0\]: (\w+)", r.stderr).group(1)  # type: ignore[union-attr]

    original = (archive / MANIFEST).read_text()
    lines = manifest_lines(archive)
    lines[1]["max_timestamp_ms"] = 0  # outside the format-1 chain: caught by the file
    write_manifest(archive, lines)
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1 and r.stdout.startswith(f"manifest: {lines[1]['file']}: max_timestamp_ms is ")
    (archive / MANIFEST).write_text(original)

    # The archiver continues an old manifest in format 2, chaining on from its last line.
    later = app_run("later_job", actions=1)
    handler = ArchiveHandler(str(archive), roll_records=4)
    for rec in records(later):
        handler.handle(dataclasses.replace(rec, offset=rec.offset + 100))
    handler.close()
    lines = manifest_lines(archive)
    assert ["v" in e for e in lines] == [False] * 7 + [True] * (len(lines) - 7) and len(lines) > 7
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 0, r.output
    assert f"head lineage.jobs[0]: {head}" not in r.stderr and "note: 7 manifest lines are of format 1" in r.stderr


@pytest.mark.parametrize("fmt", [1, 2])
def test_replay_from_the_archive_does_not_skip_files_on_edited_timestamps(archive: pathlib.Path, fmt: int) -> None:
    """Lines claiming their files end before the start are not believed: format 2 breaks its chain, format 1's
    timestamps are not chained, so both read the files' own offsets and times."""
    import io

    from lineagewire.consumers.audit.archive_read import read_archive
    from lineagewire.consumers.audit.storage import Storage

    if fmt == 1:
        to_format1(archive)
    storage = Storage(str(archive))
    start = dt.datetime(2026, 11, 2, 23, tzinfo=dt.UTC)
    want = [(r.offset, r.event) for r in read_archive(storage, "lineage.jobs", start=start, end="end")]
    assert 0 < len(want) < 19
    lines = manifest_lines(archive)
    for e in lines:
        e["min_timestamp_ms"] = e["max_timestamp_ms"] = 0
    write_manifest(archive, lines)
    errors = io.StringIO()
    got = [(r.offset, r.event) for r in read_archive(storage, "lineage.jobs", start=start, end="end",
                                                      errors=errors)]
    assert got == want
    if fmt == 2:
        assert errors.getvalue().startswith(f"{storage.path(str(MANIFEST))}: line 1: chain hash does not follow")
    else:
        assert errors.getvalue() == ""


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


WRITES = {  # statement -> the file it would create (relative to the test's folder)
    "COPY (SELECT * FROM events) TO 'out.csv'": "out.csv",
    "COPY (SELECT * FROM events) TO 'out.parquet' (FORMAT parquet)": "out.parquet",
    "ATTACH 'new.db' AS n": "new.db",
    "ATTACH 'new2.db' AS n; CREATE TABLE n.t AS SELECT * FROM events": "new2.db",
    "EXPORT DATABASE 'exported'": "exported",
    "SELECT 1; COPY (SELECT * FROM events) TO 'both.csv'": "both.csv",
    "INSTALL httpfs": None,
    "ATTACH 'x.sqlite' (TYPE sqlite)": "x.sqlite",
    "SET enable_external_access = true": None,
    "PRAGMA version": None,
}


@pytest.mark.parametrize("sql", sorted(WRITES))
def test_query_runs_one_read_statement_only(archive: pathlib.Path, tmp_path_factory: pytest.TempPathFactory,
                                            monkeypatch: pytest.MonkeyPatch, sql: str) -> None:
    here = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(here)
    r = cli_result("audit", "query", "--archive", str(archive), sql)
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, r.output
    assert r.stderr.startswith("error: query refused: ") and "expected one read statement" in r.stderr
    assert list(here.iterdir()) == []


READS = [  # SELECTs that would read beyond the archive's listed files
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_parquet('{unlisted}')",
    "SELECT * FROM glob('{archive}/*')",
    "SELECT * FROM read_parquet('https://127.0.0.1:9/x.parquet')",
    "SELECT * FROM read_csv('/etc/hostname')",
]


@pytest.mark.parametrize("sql", READS)
def test_query_reads_nothing_beyond_the_archive(archive: pathlib.Path, tmp_path_factory: pytest.TempPathFactory,
                                                sql: str) -> None:
    secret = tmp_path_factory.mktemp("host") / "secret.csv"
    secret.write_text("password\nhunter2\n")
    unlisted = archive / "topic=lineage.jobs" / "date=2026-11-01" / "hour=00" / "added.parquet"
    unlisted.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(files(archive)[0], unlisted)
    r = cli_result("audit", "query", "--archive", str(archive),
                   sql.format(secret=secret, unlisted=unlisted, archive=archive))
    assert r.exit_code == 2, r.output
    assert "hunter2" not in r.output and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("error: query refused: ") and "audit query reads only the archive" in r.stderr


def cli_result(*args: str):  # noqa: ANN201
    """``main`` as the console script runs it (exit codes of LineagewireError included), captured."""
    import contextlib
    import sys

    from lineagewire.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    sys.stdout.flush()

    class Result:
        exit_code, stdout, stderr, output = code, out.getvalue(), err.getvalue(), out.getvalue() + err.getvalue()
    return Result()


@pytest.mark.parametrize("case", ["a path that does not exist", "an empty folder", "a folder without a manifest"])
def test_verify_of_no_archive_fails_naming_what_was_expected(tmp_path: pathlib.Path, case: str) -> None:
    target = tmp_path / "archive"
    if case != "a path that does not exist":
        target.mkdir()
    if case == "a folder without a manifest":
        (target / "notes.txt").write_text("not an archive")
        (target / "topic=lineage.jobs").mkdir()
    r = cli_result("audit", "verify", str(target))
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"error: no archive at {target}: "), r.stderr
    assert "expected the folder or URL that 'lineagewire consume archive --to' writes, with _manifests/" in r.stderr


def test_an_older_version_s_archive_that_holds_nothing_yet_still_verifies(tmp_path: pathlib.Path) -> None:
    """Before the marker (``_manifests/archive.json``), an archive service that had closed no file left an empty
    ``_manifests/`` folder: still an archive, not ``no archive at``."""
    target = tmp_path / "archive"
    (target / "_manifests").mkdir(parents=True)
    r = cli_result("audit", "verify", str(target))
    assert r.exit_code == 0, r.output
    assert "verify ok: 0 files, 0 records" in r.stderr and "the archive holds nothing yet" in r.stderr


def test_data_files_without_manifests_are_an_archive_with_findings(archive: pathlib.Path) -> None:
    shutil.rmtree(archive / "_manifests")
    r = cli_result("audit", "verify", str(archive))
    assert r.exit_code == 1, r.output
    assert "no archive at" not in r.output and "unlisted: topic=" in r.stdout, r.output


def test_reads_of_the_archive_still_work_when_confined(archive: pathlib.Path) -> None:
    r = cli("audit", "query", "--archive", str(archive), "--format", "csv",
            "WITH k AS (SELECT kind FROM events) SELECT count(*) AS n FROM k")
    assert r.exit_code == 0 and r.stdout.splitlines() == ["n", "19"]
    r = cli("audit", "query", "--archive", str(archive), "--format", "csv",
            "SELECT count(*) AS n FROM events WHERE event_time >= TIMESTAMPTZ '2026-11-02 00:00:00+00';")
    assert r.exit_code == 0 and 0 < int(r.stdout.splitlines()[1]) < 19


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


def test_a_line_that_is_not_a_manifest_line_is_one_line_for_readers_and_a_finding_for_verify(
        archive: pathlib.Path) -> None:
    with (archive / MANIFEST).open("a") as f:
        f.write('{"file": "somewhere.parquet"}\n')
    r = cli_result("audit", "query", "--archive", str(archive), "SELECT count(*) FROM events")
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        f"error: {archive / MANIFEST} line 8: field 'sha256' is None; expected a string; run lineagewire audit "
        "verify"], r.output
    r = cli("audit", "verify", str(archive))
    assert r.exit_code == 1
    assert r.stdout.splitlines() == ["chain: _manifests/lineage.jobs+0.jsonl: line 8: field 'sha256' is None; "
                                     "expected a string"]
