"""`lineagewire instrument -- python job.py`: an unchanged script publishes its run."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.reader import TopicReader
from lineagewire.schemas import Codec

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "daily_orders.py"


def _read_all(settings: Settings, topic: str) -> list[dict]:
    codec = Codec()
    with TopicReader(settings, topic, start="beginning", end="end") as reader:
        events = [codec.decode(m.value()) for m in reader]
    return sorted(events, key=lambda e: e["header"]["sequence"])


def _instrument(settings: Settings, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_")}
    env["PYSPARK_PYTHON"] = sys.executable
    return subprocess.run([sys.executable, "-m", "lineagewire", "--bootstrap-servers", settings.bootstrap_servers,
                           "instrument", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.slow
def test_unchanged_script_publishes_its_run_status_and_lineage(settings, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "out"
    proc = _instrument(settings, "--topic", settings.topics.jobs, "--namespace", "examples",
                       "--set", f"outbox_dir={tmp_path / 'outbox'}",
                       # a generous budget: the machine is shared, and this test checks lineage, not speed
                       "--set", "time_budget_ms=10000",
                       "--", sys.executable, str(EXAMPLE), str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "daily_orders: wrote" in proc.stdout

    events = _read_all(settings, settings.topics.jobs)
    assert {e["header"]["run_id"] for e in events} == {events[0]["header"]["run_id"]}, "one application run"
    assert {(e["header"]["job_namespace"], e["header"]["job_name"]) for e in events} == {("examples", "daily_orders")}
    assert [e["header"]["sequence"] for e in events] == list(range(len(events)))
    kinds = [e["header"]["schema_name"].rsplit(".", 1)[1] for e in events]
    assert kinds[0] == "JobCreatedEvent" and events[0]["spec"]["application_name"] == "daily_orders"
    statuses = [(e["old_status"], e["new_status"]) for e, k in zip(events, kinds, strict=True)
                if k == "JobStatusChangedEvent"]
    assert statuses == [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    actions = [e for e, k in zip(events, kinds, strict=True) if k == "ActionLineageEvent"]
    assert len(actions) >= 5
    outputs = {d["name"] for a in actions for d in a["outputs"]}
    assert str(out / "marts" / "daily_revenue") in outputs
    assert all(a["action_status"] == "SUCCEEDED" for a in actions)


def test_instrument_rejects_an_unknown_listener_before_running_anything(tmp_path) -> None:  # noqa: ANN001
    marker = tmp_path / "ran"
    proc = _instrument(Settings(), "--listeners", "kafka,nope", "--", sys.executable, "-c",
                       f"open({str(marker)!r}, 'w')", timeout=60)
    assert proc.returncode == 2
    assert "'nope'" in proc.stderr and "kafka" in proc.stderr and "file" in proc.stderr
    assert not marker.exists()


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.slow
def test_unchanged_script_dying_in_a_udf_ends_its_run_failed(settings, tmp_path) -> None:  # noqa: ANN001
    proc = _instrument(settings, "--topic", settings.topics.jobs, "--set", f"outbox_dir={tmp_path / 'outbox'}",
                       "--", sys.executable, str(EXAMPLE), str(tmp_path / "out"), "fail")
    assert proc.returncode == 1 and "bad amount" in proc.stderr

    events = _read_all(settings, settings.topics.jobs)
    final = events[-1]
    assert (final["old_status"], final["new_status"], final["lifecycle_state"]) == ("RUNNING", "FAILED", "FAILED")
    assert "PythonException" in final["error"]["error_class"] and "bad amount" in final["error"]["message"]
    failed = [e for e in events if e["header"]["schema_name"].endswith("ActionLineageEvent")
              and e["action_status"] == "FAILED"]
    assert len(failed) == 1 and "bad amount" in failed[0]["error"]["message"]
