"""docs/settings.md is generated from the settings models and the commands' options (issue 32, item 3)."""

from __future__ import annotations

import difflib
import pathlib

import pytest

from lineagewire.settings_doc import COMMAND, render

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_docs_settings_md_is_what_the_models_generate() -> None:
    path = ROOT / "docs" / "settings.md"
    on_disk, generated = path.read_text(encoding="utf-8"), render()
    if on_disk != generated:
        diff = difflib.unified_diff(on_disk.splitlines(), generated.splitlines(), "docs/settings.md (in git)",
                                    "docs/settings.md (from the models)", lineterm="", n=1)
        pytest.fail(f"docs/settings.md differs from the settings models; run `{COMMAND}` and commit the result:\n"
                    + "\n".join(list(diff)[:60]))


def test_the_document_names_every_variable_of_every_model() -> None:
    """Not only equal to what the generator prints: what it prints covers the models (a generator that dropped
    a model or a nested key would pass the first test)."""
    from lineagewire.producers.scheduler.settings import ServiceConfig
    from lineagewire.producers.spark.config import EmitterConfig

    text = render()
    for name in ("LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS", "LINEAGEWIRE_KAFKA__SECURITY__SASL_PASSWORD",
                 "LINEAGEWIRE_KAFKA__TOPICS__JOBS",
                 "LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN", "LINEAGEWIRE_ALERTING__ROUTE__GROUP_WAIT",
                 "LINEAGEWIRE_AUDIT__ARCHIVE", "LINEAGEWIRE_REGISTRY__DB_URL", "LINEAGEWIRE_UI__TOKEN"):
        assert f"`{name}`" in text, name
    for field in EmitterConfig.model_fields:
        assert f"`LINEAGEWIRE_EMITTER__{field.upper()}`" in text, field
    for field in ServiceConfig.model_fields:
        if field != "config_file":
            assert f"`LINEAGEWIRE_SCHEDULER__{field.upper()}`" in text, field
    assert "| `LINEAGEWIRE_NAMESPACE` | `LINEAGEWIRE_EMITTER__NAMESPACE` |" in text
    assert "| `LINEAGEWIRE_ARCHIVE` | `LINEAGEWIRE_AUDIT__ARCHIVE` |" in text
    # Kafka has its section like every part: its keys are under kafka., its variables' old names in the last table
    assert "| `LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS` (was `LINEAGEWIRE_BOOTSTRAP_SERVERS`) | " \
           "`kafka.bootstrap_servers` |" in text
    assert "| `LINEAGEWIRE_SECURITY__SASL_PASSWORD` | `LINEAGEWIRE_KAFKA__SECURITY__SASL_PASSWORD` |" in text
