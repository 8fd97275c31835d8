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


def test_kafkas_own_names_are_not_taken_for_the_emitters_old_ones(clean_env: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """``LINEAGEWIRE_BOOTSTRAP_SERVERS`` is the Kafka settings' variable (no section), not a deprecated name."""
    from lineagewire.producers.spark.config import resolve_config

    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    clean_env.setenv("LINEAGEWIRE_BOOTSTRAP_SERVERS", "kafka-host:9092")
    assert resolve_config().bootstrap_servers is None
    assert load_settings().bootstrap_servers == "kafka-host:9092"
    assert _warned(caplog) == []


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
