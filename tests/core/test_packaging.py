"""pyproject.toml lists every package, and the compose file is valid."""

from __future__ import annotations

import pathlib
import tomllib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAPPED = {"lineagewire": "lineagewire", "lineagewire.schemas": "schemas", "lineagewire.producers": "producers",
          "lineagewire.consumers": "consumers"}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    # "": the folder of the one top-level module, the activation hook (py-modules; setup.py adds its .pth)
    assert cfg["package-dir"] == {"": "producers/spark/_boot", **MAPPED}
    assert cfg["py-modules"] == ["lineagewire_activate"]
    assert (ROOT / "producers/spark/_boot/lineagewire_activate.py").is_file()
    found = set()
    for pkg, folder in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts:
                continue
            found.add(".".join([pkg, *rel.parts]))
    # lineagewire.* folders mapped elsewhere are found under their own folder, not twice
    listed = set(cfg["packages"])
    assert found == listed, f"missing from pyproject: {found - listed}, listed but absent: {listed - found}"


def test_docker_compose_is_valid_compose_yaml() -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    assert "kafka" in services
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        deps = svc.get("depends_on", {})
        for dep in deps if isinstance(deps, (list, dict)) else []:
            assert dep in services, f"{name} depends on unknown service {dep}"
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: publish ports on loopback only ({port})"
