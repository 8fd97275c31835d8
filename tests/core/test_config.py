"""Settings precedence (flags > environment > config file > defaults) and secret handling."""

from __future__ import annotations

import pytest

from lineagewire.config import load_settings
from lineagewire.exceptions import ConfigError


@pytest.fixture(autouse=True)
def _clean_env(clean_env: pytest.MonkeyPatch) -> None:
    """No LINEAGEWIRE_* variable (new or old name) and no ./lineagewire.yaml but those a test sets."""


def test_defaults() -> None:
    s = load_settings()
    assert s.bootstrap_servers == "127.0.0.1:9092"
    assert s.topics.jobs == "lineage.jobs" and s.topics.refresh_commands == "lineage.refresh-commands"
    assert s.topics.dlq("lineage.jobs", "openlineage") == "lineage.jobs.dlq.openlineage"


def test_precedence_flag_over_env_over_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    cfg = tmp_path / "lw.yaml"
    cfg.write_text("kafka:\n  bootstrap_servers: file:1\n  topics:\n    jobs: file.jobs\n"
                   "    refresh_commands: file.cmds\n  client_id: from-file\n")
    s = load_settings(cfg)
    assert (s.bootstrap_servers, s.topics.jobs, s.client_id) == ("file:1", "file.jobs", "from-file")
    monkeypatch.setenv("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "env:2")
    monkeypatch.setenv("LINEAGEWIRE_KAFKA__TOPICS__JOBS", "env.jobs")
    s = load_settings(cfg)
    assert (s.bootstrap_servers, s.topics.jobs, s.topics.refresh_commands) == ("env:2", "env.jobs", "file.cmds")
    s = load_settings(cfg, bootstrap_servers="flag:3")
    assert s.bootstrap_servers == "flag:3" and s.client_id == "from-file"


def test_config_file_from_environment_and_cwd(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    (tmp_path / "lineagewire.yaml").write_text("kafka:\n  bootstrap_servers: cwd:1\n")
    assert load_settings().bootstrap_servers == "cwd:1"
    other = tmp_path / "other.yaml"
    other.write_text("kafka: {bootstrap_servers: envfile:1}\n")
    monkeypatch.setenv("LINEAGEWIRE_CONFIG", str(other))
    assert load_settings().bootstrap_servers == "envfile:1"
    monkeypatch.setenv("LINEAGEWIRE_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_settings()


def test_secrets_never_printed_but_reach_librdkafka(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGEWIRE_KAFKA__SECURITY__SASL_PASSWORD", "hunter2")
    s = load_settings(security={"security_protocol": "sasl_ssl", "sasl_mechanism": "PLAIN", "sasl_username": "u",
                                "extra": {"ssl.endpoint.identification.algorithm": "none"}})
    assert "hunter2" not in repr(s) and "hunter2" not in str(s.model_dump())
    conf = s.as_librdkafka_dict()
    assert conf["sasl.password"] == "hunter2" and conf["security.protocol"] == "SASL_SSL"
    assert conf["sasl.username"] == "u" and conf["ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [({"bootstrap_servers": "no-port"}, "bootstrap_servers"),
     ({"security": {"security_protocol": "TLS"}}, "security_protocol"),
     ({"security": {"sasl_pasword": "x"}}, "sasl_pasword")],
)
def test_bad_settings_name_the_field(overrides: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(**overrides)
    assert expected in str(err.value)


def test_missing_explicit_config_file(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.yaml")


@pytest.mark.parametrize(("text", "expected"), [
    ("bootstrap_servers: [a:1,\n", r"is not valid YAML at line 2, column 1: .*; expected a YAML mapping"),
    ("- a\n- b\n", r"holds a YAML list; expected a mapping of settings"),
    ("just words\n", r"holds a YAML str; expected a mapping of settings"),
])
def test_a_config_file_that_is_not_a_yaml_mapping_is_named(tmp_path, text: str, expected: str) -> None:  # noqa: ANN001
    cfg = tmp_path / "lw.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=expected) as e:
        load_settings(cfg)
    assert str(cfg) in str(e.value)


def test_an_empty_config_file_means_the_defaults(tmp_path) -> None:  # noqa: ANN001
    cfg = tmp_path / "lw.yaml"
    cfg.write_text("")
    assert load_settings(cfg).bootstrap_servers == "127.0.0.1:9092"


def test_the_demo_uses_a_broker_named_anywhere_and_starts_one_otherwise(tmp_path,  # noqa: ANN001
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from lineagewire.demo.command import names_a_broker

    assert not names_a_broker(load_settings())  # the default 127.0.0.1:9092 is not a choice: start a local one
    cfg = tmp_path / "lw.yaml"
    cfg.write_text("kafka: {bootstrap_servers: file:1}\n")
    assert names_a_broker(load_settings(cfg))
    cfg.write_text("kafka: {client_id: x}\n")
    assert not names_a_broker(load_settings(cfg))
    assert names_a_broker(load_settings(cfg, bootstrap_servers="flag:3"))
    monkeypatch.setenv("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "env:2")
    assert names_a_broker(load_settings(cfg))
