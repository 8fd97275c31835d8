"""docker-compose.yml: the OpenLineage consumer and Marquez are valid compose services (no Docker needed)."""

from __future__ import annotations

import re

import click

from lineagewire.cli import main_group
from lineagewire.consumers.cli import consume
from tests.deploy.images import composed


def _compose() -> dict:
    return composed()  # as docker compose reads it: ${VAR} resolved


def test_compose_structure_is_valid() -> None:
    doc = _compose()
    services = doc["services"]
    named_volumes = set(doc.get("volumes") or {})
    for name, svc in services.items():
        assert re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name), name
        assert "image" in svc or "build" in svc, f"{name}: needs an image or a build"
        deps = svc.get("depends_on") or {}
        assert isinstance(deps, list | dict), f"{name}: depends_on must be a list or a mapping"
        for dep in deps:
            assert dep in services, f"{name} depends on unknown service {dep}"
            if isinstance(deps, dict):
                assert deps[dep]["condition"] in {"service_started", "service_healthy",
                                                  "service_completed_successfully"}
                if deps[dep]["condition"] == "service_healthy":
                    assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy; it has no check"
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: publish ports on loopback only ({port})"
        for vol in svc.get("volumes", []):
            source = str(vol).split(":")[0]
            if not source.startswith((".", "/")):
                assert source in named_volumes, f"{name}: volume {source} is not declared"
        env = svc.get("environment", {})
        assert isinstance(env, dict | list), name


def test_openlineage_consumer_points_at_marquez_and_kafka() -> None:
    services = _compose()["services"]
    for name in ("marquez-db", "marquez-api", "marquez-web", "openlineage-consumer"):
        assert name in services
    svc = services["openlineage-consumer"]
    env = svc["environment"]
    host = env["OPENLINEAGE_URL"].split("//")[1].split(":")[0]
    assert host in services
    assert env["LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS"].split(":")[0] in services
    assert services["marquez-api"]["environment"]["POSTGRES_HOST"] in services
    assert services["marquez-web"]["environment"]["MARQUEZ_HOST"] in services


def test_openlineage_consumer_command_parses() -> None:
    cmd = _compose()["services"]["openlineage-consumer"]["command"]
    assert cmd[0] == "lineagewire"
    global_opts, rest = cmd[1:cmd.index("consume")], cmd[cmd.index("consume") + 1:]
    main_group.make_context("lineagewire", [*global_opts, "consume"])  # the global flags parse
    assert rest[0] == "openlineage"
    command = consume.get_command(click.Context(consume), "openlineage")
    assert command is not None
    params = command.make_context("openlineage", rest[1:]).params
    assert params["metrics_port"] == 9464
