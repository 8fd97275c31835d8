"""``consume archive`` takes its topics by the one rule: ``--topic``, then ``LINEAGEWIRE_CONSUMER__TOPICS``, then
the YAML's ``consumer.topics``; only without any of them its own default (the jobs and refresh-command topics)."""

from __future__ import annotations

import pathlib
from typing import Any

import click
import pytest
from click.testing import CliRunner

from lineagewire.cli import main_group
from lineagewire.consumers import cli as consumers_cli
from lineagewire.consumers.audit import cli as audit_cli


@pytest.fixture
def resolved(clean_env: pytest.MonkeyPatch) -> list[list[str]]:
    """The topics the service would consume, as ``run_service`` resolves them first (no broker needed)."""
    seen: list[list[str]] = []

    def run_service(ctx: click.Context, handler: Any, **runtime: Any) -> None:
        seen.append(consumers_cli.runtime_settings(ctx, **runtime).topics)

    clean_env.setattr(audit_cli, "run_service", run_service)
    return seen


def _archive(tmp_path: pathlib.Path, *flags: str) -> None:
    r = CliRunner().invoke(main_group, ["consume", "archive", "--to", str(tmp_path / "archive"), *flags],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output


def test_the_environments_topics(resolved: list[list[str]], clean_env: pytest.MonkeyPatch,
                                 tmp_path: pathlib.Path) -> None:
    clean_env.setenv("LINEAGEWIRE_CONSUMER__TOPICS", '["env.jobs"]')
    _archive(tmp_path)
    assert resolved == [["env.jobs"]]


def test_the_yaml_files_topics_and_the_flag_over_them(resolved: list[list[str]], tmp_path: pathlib.Path) -> None:
    (tmp_path / "lineagewire.yaml").write_text("consumer: {topics: [yaml.jobs]}\n")
    _archive(tmp_path)
    _archive(tmp_path, "--topic", "flag.jobs")
    assert resolved == [["yaml.jobs"], ["flag.jobs"]]


def test_the_default_is_the_jobs_and_refresh_command_topics(resolved: list[list[str]],
                                                            tmp_path: pathlib.Path) -> None:
    _archive(tmp_path)
    assert resolved == [["lineage.jobs", "lineage.refresh-commands"]]
