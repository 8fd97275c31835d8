"""One settings rule for every service: flags, then ``LINEAGEWIRE_*`` environment, then YAML, then defaults.

For each service, a value in its YAML file is overridden by the environment variable the settings
table (docs/settings.md) names, a flag overrides both, and an error names the variable it came from.
test_settings_doc.py checks that the table is the models'; test_settings_names.py the renamed variables.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from lineagewire.config import load_settings
from lineagewire.exceptions import ConfigError


def _yaml(path: pathlib.Path, doc: dict) -> pathlib.Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kafka_settings(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _yaml(tmp_path / "lw.yaml", {"kafka": {"bootstrap_servers": "yaml:9092", "topics": {"jobs": "from.yaml"}}})
    assert load_settings(f).topics.jobs == "from.yaml"
    monkeypatch.setenv("LINEAGEWIRE_KAFKA__TOPICS__JOBS", "from.env")
    monkeypatch.setenv("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "env:9092")
    s = load_settings(f)
    assert (s.topics.jobs, s.bootstrap_servers) == ("from.env", "env:9092")
    assert load_settings(f, bootstrap_servers="flag:9092").bootstrap_servers == "flag:9092"


def test_emitter(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lineagewire.producers.spark.config import resolve_config

    f = _yaml(tmp_path / "lw.yaml", {"emitter": {"namespace": "from-yaml", "queue_size": 111}})
    monkeypatch.setenv("LINEAGEWIRE_CONFIG", str(f))
    assert resolve_config().namespace == "from-yaml"
    monkeypatch.setenv("LINEAGEWIRE_EMITTER__NAMESPACE", "from-env")
    cfg = resolve_config()
    assert (cfg.namespace, cfg.queue_size) == ("from-env", 111)
    assert resolve_config(spark_conf={"spark.lineagewire.namespace": "from-conf"}).namespace == "from-conf"


def test_scheduler(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lineagewire.producers.scheduler.settings import ServiceConfig

    f = _yaml(tmp_path / "lw.yaml", {"scheduler": {"db_url": "sqlite:///yaml.db", "port": 9001}})
    assert ServiceConfig.load(f).db_url == "sqlite:///yaml.db"
    monkeypatch.setenv("LINEAGEWIRE_SCHEDULER__DB_URL", "sqlite:///env.db")
    cfg = ServiceConfig.load(f)
    assert (cfg.db_url, cfg.port) == ("sqlite:///env.db", 9001)
    assert ServiceConfig.load(f, db_url="sqlite:///flag.db").db_url == "sqlite:///flag.db"


def test_the_scheduler_section_holds_the_service_and_its_client(tmp_path: pathlib.Path) -> None:
    """``scheduler serve`` (ServiceConfig, which refuses unknown keys) and ``workflows`` / ``ui``
    (SchedulerClientSettings) read one section: the service leaves the client's ``url`` to it."""
    from lineagewire.producers.scheduler.cli import SchedulerClientSettings
    from lineagewire.producers.scheduler.settings import ServiceConfig

    f = _yaml(tmp_path / "lw.yaml", {"scheduler": {"url": "http://scheduler:8765", "token": "t" * 16, "port": 9001}})
    cfg, client = ServiceConfig.load(f), SchedulerClientSettings.load(f)
    assert cfg.port == 9001 and cfg.token is not None and cfg.token.get_secret_value() == "t" * 16
    assert (client.url, client.token) == ("http://scheduler:8765", "t" * 16)
    own = {k for k, field in ServiceConfig.model_fields.items() if not field.exclude}
    assert set(SchedulerClientSettings.model_fields) <= own | ServiceConfig.shared_section_keys
    _yaml(f, {"scheduler": {"url": "http://scheduler:8765", "prot": 9001}})
    with pytest.raises(ConfigError, match=r"section 'scheduler': unknown scheduler setting\(s\) prot; expected"):
        ServiceConfig.load(f)  # a typo is still refused


def test_datahub(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lineagewire.consumers.datahub.config import load_config

    f = _yaml(tmp_path / "dh.yaml", {"env": "PROD", "cluster": "yaml-cluster",
                                     "sinks": {"rest": {"gms_url": "http://yaml:8080"}}})
    assert load_config(f).env == "PROD"
    monkeypatch.setenv("LINEAGEWIRE_DATAHUB__ENV", "DEV")
    monkeypatch.setenv("LINEAGEWIRE_DATAHUB__SINKS__REST__GMS_URL", "http://env:8080")
    monkeypatch.setenv("LINEAGEWIRE_DATAHUB__SKIP_UNCHANGED", "5")
    cfg = load_config(f)
    assert (cfg.env, cfg.cluster, cfg.skip_unchanged) == ("DEV", "yaml-cluster", 5)
    assert str(cfg.sinks.rest.gms_url).startswith("http://env:8080")
    assert load_config(f, env="QA").env == "QA"
    monkeypatch.setenv("LINEAGEWIRE_DATAHUB__ENV", "NOPE")
    with pytest.raises(ConfigError, match=r"env \(from environment LINEAGEWIRE_DATAHUB__ENV\)"):
        load_config(f)


def test_alerting(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lineagewire.consumers.alerting.config import load_config
    from lineagewire.consumers.alerting.exceptions import RulesError

    f = _yaml(tmp_path / "rules.yaml", {
        "database": "sqlite:///yaml.db", "route": {"group_wait": "30s"},
        "channels": {"hook": {"type": "webhook", "url": "http://127.0.0.1:9/hook"}},
        "rules": [{"name": "failed", "kind": "run_failed", "channels": ["hook"]}]})
    assert load_config(f).database == "sqlite:///yaml.db"
    monkeypatch.setenv("LINEAGEWIRE_ALERTING__DATABASE", "sqlite:///env.db")
    monkeypatch.setenv("LINEAGEWIRE_ALERTING__ROUTE__GROUP_WAIT", "5")
    cfg = load_config(f)
    assert (cfg.database, cfg.route.group_wait) == ("sqlite:///env.db", 5)
    monkeypatch.setenv("LINEAGEWIRE_ALERTING__ROUTE__GROUP_WAIT", "[1, 2]")
    where = r"route.group_wait \(from environment LINEAGEWIRE_ALERTING__ROUTE__GROUP_WAIT\)"
    with pytest.raises(RulesError, match=where):
        load_config(f)
