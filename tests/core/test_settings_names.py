"""Every variable follows ``LINEAGEWIRE_<SECTION>__<KEY>`` (issue 32, item 3).

The old names still work, each with a warning naming its new name; the new name wins when both are set; a
read command finds its data through the variable its service reads. The CLI cases run ``lineagewire`` as a
user does, in a process of its own, and read what it prints.
"""

from __future__ import annotations

import logging
import os
import pathlib
import subprocess
import sys

import pytest

from lineagewire.config import load_settings

#: what the warning of an old name says (lineagewire.config.renamed)
OLD = "{old} is deprecated; use {new}"
IGNORED = "{old} is deprecated and ignored: {new} is set"


def _warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lineagewire.config" and r.levelno == logging.WARNING]


def test_the_emitters_flat_names_work_warn_and_lose_to_their_section_names(
        clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from lineagewire.producers.spark.config import resolve_config

    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    clean_env.setenv("LINEAGEWIRE_NAMESPACE", "old-ns")
    clean_env.setenv("LINEAGEWIRE_QUEUE_SIZE", "17")
    cfg = resolve_config()
    assert (cfg.namespace, cfg.queue_size) == ("old-ns", 17)
    assert _warned(caplog) == [OLD.format(old="LINEAGEWIRE_NAMESPACE", new="LINEAGEWIRE_EMITTER__NAMESPACE"),
                               OLD.format(old="LINEAGEWIRE_QUEUE_SIZE", new="LINEAGEWIRE_EMITTER__QUEUE_SIZE")]
    caplog.clear()
    clean_env.setenv("LINEAGEWIRE_EMITTER__NAMESPACE", "new-ns")
    cfg = resolve_config()
    assert (cfg.namespace, cfg.queue_size) == ("new-ns", 17)
    assert IGNORED.format(old="LINEAGEWIRE_NAMESPACE", new="LINEAGEWIRE_EMITTER__NAMESPACE") in _warned(caplog)[0]
    # Spark conf keys keep their names, above every variable
    assert resolve_config(spark_conf={"spark.lineagewire.namespace": "conf-ns"}).namespace == "conf-ns"
    caplog.clear()
    clean_env.delenv("LINEAGEWIRE_NAMESPACE")
    clean_env.delenv("LINEAGEWIRE_QUEUE_SIZE")
    assert resolve_config().namespace == "new-ns" and _warned(caplog) == []


def test_the_kafka_settings_old_names_work_warn_and_lose_to_their_section_names(
        clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The Kafka settings' variables had no section (``LINEAGEWIRE_BOOTSTRAP_SERVERS``); now ``kafka`` like every
    other part. The old names, nested ones and whole mappings too, are still read, with a warning."""
    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    old = {"LINEAGEWIRE_BOOTSTRAP_SERVERS": "old-host:9092", "LINEAGEWIRE_SECURITY__SASL_PASSWORD": "old-secret",
           "LINEAGEWIRE_SECURITY": "{sasl_username: old-user}", "LINEAGEWIRE_SECURITY__EXTRA": "{a.b: c}",
           "LINEAGEWIRE_TOPICS__JOBS": "old.jobs", "LINEAGEWIRE_CONNECT_TIMEOUT": "3",
           "LINEAGEWIRE_SCHEMA_REGISTRY_URL": "http://old-registry:8081"}
    for name, value in old.items():
        clean_env.setenv(name, value)
    s = load_settings()
    assert (s.bootstrap_servers, s.topics.jobs, s.connect_timeout, s.schema_registry_url) == (
        "old-host:9092", "old.jobs", 3.0, "http://old-registry:8081")
    assert s.as_librdkafka_dict() == {"bootstrap.servers": "old-host:9092", "client.id": "lineagewire",
                                      "sasl.username": "old-user", "sasl.password": "old-secret", "a.b": "c"}
    assert sorted(_warned(caplog)) == sorted(OLD.format(old=name, new="LINEAGEWIRE_KAFKA__" + name[12:])
                                             for name in old)
    assert "old-secret" not in " ".join(_warned(caplog))
    caplog.clear()
    clean_env.setenv("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "new-host:9092")
    clean_env.setenv("LINEAGEWIRE_KAFKA__SECURITY__SASL_PASSWORD", "new-secret")
    s = load_settings()
    assert s.bootstrap_servers == "new-host:9092" and s.topics.jobs == "old.jobs"
    assert s.as_librdkafka_dict()["sasl.password"] == "new-secret"
    for name in ("LINEAGEWIRE_BOOTSTRAP_SERVERS", "LINEAGEWIRE_SECURITY__SASL_PASSWORD"):
        assert IGNORED.format(old=name, new="LINEAGEWIRE_KAFKA__" + name[12:]) in " ".join(_warned(caplog))


def test_the_old_kafka_names_are_not_taken_for_the_emitters_old_ones(clean_env: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """``LINEAGEWIRE_BOOTSTRAP_SERVERS`` was the Kafka settings' variable, which the emitter falls back to, never
    the emitter's own: it is an old name of ``LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS``, not of
    ``LINEAGEWIRE_EMITTER__BOOTSTRAP_SERVERS``."""
    from lineagewire.producers.spark.config import resolve_config

    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    clean_env.setenv("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "kafka-host:9092")
    assert resolve_config().bootstrap_servers is None
    assert load_settings().bootstrap_servers == "kafka-host:9092"
    assert _warned(caplog) == []
    clean_env.delenv("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS")
    clean_env.setenv("LINEAGEWIRE_BOOTSTRAP_SERVERS", "old-host:9092")
    assert resolve_config().bootstrap_servers is None
    assert _warned(caplog) == []  # the emitter's settings do not read it
    assert load_settings().bootstrap_servers == "old-host:9092"
    assert _warned(caplog) == [OLD.format(old="LINEAGEWIRE_BOOTSTRAP_SERVERS",
                                          new="LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS")]


#: a config file of before the ``kafka:`` section: Kafka at the top, beside the other parts' sections
TOP_LEVEL = """\
bootstrap_servers: top-host:9092
client_id: top-client
security: {sasl_username: top-user, sasl_mechanism: PLAIN}
topics: {jobs: top.jobs}
emitter: {bootstrap_servers: emitter-host:9092, namespace: ns}
scheduler: {url: "http://127.0.0.1:8765", db_url: "sqlite:///s.db"}
datahub: {env: PROD}
alerting: {database: "sqlite:///a.db"}
audit: {archive: /tmp/archive}
"""


def test_kafka_keys_at_the_top_of_the_file_work_with_one_warning_naming_the_section(
        clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: pathlib.Path) -> None:
    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    path = tmp_path / "lineagewire.yaml"
    path.write_text(TOP_LEVEL)
    s = load_settings()
    assert (s.bootstrap_servers, s.client_id, s.topics.jobs) == ("top-host:9092", "top-client", "top.jobs")
    assert s.security.as_librdkafka_dict() == {"sasl.username": "top-user", "sasl.mechanism": "PLAIN"}
    warned = _warned(caplog)
    assert len(warned) == 1, warned
    assert "Kafka settings at the top level are deprecated; move them under 'kafka:'" in warned[0]
    assert ("bootstrap_servers -> kafka.bootstrap_servers, client_id -> kafka.client_id, security -> "
            "kafka.security, topics -> kafka.topics)") in warned[0]
    for section in ("emitter", "scheduler", "datahub", "alerting", "audit"):  # the other parts' sections
        assert section not in warned[0]
    from lineagewire.producers.spark.config import resolve_config

    assert resolve_config().bootstrap_servers == "emitter-host:9092"  # the emitter's section is its own


def test_the_kafka_section_wins_over_the_top_level_key_by_key(
        clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: pathlib.Path) -> None:
    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    path = tmp_path / "lineagewire.yaml"
    path.write_text(TOP_LEVEL + "kafka:\n  bootstrap_servers: section-host:9092\n"
                    "  security: {sasl_password: section-secret}\n")
    s = load_settings()
    assert (s.bootstrap_servers, s.client_id) == ("section-host:9092", "top-client")
    assert s.security.as_librdkafka_dict() == {"sasl.username": "top-user", "sasl.mechanism": "PLAIN",
                                               "sasl.password": "section-secret"}
    assert len(_warned(caplog)) == 1
    caplog.clear()
    path.write_text("kafka:\n  bootstrap_servers: section-host:9092\n" + TOP_LEVEL.split("\n", 4)[4])
    assert load_settings().bootstrap_servers == "section-host:9092" and _warned(caplog) == []
    clean_env.setenv("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "env-host:9092")  # the variable above both
    path.write_text(TOP_LEVEL + "kafka:\n  bootstrap_servers: section-host:9092\n")
    assert load_settings().bootstrap_servers == "env-host:9092"


def test_the_scheduler_token_under_its_old_name(clean_env: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from lineagewire.producers.scheduler.settings import ServiceConfig

    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    clean_env.setenv("LINEAGEWIRE_SCHEDULER_TOKEN", "old-name-secret")
    token = ServiceConfig.load().token
    assert token is not None and token.get_secret_value() == "old-name-secret"
    assert _warned(caplog) == [OLD.format(old="LINEAGEWIRE_SCHEDULER_TOKEN", new="LINEAGEWIRE_SCHEDULER__TOKEN")]
    clean_env.setenv("LINEAGEWIRE_SCHEDULER__TOKEN", "new-name-secret")
    token = ServiceConfig.load().token
    assert token is not None and token.get_secret_value() == "new-name-secret"
    assert "old-name-secret" not in " ".join(_warned(caplog))


def test_the_datahub_token_under_its_old_name_goes_with_gms_url(clean_env: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """``DATAHUB_GMS_TOKEN`` was ``--token``'s variable; its new name is the rest sink's own, which ``--gms-url``
    (replacing the rest sink whole) keeps."""
    from lineagewire.consumers.datahub.config import load_config

    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    flag = {"gms_url": "http://127.0.0.1:8080"}
    assert load_config(None, rest=flag).sinks.rest.token is None
    clean_env.setenv("DATAHUB_GMS_TOKEN", "old-token")
    token = load_config(None, rest=flag).sinks.rest.token
    assert token is not None and token.get_secret_value() == "old-token"
    assert _warned(caplog) == [OLD.format(old="DATAHUB_GMS_TOKEN", new="LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN")]
    clean_env.setenv("LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN", "new-token")
    token = load_config(None, rest=flag).sinks.rest.token
    assert token is not None and token.get_secret_value() == "new-token"
    assert load_config(None, rest={**flag, "token": "flag-token"}).sinks.rest.token.get_secret_value() == "flag-token"


def test_activation_reads_the_new_name_and_the_old_one() -> None:
    """Activation by configuration (stdlib only, at every Python start) reads ``LINEAGEWIRE_EMITTER__ENABLED``,
    else the old ``LINEAGEWIRE_ENABLED``; the Spark conf key goes first."""
    from lineagewire_activate import enabled

    assert enabled(None, env={}) is False
    assert enabled(None, env={"LINEAGEWIRE_EMITTER__ENABLED": "true"}) is True
    assert enabled(None, env={"LINEAGEWIRE_ENABLED": "true"}) is True
    assert enabled(None, env={"LINEAGEWIRE_EMITTER__ENABLED": "false", "LINEAGEWIRE_ENABLED": "true"}) is False
    assert enabled("false", env={"LINEAGEWIRE_EMITTER__ENABLED": "true"}) is False
    with pytest.raises(ValueError, match=r"LINEAGEWIRE_EMITTER__ENABLED='maybe' is not a boolean"):
        enabled(None, env={"LINEAGEWIRE_EMITTER__ENABLED": "maybe"})


def test_instrument_hands_the_job_the_new_names() -> None:
    from lineagewire.producers.spark.instrument import child_environment

    env = child_environment({}, namespace="ns", job_name="job")
    assert (env["LINEAGEWIRE_EMITTER__NAMESPACE"], env["LINEAGEWIRE_EMITTER__JOB_NAME"]) == ("ns", "job")
    assert "LINEAGEWIRE_NAMESPACE" not in env


# -- as a user runs the commands -------------------------------------------------------------------------------------

def cli(tmp_path: pathlib.Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGEWIRE_") or k == "LINEAGEWIRE_HOME"}
    return subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={**env, **variables})


@pytest.mark.slow  # each call starts a Python process
def test_alerts_read_the_database_the_alerting_service_reads(tmp_path: pathlib.Path) -> None:
    """``consume alerting`` reads LINEAGEWIRE_ALERTING__DATABASE (test_settings_layers); ``alerts`` does too."""
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    silence = ("alerts", "silence", "--match", "job=x", "--for", "1h", "--comment")
    assert cli(tmp_path, *silence, "in-a", LINEAGEWIRE_ALERTING__DATABASE=a).returncode == 0
    assert cli(tmp_path, *silence, "in-b", "--author", "ops", LINEAGEWIRE_ALERTING__DATABASE=b).returncode == 0
    listed = cli(tmp_path, "alerts", "silences", LINEAGEWIRE_ALERTING__DATABASE=a)
    assert listed.returncode == 0 and "in-a" in listed.stdout and "in-b" not in listed.stdout
    assert "deprecated" not in listed.stderr
    old = cli(tmp_path, "alerts", "silences", LINEAGEWIRE_ALERTS_DB=a)  # the UI's old name for it
    assert old.returncode == 0 and "in-a" in old.stdout, old.stderr
    assert OLD.format(old="LINEAGEWIRE_ALERTS_DB", new="LINEAGEWIRE_ALERTING__DATABASE") in old.stderr
    both = cli(tmp_path, "alerts", "silences", LINEAGEWIRE_ALERTS_DB=a, LINEAGEWIRE_ALERTING__DATABASE=b)
    assert both.returncode == 0 and "in-b" in both.stdout and "in-a" not in both.stdout
    assert not (tmp_path / "lineagewire-alerting.db").exists()  # the default was never used


@pytest.mark.slow
def test_audit_reads_the_archive_variable_under_either_name(tmp_path: pathlib.Path) -> None:
    new, old = tmp_path / "new-archive", tmp_path / "old-archive"
    new.mkdir(), old.mkdir()
    by_new = cli(tmp_path, "audit", "verify", LINEAGEWIRE_AUDIT__ARCHIVE=str(new))
    assert by_new.returncode == 2 and "no archive at" in by_new.stderr and "new-archive" in by_new.stderr
    by_old = cli(tmp_path, "audit", "verify", LINEAGEWIRE_ARCHIVE=str(old))
    assert by_old.returncode == 2 and "old-archive" in by_old.stderr
    assert OLD.format(old="LINEAGEWIRE_ARCHIVE", new="LINEAGEWIRE_AUDIT__ARCHIVE") in by_old.stderr
    both = cli(tmp_path, "audit", "verify", LINEAGEWIRE_ARCHIVE=str(old), LINEAGEWIRE_AUDIT__ARCHIVE=str(new))
    assert both.returncode == 2 and "no archive at" in both.stderr and "new-archive" in both.stderr
    assert IGNORED.format(old="LINEAGEWIRE_ARCHIVE", new="LINEAGEWIRE_AUDIT__ARCHIVE") in both.stderr
    neither = cli(tmp_path, "audit", "verify")
    assert neither.returncode == 2 and "Missing argument 'DIR_OR_URL'" in neither.stderr


@pytest.mark.slow
def test_db_commands_read_each_stores_own_variable(tmp_path: pathlib.Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    up = cli(tmp_path, "db", "upgrade", "--store", "registry", LINEAGEWIRE_REGISTRY__DB_URL=url)
    assert up.returncode == 0 and (tmp_path / "registry.db").exists(), up.stderr
    old = cli(tmp_path, "db", "current", "--store", "registry", LINEAGEWIRE_DB_URL=url)
    assert old.returncode == 0 and "up to date" in old.stdout, old.stderr
    assert OLD.format(old="LINEAGEWIRE_DB_URL", new="LINEAGEWIRE_REGISTRY__DB_URL") in old.stderr
    other = cli(tmp_path, "db", "current", "--store", "scheduler", LINEAGEWIRE_REGISTRY__DB_URL=url)
    assert other.returncode == 2 and "expected --db-url or LINEAGEWIRE_SCHEDULER__DB_URL" in other.stderr


@pytest.mark.slow
def test_scheduler_validate_checks_the_tables_file_the_service_reads(tmp_path: pathlib.Path) -> None:
    tables = pathlib.Path(__file__).resolve().parents[2] / "producers" / "scheduler" / "example_tables.yaml"
    checked = cli(tmp_path, "scheduler", "validate", LINEAGEWIRE_SCHEDULER__TABLES=str(tables))
    assert checked.returncode == 0 and ": cron=" in checked.stdout, checked.stderr
    (tmp_path / "lineagewire.yaml").write_text(f"scheduler:\n  tables: {tables}\n")
    assert cli(tmp_path, "scheduler", "validate").stdout == checked.stdout
    (tmp_path / "lineagewire.yaml").unlink()
    none = cli(tmp_path, "scheduler", "validate")
    assert none.returncode == 2 and "expected TABLES_FILE, LINEAGEWIRE_SCHEDULER__TABLES" in none.stderr


@pytest.mark.slow
def test_a_command_reads_the_kafka_cluster_under_either_name(tmp_path: pathlib.Path) -> None:
    """As a user runs it: ``topics list`` tries the cluster the variable names (nobody listens on port 1, so it
    says which it tried), the old name with a warning, the new one winning when both are set."""
    quick = {"LINEAGEWIRE_KAFKA__CONNECT_TIMEOUT": "0.5"}
    new = cli(tmp_path, "topics", "list", LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS="127.0.0.1:1", **quick)
    assert new.returncode == 2 and "no broker answered at 127.0.0.1:1 " in new.stderr, new.stderr
    assert "deprecated" not in new.stderr
    old = cli(tmp_path, "topics", "list", LINEAGEWIRE_BOOTSTRAP_SERVERS="127.0.0.2:1", **quick)
    assert old.returncode == 2 and "no broker answered at 127.0.0.2:1 " in old.stderr, old.stderr
    assert OLD.format(old="LINEAGEWIRE_BOOTSTRAP_SERVERS", new="LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS") in old.stderr
    both = cli(tmp_path, "topics", "list", LINEAGEWIRE_BOOTSTRAP_SERVERS="127.0.0.2:1",
               LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS="127.0.0.1:1", **quick)
    assert both.returncode == 2 and "no broker answered at 127.0.0.1:1 " in both.stderr, both.stderr
    (tmp_path / "lineagewire.yaml").write_text("bootstrap_servers: 127.0.0.3:1\n")
    top = cli(tmp_path, "topics", "list", **quick)
    assert top.returncode == 2 and "no broker answered at 127.0.0.3:1 " in top.stderr, top.stderr
    assert "move them under 'kafka:' (bootstrap_servers -> kafka.bootstrap_servers)" in top.stderr
