"""Variables under a section's prefix: a misspelt one is refused like a misspelt YAML key, a bad value is named by
its own variable (nested keys too), and an empty list variable means an empty list."""

from __future__ import annotations

import pytest

from lineagewire.config import ConfigError
from lineagewire.consumers.alerting.config import AlertingConfig
from lineagewire.consumers.datahub.config import DataHubConfig
from lineagewire.producers.spark.config import EmitterConfig


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> pytest.MonkeyPatch:  # noqa: ANN001
    for name in [n for n in __import__("os").environ if n.startswith("LINEAGEWIRE_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no lineagewire.yaml here
    return monkeypatch


def test_a_misspelt_variable_of_a_strict_section_is_refused_naming_it(env: pytest.MonkeyPatch) -> None:
    env.setenv("LINEAGEWIRE_DATAHUB__PLATFROM_INSTANCE", "x")
    with pytest.raises(ConfigError, match=r"LINEAGEWIRE_DATAHUB__PLATFROM_INSTANCE.*expected LINEAGEWIRE_DATAHUB__"):
        DataHubConfig.load()
    env.delenv("LINEAGEWIRE_DATAHUB__PLATFROM_INSTANCE")
    env.setenv("LINEAGEWIRE_ALERTING__ROUET__GROUP_BY", "[job]")
    with pytest.raises(ConfigError, match=r"LINEAGEWIRE_ALERTING__ROUET__GROUP_BY"):
        AlertingConfig.load(document={})


def test_known_variables_still_load(env: pytest.MonkeyPatch) -> None:
    env.setenv("LINEAGEWIRE_ALERTING__ROUTE__GROUP_BY", "[job]")
    assert AlertingConfig.load(document={}).route.group_by == ["job"]


def test_a_nested_variable_that_is_no_yaml_is_named_whole(env: pytest.MonkeyPatch) -> None:
    env.setenv("LINEAGEWIRE_ALERTING__ROUTE__GROUP_BY", "[job")
    with pytest.raises(ConfigError, match=r"^LINEAGEWIRE_ALERTING__ROUTE__GROUP_BY: not a YAML value"):
        AlertingConfig.load(document={})


def test_an_empty_list_variable_is_an_empty_list_not_unset(env: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "lineagewire.yaml").write_text("emitter:\n  listeners: [file]\n")
    env.setenv("LINEAGEWIRE_EMITTER__LISTENERS", "")
    assert EmitterConfig.load().listeners == []
    env.setenv("LINEAGEWIRE_EMITTER__REDACT_PATTERNS", "token: (?P<secret>\\S+)")  # no YAML mapping: a regex
    assert EmitterConfig.load().redact_patterns == ["token: (?P<secret>\\S+)"]
