"""The scheduler's settings: one precedence rule (flags, then LINEAGEWIRE_SCHEDULER__*, then YAML), clear errors."""

from __future__ import annotations

import pathlib

import pytest
from pydantic import ValidationError

from lineagewire.exceptions import ConfigError
from lineagewire.producers.scheduler import SchedulerOptions
from lineagewire.producers.scheduler.settings import ServiceConfig


@pytest.fixture
def config_file(tmp_path: pathlib.Path) -> pathlib.Path:
    f = tmp_path / "lineagewire.yaml"
    f.write_text("bootstrap_servers: 127.0.0.1:9999\n"
                 "scheduler:\n  db_url: sqlite:///from-yaml.db\n  port: 1111\n  misfire_grace: 7\n  lead: 1\n")
    return f


def test_flags_then_environment_then_yaml_then_defaults(config_file: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGEWIRE_SCHEDULER__PORT", "2222")
    monkeypatch.setenv("LINEAGEWIRE_SCHEDULER__MISFIRE_GRACE", "8")
    c = ServiceConfig.load(config_file, misfire_grace=9, host=None)
    assert c.db_url == "sqlite:///from-yaml.db"  # YAML only
    assert c.port == 2222  # environment over YAML
    assert c.misfire_grace == 9  # flag over environment
    assert c.lead == 1 and c.max_attempts == 3  # YAML, default
    opts = c.options()
    assert isinstance(opts, SchedulerOptions) and opts.misfire_grace == 9 and opts.lead == 1


def test_the_config_file_comes_from_lineagewire_config(config_file: pathlib.Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGEWIRE_CONFIG", str(config_file))
    assert ServiceConfig.load().port == 1111
    monkeypatch.delenv("LINEAGEWIRE_CONFIG")
    monkeypatch.chdir(config_file.parent)  # ./lineagewire.yaml
    assert ServiceConfig.load().port == 1111


def test_token_from_either_environment_name_and_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGEWIRE_SCHEDULER_TOKEN", "old-name-secret")
    c = ServiceConfig.load()
    assert c.token is not None and c.token.get_secret_value() == "old-name-secret"
    monkeypatch.setenv("LINEAGEWIRE_SCHEDULER__TOKEN", "new-name-secret")
    c = ServiceConfig.load()
    assert c.token is not None and c.token.get_secret_value() == "new-name-secret"
    assert "new-name-secret" not in repr(c) and "new-name-secret" not in str(c.model_dump())


def test_bad_values_name_the_setting(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGEWIRE_SCHEDULER__PORT", "not-a-port")
    with pytest.raises(ConfigError, match=r"port: .*not-a-port"):
        ServiceConfig.load()
    monkeypatch.delenv("LINEAGEWIRE_SCHEDULER__PORT")
    with pytest.raises(ConfigError, match=r"db_url: .*'notaurl://x' is not a database URL.*expected e\.g\. sqlite"):
        ServiceConfig.load(db_url="notaurl://x")
    with pytest.raises(ConfigError, match=r"republish_after=15.0; expected more than lead=20"):
        ServiceConfig.load(lead=20, republish_after=15)
    bad = tmp_path / "bad.yaml"
    bad.write_text("scheduler:\n  prot: 1\n")
    with pytest.raises(ConfigError, match="prot"):
        ServiceConfig.load(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("scheduler: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml"):
        ServiceConfig.load(broken)
    with pytest.raises(ConfigError, match="does not exist"):
        ServiceConfig.load(tmp_path / "missing.yaml")


def test_scheduler_options_are_validated() -> None:
    with pytest.raises(ValidationError, match="max_attempts"):
        SchedulerOptions(max_attempts=0)
    with pytest.raises(ValidationError, match="misfire_grace"):
        SchedulerOptions(misfire_grace=1e20)
    assert SchedulerOptions(retry_backoff=30, retry_backoff_max=900).backoff(10_000) == 900
