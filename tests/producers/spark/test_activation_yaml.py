"""``emitter: {enabled: true}`` in lineagewire.yaml turns the emitter on (issue 43, item 1), as docs/settings.md
says: activation reads the key through the emitter's own settings, below the Spark conf and the environment.

A real driver (``spark-submit``) with no ``spark.lineagewire.*`` conf and no ``LINEAGEWIRE_*`` variable, in a
folder whose ``lineagewire.yaml`` has the emitter's section; the run's events arrive on the topic. With
``enabled: false`` there, the same job publishes nothing.
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest
import yaml

from lineagewire.config import Settings
from tests.producers.spark.test_activation import JOB, _check_run, _env, _events, _spark_bin

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def _submit(settings: Settings, tmp_path: pathlib.Path, enabled: bool) -> subprocess.CompletedProcess[str]:
    script, out = tmp_path / "job.py", tmp_path / "out"
    script.write_text(JOB)
    emitter = {"enabled": enabled, "bootstrap_servers": settings.bootstrap_servers, "topic": settings.topics.jobs,
               "namespace": "activation", "outbox_dir": str(tmp_path / "outbox"), "time_budget_ms": 10000}
    (tmp_path / "lineagewire.yaml").write_text(yaml.safe_dump({"emitter": emitter}))
    proc = subprocess.run([_spark_bin("spark-submit"), "--master", "local[1]", "--name", "from-yaml",
                           "--conf", "spark.ui.enabled=false", str(script), str(out)],
                          env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job: done" in proc.stdout and "lineagewire:" not in proc.stdout + proc.stderr, proc.stdout[-3000:]
    return proc


def test_emitter_enabled_in_the_yaml_file_alone_publishes_the_run(settings, tmp_path) -> None:  # noqa: ANN001
    _submit(settings, tmp_path, enabled=True)
    _check_run(_events(settings), "from-yaml", tmp_path / "out")


def test_emitter_enabled_false_in_the_yaml_file_publishes_nothing(settings, tmp_path) -> None:  # noqa: ANN001
    _submit(settings, tmp_path, enabled=False)
    assert _events(settings) == []
