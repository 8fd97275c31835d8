"""What ``emitter.enabled`` in the YAML config file costs a driver's ``getOrCreate`` (issue 43 review).

Activation runs in every driver whose folder has a lineagewire.yaml or whose environment sets
``LINEAGEWIRE_CONFIG``: a file that leaves the emitter off must not cost it pydantic and the emitter's whole
settings at every ``getOrCreate``. PyYAML reads the one key, once per version of the file; the emitter's settings
are built only when the key may turn the emitter on. No Spark is needed: ``enabled`` is what the wrapped
``getOrCreate`` asks (with the session's conf value, None here).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import yaml
from lineagewire_activate import enabled

import lineagewire.producers.spark.config as emitter_config


@pytest.fixture
def full_reads(clean_env: pytest.MonkeyPatch) -> list[int]:
    """One entry per build of the emitter's settings (``resolve_config``) that activation asks for."""
    calls: list[int] = []
    real = emitter_config.resolve_config

    def counted(**kwargs: Any) -> emitter_config.EmitterConfig:
        calls.append(1)
        return real(**kwargs)

    clean_env.setattr(emitter_config, "resolve_config", counted)
    return calls


@pytest.mark.parametrize("text", ["emitter: {enabled: false}\n", "emitter: {namespace: ns}\n",
                                  "kafka: {bootstrap_servers: 'h:9092'}\n", ""])
def test_a_file_that_leaves_the_emitter_off_builds_no_settings(full_reads: list[int], tmp_path: pathlib.Path,
                                                               clean_env: pytest.MonkeyPatch, text: str) -> None:
    (tmp_path / "lineagewire.yaml").write_text(text)
    assert enabled(None) is False
    other = tmp_path / "elsewhere.yaml"
    other.write_text(text)
    clean_env.setenv("LINEAGEWIRE_CONFIG", str(other))
    assert enabled(None) is False
    assert full_reads == []


def test_a_file_that_turns_it_on_is_read_through_the_emitters_settings(full_reads: list[int],
                                                                      tmp_path: pathlib.Path) -> None:
    (tmp_path / "lineagewire.yaml").write_text("emitter: {enabled: true}\n")
    assert enabled(None) is True
    assert full_reads == [1]
    (tmp_path / "lineagewire.yaml").write_text("emitter: {enabled: true, queue_size: -5}\n")
    with pytest.raises(ValueError, match=r"emitter.enabled of the config file cannot be read: .*queue_size"):
        enabled(None)  # the whole section is validated, as the emitter will read it


def test_the_file_is_parsed_once_per_version(full_reads: list[int], tmp_path: pathlib.Path,
                                             clean_env: pytest.MonkeyPatch) -> None:
    parses: list[int] = []
    real = yaml.safe_load
    clean_env.setattr(yaml, "safe_load", lambda stream: parses.append(1) or real(stream))
    f = tmp_path / "lineagewire.yaml"
    f.write_text("emitter: {enabled: false}\n")
    assert [enabled(None) for _ in range(3)] == [False] * 3
    assert len(parses) == 1
    f.write_text("emitter: {enabled: true }\n")  # of the same size: the time tells the versions apart
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))  # a new version, even on a coarse clock
    assert enabled(None) is True  # the cached answer (off) would say False
    assert full_reads == [1]


def _imports_after_enabled(folder: pathlib.Path) -> dict[str, bool]:
    probe = ("import sys, lineagewire_activate as a; answer = a.enabled(None); "
             "print(answer, 'pydantic' in sys.modules, 'lineagewire.producers.spark.config' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_") or k == "LINEAGEWIRE_HOME"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=folder, env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    return dict(zip(["enabled", "pydantic", "emitter settings"], [word == "True" for word in out], strict=True))


def test_a_driver_whose_file_leaves_it_off_never_imports_pydantic(tmp_path: pathlib.Path) -> None:
    (tmp_path / "lineagewire.yaml").write_text("emitter: {enabled: false}\n")
    assert _imports_after_enabled(tmp_path) == {"enabled": False, "pydantic": False, "emitter settings": False}
    (tmp_path / "lineagewire.yaml").write_text("emitter: {enabled: true}\n")
    assert _imports_after_enabled(tmp_path) == {"enabled": True, "pydantic": True, "emitter settings": True}
