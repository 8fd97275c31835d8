"""A sink given by a flag (``--gms-url``, ``--file``...) replaces the YAML's sink of that name whole.

Merged key by key, the YAML's ``token`` would go with the flag's ``gms_url`` to a server it was never meant for.
Only the environment's token (``LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN``, or its old name ``DATAHUB_GMS_TOKEN``)
goes with ``--gms-url``, as its help says.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from lineagewire.consumers.datahub.config import load_config

FILE_SINKS = {"rest": {"gms_url": "http://file-server:8080", "token": "file-token", "lanes": 7},
              "file": {"path": "from-file.json", "roll_bytes": 4096}}
FLAG = {"gms_url": "http://flag-server:8080"}


@pytest.fixture
def env(clean_env: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    clean_env.delenv("DATAHUB_GMS_TOKEN", raising=False)
    return clean_env


def _write(path: pathlib.Path, data: dict[str, object]) -> pathlib.Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("where", ["--config", "lineagewire.yaml"])
def test_the_files_token_does_not_go_to_the_flags_server(env: pytest.MonkeyPatch, tmp_path: pathlib.Path,
                                                         where: str) -> None:
    if where == "--config":
        path: pathlib.Path | None = _write(tmp_path / "dh.yaml", {"sinks": FILE_SINKS})
    else:  # the datahub: section of lineagewire's own file, found in the working folder
        _write(tmp_path / "lineagewire.yaml", {"datahub": {"sinks": FILE_SINKS}})
        path = None
    assert load_config(path).sinks.rest is not None  # the file's sinks are read when no flag names one
    cfg = load_config(path, rest=FLAG, file={"path": "from-flag.json"})
    assert cfg.sinks.rest is not None and cfg.sinks.file is not None
    assert (cfg.sinks.rest.gms_url, cfg.sinks.rest.token, cfg.sinks.rest.lanes) == ("http://flag-server:8080", None, 4)
    assert (cfg.sinks.file.path, cfg.sinks.file.roll_bytes) == (pathlib.Path("from-flag.json"), 64 << 20)
    # a sink no flag names is still the file's
    cfg = load_config(path, file={"path": "from-flag.json"})
    assert cfg.sinks.rest is not None and cfg.sinks.rest.token is not None
    assert (cfg.sinks.rest.gms_url, cfg.sinks.rest.token.get_secret_value()) == ("http://file-server:8080",
                                                                                  "file-token")


@pytest.mark.parametrize("variable", ["LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN", "DATAHUB_GMS_TOKEN"])
def test_the_environments_token_goes_with_the_flags_server(env: pytest.MonkeyPatch, tmp_path: pathlib.Path,
                                                           variable: str) -> None:
    path = _write(tmp_path / "dh.yaml", {"sinks": FILE_SINKS})
    env.setenv(variable, "env-token")
    cfg = load_config(path, rest=FLAG)
    assert cfg.sinks.rest is not None and cfg.sinks.rest.token is not None
    assert (cfg.sinks.rest.gms_url, cfg.sinks.rest.token.get_secret_value()) == ("http://flag-server:8080",
                                                                                  "env-token")
    cfg = load_config(path, rest={**FLAG, "token": "flag-token"})  # --token goes first
    assert cfg.sinks.rest is not None and cfg.sinks.rest.token is not None
    assert cfg.sinks.rest.token.get_secret_value() == "flag-token"
