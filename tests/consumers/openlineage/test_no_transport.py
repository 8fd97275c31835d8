"""With no OpenLineage transport configured the service refuses to start instead of printing to its own log
(issue 34); the console transport stays available when it is asked for."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

from lineagewire.consumers.openlineage.handler import OpenLineageHandler, load_openlineage_config
from lineagewire.exceptions import ConfigError
from lineagewire.kafka.local import free_port


def _clean_env(home: pathlib.Path) -> dict[str, str]:
    """No OpenLineage or lineagewire configuration from the environment, and a HOME without ~/.openlineage."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "LINEAGEWIRE_"))}
    return {**env, "HOME": str(home)}


@pytest.mark.parametrize("command", [["consume", "openlineage"], ["replay", "--into", "openlineage"]])
def test_no_transport_configured_refuses_to_start_naming_the_three_ways(tmp_path: pathlib.Path,
                                                                         command: list[str]) -> None:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "lineagewire", "--bootstrap-servers", f"127.0.0.1:{free_port()}",
                        *command], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env=_clean_env(tmp_path), stdin=subprocess.DEVNULL, check=False)
    assert time.monotonic() - t0 < 30
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert lines[0].startswith("error: no OpenLineage transport configured")
    assert all(way in lines[0] for way in ("--url", "OPENLINEAGE_URL", "--openlineage-config")), lines[0]


def test_the_console_is_still_there_when_asked_for(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="no OpenLineage transport configured"):
        OpenLineageHandler(config=load_openlineage_config()).open()

    cfg = tmp_path / "conf" / "openlineage.yml"  # not in the working directory, where the client would find it
    cfg.parent.mkdir()
    cfg.write_text("transport: {type: console}\n")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "console")
    for config in (load_openlineage_config(cfg), None):  # the file, then the environment variable
        handler = OpenLineageHandler(config=config)
        handler.open()
        try:
            assert handler.client.transport.kind == "console"
        finally:
            handler.close()
