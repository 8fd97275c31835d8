"""``lineagewire alerts ...`` and the service's rules-file errors, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lineagewire.consumers.alerting.store import AlertStore

pytestmark = [pytest.mark.slow]  # each call starts a Python process


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    return subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def test_silence_list_and_expire_through_the_cli(tmp_path) -> None:  # noqa: ANN001
    db = f"sqlite:///{tmp_path / 'a.db'}"
    made = cli("alerts", "--database", db, "silence", "--match", "job=nightly_*", "--match", "severity!=info",
               "--for", "2h", "--comment", "maintenance window", "--author", "ops")
    assert made.returncode == 0, made.stderr
    sid = made.stdout.strip()
    (s,) = AlertStore(db).silences()
    assert s.id == sid and s.matchers == {"job": "nightly_*", "severity": "!info"}
    assert 7190 < (s.ends_at - s.starts_at).total_seconds() <= 7200
    listed = cli("alerts", "--database", db, "silences")
    assert sid in listed.stdout and "job=nightly_* severity!=info" in listed.stdout and "maintenance" in listed.stdout
    assert cli("alerts", "--database", db, "expire", sid[:8]).returncode == 0
    assert cli("alerts", "--database", db, "silences").stdout.strip() == ""
    assert json.loads(cli("alerts", "--database", db, "list", "--json").stdout or "null") is None


def test_bad_cli_input_prints_one_line_and_exits_2(tmp_path) -> None:  # noqa: ANN001
    db = f"sqlite:///{tmp_path / 'a.db'}"
    bad_match = cli("alerts", "--database", db, "silence", "--match", "nightly", "--for", "2h", "--comment", "x")
    assert bad_match.returncode == 2 and "expected LABEL=GLOB" in bad_match.stderr
    bad_for = cli("alerts", "--database", db, "silence", "--match", "job=x", "--for", "soon", "--comment", "x")
    assert bad_for.returncode == 2 and "expected a duration such as 30s" in bad_for.stderr
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: a, kind: run_failed, severity: loud}\n")
    bad_rules = cli("--bootstrap-servers", "127.0.0.1:1", "consume", "alerting", "--rules", str(rules),
                    "--database", db)
    assert bad_rules.returncode == 2
    assert bad_rules.stderr.strip().count("\n") == 0 and "severity='loud'; expected one of" in bad_rules.stderr
