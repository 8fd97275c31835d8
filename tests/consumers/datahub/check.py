"""DataHub's own checks of proposals: ``datahub check metadata-file``, and aspects that belong to their entity."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

from datahub.metadata.schema_classes import ENTITY_TYPE_TO_ASPECT_NAMES


def check_metadata_file(path: pathlib.Path) -> str:
    """Runs ``datahub check metadata-file``; returns its output, raises AssertionError when it rejects the file."""
    proc = subprocess.run([sys.executable, "-m", "datahub", "check", "metadata-file", str(path)], capture_output=True,
                          text=True, timeout=180, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "all valid" in out, out[-3000:]
    return out


def check_aspects_belong(records: list[dict[str, Any]]) -> None:
    """``check metadata-file`` does not check that an aspect belongs to its entity type: this does."""
    assert records
    for r in records:
        assert r["aspectName"] in ENTITY_TYPE_TO_ASPECT_NAMES[r["entityType"]], (r["entityType"], r["aspectName"])


def load(path: pathlib.Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())
