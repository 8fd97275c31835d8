"""The archive's rows without a broker: columns built from records as the runtime hands them to the archive."""

from __future__ import annotations

from lineagewire.consumers.audit.archive import ArchiveHandler, records_to_table
from lineagewire.consumers.audit.layout import ARCHIVE_SCHEMA
from lineagewire.consumers.runtime import Record
from lineagewire.exceptions import DecodeError
from lineagewire.schemas import Codec
from tests.consumers.openlineage.samples import app_run, refresh_run

CODEC = Codec()
DECODE = ArchiveHandler.decoder(CODEC)


def record(offset: int, value: bytes, headers: list[tuple[str, bytes | None]] | None = None) -> Record:
    """The record the runtime hands to the archive: decoded as ``ArchiveHandler.decode_fields`` says, or not."""
    try:
        event, error = DECODE(value), None
    except DecodeError as exc:
        event, error = None, f"{exc.reason}: {exc}"
    return Record("t", 0, offset, "k", 1_700_000_000_000 + offset, event, value=value, headers=headers or [],
                  timestamp_type=1, key_bytes=b"k", decode_error=error)


def test_decoded_and_undecodable_records_in_one_batch_keep_their_rows() -> None:
    events = refresh_run()  # a command, then a run: every kind
    values = [CODEC.encode(e) for e in events]
    values.insert(2, b"garbage")
    recs = [record(i, v, [("h", b"1"), ("h", None)] if i == 1 else None) for i, v in enumerate(values)]
    rows = records_to_table(recs).to_pylist()
    assert [r["value"] for r in rows] == values and [r["offset"] for r in rows] == list(range(len(values)))
    assert rows[1]["headers"] == [{"key": "h", "value": b"1"}, {"key": "h", "value": None}]
    assert rows[2]["kind"] is None and rows[2]["inputs"] is None and rows[2]["decode_error"].startswith("bad-magic")
    decoded = [r for r in rows if r["decode_error"] is None]
    assert [r["kind"] for r in decoded] == [e["header"]["schema_name"].rsplit(".", 1)[1] for e in events]
    assert [r["event_id"] for r in decoded] == [e["header"]["event_id"] for e in events]
    assert [r["event_time"] for r in decoded] == [e["header"]["event_time"] for e in events]
    created, running, action, finished = decoded[1:]
    run = events[1:]
    def names(datasets: list[dict]) -> list[dict]:
        return [{"namespace": d["namespace"], "name": d["name"]} for d in datasets]

    assert created["status"] == "CREATED" and created["inputs"] == names(run[0]["lineage"]["sources"])
    assert created["outputs"] == names(run[0]["lineage"]["sinks"]) != created["inputs"]
    assert (running["status"], running["old_status"], running["inputs"]) == ("RUNNING", "CREATED", [])
    assert action["status"] == run[2]["action_status"] and action["parent_run_id"] == run[2]["header"][
        "parent_run"]["run_id"]
    assert action["outputs"] == names(run[2]["outputs"]) != action["inputs"] == names(run[2]["inputs"])
    assert finished["status"] == "FINISHED" and decoded[0]["status"] is None  # a command has no status


def test_a_damaged_tail_after_the_columns_is_archived_with_its_columns() -> None:
    action = next(e for e in app_run("j") if e["header"]["schema_name"].endswith("ActionLineageEvent"))
    damaged = CODEC.encode(action)[:-30]  # its column lineage cut: a full decode fails
    [row] = records_to_table([record(0, damaged)]).to_pylist()
    assert row["value"] == damaged and row["decode_error"] is None
    assert row["job_name"] == "j" and row["outputs"][0]["name"] == action["outputs"][0]["name"]


def test_an_empty_table_has_the_archive_schema() -> None:
    assert records_to_table([]).schema == ARCHIVE_SCHEMA and records_to_table([]).num_rows == 0


def test_a_manifest_write_that_fails_is_retried_and_nothing_unlisted_is_ever_durable(tmp_path) -> None:  # noqa: ANN001
    from lineagewire.consumers.audit.manifest import load_manifests, verify
    from lineagewire.consumers.audit.storage import Storage

    class ManifestFailsTwice(Storage):
        fails = 2

        def put(self, rel: str, data: bytes) -> None:
            if rel.startswith("_manifests/") and b"+00000000000000000002" in data and self.fails:
                self.fails -= 1  # the second file's line: on the writer thread, then on the first retry
                raise OSError("disk full")
            super().put(rel, data)

    def retried(call) -> None:  # noqa: ANN001 - what the runtime's retry loop does with an OSError
        for _ in range(5):
            try:
                return call()
            except OSError:
                continue
        raise AssertionError("still failing after 5 tries")

    def listed_through() -> int:
        manifests = load_manifests(Storage(str(tmp_path)))
        return manifests[0].last_offset if manifests else -1

    storage = ManifestFailsTwice(str(tmp_path))
    handler = ArchiveHandler(storage, roll_records=2)
    values = [CODEC.encode(e) for e in app_run("j", actions=4)]  # 7 events: files of 2, 2, 2 and 1
    for i, v in enumerate(values):
        retried(lambda i=i, v=v: handler.handle(record(i, v)))
        retried(handler.batch_done)
        # the runtime commits up to durable_offsets: never past a record whose file is not listed
        assert handler.durable_offsets()[("t", 0)] <= listed_through() + 1
    retried(handler.close)
    assert storage.fails == 0
    [manifest] = load_manifests(Storage(str(tmp_path)))
    assert [(e["first_offset"], e["last_offset"]) for e in manifest.entries] == [(0, 1), (2, 3), (4, 5), (6, 6)]
    assert verify(Storage(str(tmp_path))).ok and handler.durable_offsets()[("t", 0)] == 7


def test_a_manifest_taken_back_then_appended_dumps_its_entries_only() -> None:
    from lineagewire.consumers.audit.manifest import Manifest, _parse

    m = Manifest("t", 0)
    entry = {"sha256": "a" * 64, "first_offset": 0, "last_offset": 1, "records": 2, "size": 10,
             "min_timestamp_ms": 0, "max_timestamp_ms": 1}
    m.append(file="f0", **entry)
    m.dumps()
    m.drop_last()
    m.append(file="f1", **entry)
    m.append(file="f2", **dict(entry, first_offset=2, last_offset=3))
    assert _parse(m.dumps(), "m") == m.entries and [e["file"] for e in m.entries] == ["f1", "f2"]


def test_only_the_few_valued_columns_are_dictionary_encoded(tmp_path) -> None:  # noqa: ANN001
    import pyarrow.parquet as pq

    from lineagewire.consumers.audit.layout import DICTIONARY_COLUMNS

    handler = ArchiveHandler(str(tmp_path))
    for i, e in enumerate(app_run("j", actions=2)):
        handler.handle(record(i, CODEC.encode(e)))
    handler.close()
    [path] = tmp_path.rglob("*.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    assert set(DICTIONARY_COLUMNS) <= set(columns)  # each name is a column of the file (a typo is ignored)
    dictionary = {c for c, encodings in columns.items() if "RLE_DICTIONARY" in encodings}
    assert dictionary == set(DICTIONARY_COLUMNS)
