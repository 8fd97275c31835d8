"""docker-compose.yml: DataHub's quickstart services and the datahub consumer (no Docker needed)."""

from __future__ import annotations

from lineagewire.cli import main_group
from lineagewire.consumers.datahub.cli import datahub
from tests.deploy.images import composed


def _services() -> dict:
    return composed()["services"]  # as docker compose reads it: ${VAR} resolved


def test_datahub_services_are_there_and_publish_on_loopback_only() -> None:
    services = _services()
    for name in ("datahub-mysql", "datahub-elasticsearch", "datahub-schema-registry", "datahub-upgrade", "datahub-gms",
                 "datahub-frontend", "datahub-consumer"):
        assert name in services, name
        for port in services[name].get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
        for dep in services[name].get("depends_on") or {}:
            assert dep in services, (name, dep)
    gms = services["datahub-gms"]["environment"]
    for key in ("EBEAN_DATASOURCE_HOST", "ELASTICSEARCH_HOST", "KAFKA_BOOTSTRAP_SERVER", "KAFKA_SCHEMAREGISTRY_URL"):
        host = gms[key].split("//")[-1].split(":")[0]
        assert host in services, (key, gms[key])


def test_datahub_consumer_command_parses_and_points_at_gms() -> None:
    services = _services()
    cmd = services["datahub-consumer"]["command"]
    assert cmd[0] == "lineagewire"
    global_opts, rest = cmd[1:cmd.index("consume")], cmd[cmd.index("consume") + 1:]
    main_group.make_context("lineagewire", [*global_opts, "consume"])
    assert rest[0] == "datahub"
    params = datahub.make_context("datahub", rest[1:]).params
    assert params["metrics_port"] == 9465
    assert params["gms_url"].split("//")[1].split(":")[0] in services
    env = services["datahub-consumer"]["environment"]
    assert env["LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS"].split(":")[0] in services
