"""The archive on ``s3://`` through fsspec (s3fs), against a real S3-compatible server (s3proxy on 127.0.0.1).

Archive to ``s3://bucket/archive``, then ``audit verify`` (and a tampered object caught), ``audit query``
and replay from the archive, all reading the objects back from the server.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from lineagewire.cli import main_group
from lineagewire.consumers.audit.archive import ArchiveHandler
from lineagewire.consumers.audit.archive_read import read_archive
from lineagewire.consumers.audit.storage import Storage
from tests.consumers.openlineage.samples import app_run
from tests.s3proxy import LocalS3, S3ProxyUnavailable

from .test_verify_query import records

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'lineagewire[s3]')")
    saved = {k: os.environ.get(k) for k in LocalS3.client_env}
    os.environ.update(LocalS3.client_env)
    server = LocalS3()
    try:
        try:
            server.start()
        except S3ProxyUnavailable as exc:
            print(f"skipping the s3:// tests: {exc}")
            pytest.skip(f"no S3-compatible server here: {exc}")
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_archive_verify_query_and_replay_on_s3(s3: LocalS3) -> None:
    url = "s3://lineagewire/archive"
    storage = Storage(url, s3.storage_options)
    events = app_run("daily_orders") + app_run("daily_orders", fail=True) + app_run("other_job", actions=1)
    handler = ArchiveHandler(url, roll_records=4, storage_options=s3.storage_options)
    for rec in records(events):
        handler.handle(rec)
    handler.close()
    keys = sorted(storage.glob("topic=*/date=*/hour=*/*.parquet"))
    assert len(keys) == handler.files_written == -(-len(events) // 4)  # in the bucket, not on a local disk

    options = [f"--storage-option={k}={v}" for k, v in s3.storage_options.items()]
    r = CliRunner().invoke(main_group, ["audit", "verify", url, *options], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert re.search(rf"verify ok: {len(keys)} files, {len(events)} records", r.stderr)

    r = CliRunner().invoke(main_group, ["audit", "query", "--archive", url, "--format", "json", *options,
                                        "SELECT job_name, count(*) AS n FROM events GROUP BY job_name ORDER BY 1"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    counts = Counter(e["header"]["job_name"] for e in events)
    assert r.stdout.splitlines() == [f'{{"job_name":"{job}","n":{n}}}' for job, n in sorted(counts.items())]

    replayed = list(read_archive(storage, "lineage.jobs", start="beginning", end="end"))
    assert [x.event for x in replayed] == [x.event for x in records(events)]
    assert [x.value for x in replayed] == [x.value for x in records(events)]

    # One changed byte in one object on the server: verify reads the objects themselves and fails.
    data = bytearray(storage.get(keys[1]) or b"")
    data[len(data) // 2] ^= 0xFF
    storage.put(keys[1], bytes(data))
    r = CliRunner().invoke(main_group, ["audit", "verify", url, *options], catch_exceptions=False)
    assert r.exit_code == 1
    assert r.stdout.startswith(f"changed: {keys[1]}: SHA-256 is ")
