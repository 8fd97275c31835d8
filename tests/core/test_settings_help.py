"""``--help`` names each variable as the one rule names it (issue 43, item 6).

Every ``LINEAGEWIRE_*`` name an option's help gives is a variable docs/settings.md lists (a table generated
from the settings models), and no option reads a variable behind the settings' back (click's ``envvar=``).
"""

from __future__ import annotations

import pathlib
import re

import click
from click.testing import CliRunner

from lineagewire.cli import main_group

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "settings.md"
VARIABLE = re.compile(r"LINEAGEWIRE_[A-Z0-9_]+")


def _commands(group: click.Group, name: str) -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = [(name, group)]
    ctx = click.Context(group, info_name=name)
    for sub in group.list_commands(ctx):
        cmd = group.get_command(ctx, sub)
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{name} {sub}")
        elif cmd is not None:
            out.append((f"{name} {sub}", cmd))
    return out


def test_every_variable_in_help_is_one_the_rule_names() -> None:
    documented = {m.group(1) for m in re.finditer(r"`(LINEAGEWIRE_[A-Z0-9_]+)`", DOC.read_text())}
    named: dict[str, set[str]] = {}
    for name, cmd in _commands(main_group, "lineagewire"):
        for param in cmd.params:
            assert not param.envvar, f"{name} {param.name}: reads {param.envvar} through click, not the settings"
            for variable in VARIABLE.findall(getattr(param, "help", None) or ""):
                named.setdefault(variable, set()).add(f"{name} {param.name}")
    unknown = {v: sorted(where) for v, where in named.items() if v not in documented}
    assert unknown == {}, "variables named in --help that docs/settings.md does not list"
    # the options of the issue: the group's Kafka flags, the consumer runtime's, the archive's
    assert {"LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "LINEAGEWIRE_CONSUMER__RETRY_MAX", "LINEAGEWIRE_AUDIT__ARCHIVE",
            "LINEAGEWIRE_REGISTRY__DB_URL", "LINEAGEWIRE_OPENLINEAGE__URL", "LINEAGEWIRE_UI__TOKEN"} <= set(named)


def test_the_help_text_a_user_reads_names_the_variable() -> None:
    result = CliRunner().invoke(main_group, ["consume", "archive", "--help"], prog_name="lineagewire")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "[LINEAGEWIRE_AUDIT__ARCHIVE, YAML audit.archive]" in text
    assert "[LINEAGEWIRE_CONSUMER__RETRY_MAX, YAML consumer.retry_max; default 30.0]" in text


def test_the_global_kafka_flags_name_the_kafka_sections_variables() -> None:
    """The group's Kafka flags name their variables by hand (lineagewire.cli may not import pydantic): as the
    Kafka settings' model names them, ``LINEAGEWIRE_KAFKA__<KEY>`` and ``kafka.<key>``, never the old names."""
    from lineagewire.config import Settings

    result = CliRunner().invoke(main_group, ["--help"], prog_name="lineagewire")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Kafka bootstrap servers [LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS, YAML kafka.bootstrap_servers; " \
           "default 127.0.0.1:9092]" in text
    prefix, section = Settings.model_config["env_prefix"], Settings.config_section
    flags = [p for p in main_group.params if p.name in Settings.model_fields and p.name != "config_file"]
    assert {p.name for p in flags} == {"bootstrap_servers", "schema_registry_url", "connect_timeout"}
    for param in flags:
        assert f"[{prefix}{str(param.name).upper()}, YAML {section}.{param.name}" in (getattr(param, "help", "") or "")
    assert "LINEAGEWIRE_BOOTSTRAP_SERVERS" not in text and "LINEAGEWIRE_SCHEMA_REGISTRY_URL" not in text
