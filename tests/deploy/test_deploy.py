"""docker-compose.yml and the Dockerfile, checked without Docker (issue 25).

* The compose file validates against the Compose Specification's JSON schema (shipped by check-jsonschema).
* Every service built from our Dockerfile runs its exact ``command`` in a virtualenv installed as its Dockerfile
  stage installs the image (the stage's ``pip install`` line, by uv, without cargo): for the services that
  consume or serve, a dry run (``dry_run.py``) that parses its options, loads its configuration, builds its
  handler and imports its extras, and stops where it would start serving; for the others (``topics``, the
  refresh runner), ``--help``. A missing extra fails here.
* Ports on 127.0.0.1, secrets only from the environment (``${VAR:?}``), a health check on the port the command
  serves /healthz on, a restart policy, one consumer group per service.
* ``docker compose config`` where a Docker engine answers.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml

from tests.deploy.images import (
    COMPOSE,
    DOCKERFILE,
    ROOT,
    MissingVariable,
    built_here,
    compose_file,
    dockerfile_stages,
    required_variables,
    stage_venv,
)
from tests.postgres import LocalPostgres, find_bin_dir

RAW = yaml.safe_load(COMPOSE.read_text())
ENV = required_variables()
REQUIRED = sorted(ENV)
COMPOSED = compose_file(ENV)
SERVICES: dict[str, dict[str, Any]] = COMPOSED["services"]
OURS = {name: built_here(svc) for name, svc in SERVICES.items() if built_here(svc)}
STAGES = dockerfile_stages(DOCKERFILE.read_text())
#: what issue 25 asks to be deployable: every `consume` service, the scheduler, the refresh runner and the UI
EXPECTED = {"openlineage-consumer", "datahub-consumer", "alerting", "alertmanager", "archive", "archive-s3", "minio",
            "registry", "ui", "scheduler", "refresh-runner", "topics"}
SECRET_KEY = re.compile(r"PASSWORD|SECRET|TOKEN|ACCESS_KEY")


def _serves(svc: dict[str, Any]) -> bool:
    """A long-running service, not a one-off job."""
    return svc.get("restart") in ("always", "unless-stopped")


def _option(command: list[str], *names: str) -> str | None:
    for i, word in enumerate(command[:-1]):
        if word in names:
            return command[i + 1]
    return None


def test_the_compose_file_is_valid_under_the_compose_specification() -> None:
    run = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
                          str(COMPOSE)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_schema_check_refuses_a_key_compose_does_not_know(tmp_path: pathlib.Path) -> None:
    """The check above can fail: a misspelt key is refused by the same schema."""
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text().replace("    healthcheck:", "    healthchek:", 1))
    run = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
                          str(broken)], capture_output=True, text=True, check=False)
    assert run.returncode == 1 and "healthchek" in run.stdout, run.stdout


def test_every_service_of_the_issue_is_there_and_built_from_our_dockerfile() -> None:
    assert EXPECTED <= set(SERVICES), EXPECTED - set(SERVICES)
    assert set(OURS.values()) <= set(STAGES), (OURS, list(STAGES))
    assert OURS["refresh-runner"] == "spark" and OURS["datahub-consumer"] == "service"
    consume = {_option(svc["command"], "consume") for svc in SERVICES.values() if "consume" in svc.get("command", [])}
    assert consume >= {"openlineage", "datahub", "alerting", "archive", "registry"}, consume


def test_ports_are_published_on_loopback_only() -> None:
    for name, svc in SERVICES.items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port} is published beyond 127.0.0.1"


def test_secrets_come_from_the_environment_and_are_required() -> None:
    for name, svc in RAW["services"].items():
        env = svc.get("environment") or {}
        assert isinstance(env, dict), f"{name}: environment as a mapping"
        for key, value in env.items():
            if SECRET_KEY.search(key):
                assert re.fullmatch(r"\$\{\w+:\?[^}]+\}", str(value)), f"{name}: {key}={value!r}; expected ${{VAR:?}}"
        for word in svc.get("command") or []:
            assert not re.search(r"://[^/@\s]+:[^/@\s]+@", str(word)), f"{name}: a password in a URL of its command"
    assert "LINEAGEWIRE_DB_PASSWORD" in REQUIRED
    with pytest.raises(MissingVariable, match="LINEAGEWIRE_DB_PASSWORD"):
        compose_file({k: v for k, v in ENV.items() if k != "LINEAGEWIRE_DB_PASSWORD"})


def test_the_example_env_file_names_every_required_variable() -> None:
    example = (ROOT / "deploy" / "example.env").read_text()
    named = set(re.findall(r"^#?\s*(\w+)=", example, re.MULTILINE))
    assert set(REQUIRED) <= named, set(REQUIRED) - named


def test_every_service_on_kafka_gets_the_cluster_under_the_kafka_sections_variable() -> None:
    """``LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS``: the kafka service unless .env names another cluster, under that name
    or under its name of before the kafka section (an existing .env), the new one winning."""
    variable = "LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS"

    def clusters(**env: str) -> dict[str, str]:
        services = compose_file({**ENV, **env})["services"]
        return {name: services[name]["environment"].get(variable) for name in OURS if name != "ui"}

    assert set(clusters().values()) == {"kafka:29092"}
    assert set(clusters(LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS="new:9093").values()) == {"new:9093"}
    assert set(clusters(LINEAGEWIRE_BOOTSTRAP_SERVERS="old:9093").values()) == {"old:9093"}
    both = clusters(LINEAGEWIRE_BOOTSTRAP_SERVERS="old:9093", LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS="new:9093")
    assert set(both.values()) == {"new:9093"}
    for name in OURS:  # the old name never reaches a service, where it would be read with a warning
        assert "LINEAGEWIRE_BOOTSTRAP_SERVERS" not in (SERVICES[name].get("environment") or {}), name


def test_the_kafka_env_example_sets_the_kafka_settings_under_their_names(clean_env: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """deploy/kafka.env.example, as every service reads it: the security settings, and no deprecated name."""
    import logging

    from lineagewire.config import load_settings

    caplog.set_level(logging.WARNING, logger="lineagewire.config")
    example = (ROOT / "deploy" / "kafka.env.example").read_text()
    for name, value in re.findall(r"^(\w+)=(.*)$", example, re.MULTILINE):
        clean_env.setenv(name, value)
    conf = load_settings().as_librdkafka_dict()
    assert (conf["security.protocol"], conf["sasl.mechanism"], conf["sasl.username"]) == (
        "SASL_SSL", "SCRAM-SHA-512", "lineagewire")
    assert conf["ssl.ca.location"] == "/etc/lineagewire/kafka-ca.pem"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("name", sorted(n for n in OURS if _serves(SERVICES[n])))
def test_each_service_has_a_health_check_on_the_port_it_serves_and_a_restart_policy(name: str) -> None:
    svc = SERVICES[name]
    command = svc["command"]
    metrics = _option(command, "--metrics-port")
    port = metrics or _option(command, "--port")
    assert port, f"{name}: serves no /healthz (--metrics-port) nor a port"
    test = " ".join(svc["healthcheck"]["test"])
    # the UI has no /healthz: any route of its own port stands for it
    url = f"http://127.0.0.1:{port}/healthz" if metrics else f"http://127.0.0.1:{port}/"
    assert url in test, f"{name}: health check {test!r} is not on {url}"
    assert svc["restart"] == "unless-stopped"


def test_each_consuming_service_has_a_consumer_group_of_its_own() -> None:
    groups: dict[str, str] = {}
    for name, svc in SERVICES.items():
        command = svc.get("command") or []
        group = _option(command, "--group", "--group-id")
        if "consume" in command or "refresh-runner" in command:
            assert group, f"{name}: no --group"
        group = group or (svc.get("environment") or {}).get("LINEAGEWIRE_SCHEDULER__STATUS_GROUP")
        if group:
            assert group not in groups, f"{name} and {groups[group]} share the consumer group {group}"
            groups[group] = name
    assert len(groups) >= 8, groups


def test_the_dockerfile_stages_install_what_the_parser_reads() -> None:
    """The parser the next test depends on, on the real Dockerfile and on today's one-line form."""
    assert STAGES["service"].pip == [
        [".[consumers,openlineage,datahub,alerting,audit,s3,registry,postgres,scheduler,ingest]"]]
    assert STAGES["service"].workdir == "/app" and STAGES["service"].python == "3.11"
    assert STAGES["spark"].pip == [[".[consumers,spark]", "pyspark>=4.0,<5"]]
    old = dockerfile_stages('FROM python:3.11-slim\nWORKDIR /app\nCOPY . /app\n'
                            'RUN pip install --no-cache-dir ".[consumers,openlineage,scheduler]"\n')
    assert [s.pip for s in old.values()] == [[[".[consumers,openlineage,scheduler]"]]]


@pytest.fixture(scope="module")
def venvs() -> dict[str, pathlib.Path]:
    return {stage: stage_venv(STAGES[stage]) for stage in sorted(set(OURS.values()))}


@pytest.fixture(scope="module")
def compose_db() -> Any:
    """The db service as its image sets it up (POSTGRES_USER a superuser owning POSTGRES_DB, then
    deploy/postgres-init.sql run by that user), on a local PostgreSQL; None where there is none."""
    bin_dir = find_bin_dir()
    if bin_dir is None or "db" not in SERVICES:
        yield None
        return
    import psycopg

    db = SERVICES["db"]["environment"]
    user, password, database = db["POSTGRES_USER"], db["POSTGRES_PASSWORD"], db["POSTGRES_DB"]
    with LocalPostgres(bin_dir) as pg:
        with psycopg.connect(f"host=127.0.0.1 port={pg.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute(f"CREATE ROLE {user} LOGIN SUPERUSER PASSWORD '{password}'")
            c.execute(f"CREATE DATABASE {database} OWNER {user}")
        init = [v.split(":")[0] for v in SERVICES["db"]["volumes"] if "docker-entrypoint-initdb.d" in v]
        with psycopg.connect(f"host=127.0.0.1 port={pg.port} user={user} dbname={database}", autocommit=True) as c:
            for script in init:
                c.execute((ROOT / script).read_text())
        yield f"127.0.0.1:{pg.port}"


def _mounts(svc: dict[str, Any], workdir: str, tmp: pathlib.Path) -> dict[str, pathlib.Path]:
    """Container path -> where it is in this test: the source copied to the WORKDIR is the worktree, a bind
    mount is its source, a named volume an empty folder."""
    mounts = {workdir: ROOT}
    for volume in svc.get("volumes", []):
        source, target = str(volume).split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target] = (ROOT / source).resolve()
        else:
            mounts[target] = tmp / source
            mounts[target].mkdir(exist_ok=True)
    return mounts


def _mapped(word: str, mounts: dict[str, pathlib.Path]) -> str:
    for target in sorted(mounts, key=len, reverse=True):
        word = re.sub(rf"(?<![\w.-]){re.escape(target)}(?=/|$)", lambda _m, t=target: str(mounts[t]), word)
    return word


def _hosted(word: str, hosts: dict[str, str]) -> str:
    for service, address in hosts.items():
        word = word.replace(service, address)
    return word


def _run(venv: pathlib.Path, argv: list[str], env: dict[str, str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(cwd), **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow  # the fixture installs each image's virtualenv (about a minute)
@pytest.mark.parametrize("name", sorted(OURS))
def test_each_command_runs_in_a_virtualenv_installed_as_its_image(name: str, venvs: dict[str, pathlib.Path],
                                                                  compose_db: str | None,
                                                                  tmp_path: pathlib.Path) -> None:
    svc, stage = SERVICES[name], STAGES[OURS[name]]
    venv = venvs[stage.name]
    mounts = _mounts(svc, stage.workdir, tmp_path)
    # the db service is the local PostgreSQL (the other services' hosts are not reached before serving)
    hosts = {"@db:5432/": f"@{compose_db}/"} if compose_db else {}
    command = [_hosted(_mapped(str(w), mounts), hosts) for w in svc["command"]]
    env = {k: _hosted(_mapped(str(v), mounts), hosts) for k, v in (svc.get("environment") or {}).items()}
    needs_db = "@db:5432/" in repr(svc)
    assert command[0] == "lineagewire", f"{name}: {command}"
    # A dry run parses the same options as --help does and goes on; --help alone where there is none.
    dry_runnable = "consume" in command or {"scheduler", "serve"} <= set(command) or command[1:2] == ["ui"] \
        or command[1:3] == ["ingest", "openlineage"]
    if not dry_runnable or (needs_db and compose_db is None):
        helped = _run(venv, [str(venv / "bin" / command[0]), *command[1:], "--help"], env, tmp_path)
        assert helped.returncode == 0 and "Usage:" in helped.stdout, f"{name}: {' '.join(command)} --help\n" \
            f"{helped.stdout}{helped.stderr}"
    if "refresh-runner" in command:
        # Starting it needs a SparkSession (a JVM): what it imports once it has one is imported instead.
        imported = _run(venv, [str(venv / "bin" / "python"), "-c",
                               "import lineagewire.producers.refresh_runner.runner"], env, tmp_path)
        assert imported.returncode == 0, f"{name}: {imported.stderr[-3000:]}"
    if not dry_runnable:
        return
    if needs_db and compose_db is None:
        pytest.skip(f"{name} opens its PostgreSQL database before it serves; no PostgreSQL here (make system-deps)")
    dry = _run(venv, [str(venv / "bin" / "python"), str(pathlib.Path(__file__).with_name("dry_run.py")), *command],
               env, tmp_path)
    assert dry.returncode == 0 and "dry-run reached" in dry.stdout, \
        f"{name}: {' '.join(svc['command'])}\n{dry.stdout}{dry.stderr[-4000:]}"


def test_the_mounted_alertmanager_config_is_valid_for_alertmanager() -> None:
    """deploy/alertmanager.yml, mounted into the alertmanager service, checked by Alertmanager's own amtool
    (Debian's prometheus-alertmanager, make system-deps)."""
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("no amtool here (make system-deps installs prometheus-alertmanager)")
    config = next(v.split(":")[0] for v in SERVICES["alertmanager"]["volumes"] if v.endswith("alertmanager.yml:ro"))
    run = subprocess.run([amtool, "check-config", str(ROOT / config)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def _docker_compose() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    answers = subprocess.run([docker, "info"], capture_output=True, timeout=20, check=False).returncode == 0
    has_compose = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=20,
                                 check=False).returncode == 0
    return [docker, "compose"] if answers and has_compose else None


def test_docker_compose_config_accepts_the_file_where_a_docker_engine_answers() -> None:
    compose = _docker_compose()
    if compose is None:
        pytest.skip("no Docker engine with the compose plugin answers here; the schema check above stands in")
    run = subprocess.run([*compose, "--profile", "*", "-f", str(COMPOSE), "config", "--quiet"], cwd=ROOT,
                         env={**os.environ, **ENV}, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
