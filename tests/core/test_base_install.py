"""The read commands need only the base install (issue 43, item 6).

A driver node has ``pip install lineagewire[spark]``: no ``consumers`` extra, so no prometheus_client.
``subscribe`` and ``replay`` run there against the real broker, in a process where importing
prometheus_client fails as it does without the package (a ``sitecustomize`` on PYTHONPATH puts a finder
first on ``sys.meta_path`` that refuses it), and a service still says which extra it needs.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from lineagewire.kafka.publisher import Publisher
from tests.helpers import status_event

pytestmark = pytest.mark.integration

BLOCKER = '''
import sys

class _NoPrometheus:
    """As if prometheus_client were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "prometheus_client" or name.startswith("prometheus_client."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoPrometheus())
'''


def _without_prometheus(tmp_path: pathlib.Path, settings, *args: str) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    boot = tmp_path / "boot"
    boot.mkdir(exist_ok=True)
    (boot / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS": settings.bootstrap_servers,
           "PYTHONPATH": os.pathsep.join([str(boot), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True, timeout=90,
                          env=env, cwd=tmp_path, check=False)


def test_the_blocker_blocks(tmp_path: pathlib.Path, kafka_settings) -> None:  # noqa: ANN001
    """Without this, the other tests would pass with prometheus_client importable: a service cannot start."""
    done = _without_prometheus(tmp_path, kafka_settings, "consume", "archive", "--to", str(tmp_path / "a"))
    assert done.returncode != 0
    assert "needs the Python package 'prometheus_client'" in done.stderr, done.stderr


def test_subscribe_and_replay_run_without_prometheus_client(tmp_path: pathlib.Path, settings, topic) -> None:  # noqa: ANN001
    events = [status_event(job=f"job-{i % 2}", seq=i) for i in range(6)]
    with Publisher(settings) as pub:
        for e in events:
            pub.publish(e)

    sub = _without_prometheus(tmp_path, settings, "subscribe", "--topic", topic, "--from-beginning",
                              "--exit-at-end")
    assert sub.returncode == 0, sub.stderr
    assert "prometheus" not in sub.stderr
    lines = [json.loads(line) for line in sub.stdout.splitlines()]
    assert len(lines) == len(events) and {line["key"] for line in lines} == {"test/job-0", "test/job-1"}, sub.stdout

    rep = _without_prometheus(tmp_path, settings, "replay", "--topic", topic, "--no-progress")
    assert rep.returncode == 0, rep.stderr
    assert len(rep.stdout.splitlines()) == len(events), rep.stdout
    assert f"replayed {len(events)} events from {topic}" in rep.stderr
