"""``lineagewire alerts ...`` and the service's rules-file errors, as a user runs them."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

from lineagewire.consumers.alerting.store import AlertStore

pytestmark = [pytest.mark.slow]  # each call starts a Python process


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    return subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def in_process(capsys, *args: str) -> tuple[int, str]:  # noqa: ANN001
    """``lineagewire ARGS`` run by its own main() in this process: (exit code, stderr), stderr one line."""
    from lineagewire.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(list(args))
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return int(info.value.code or 0), err


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


BAD_CHANNELS = {
    "unknown type": ("  x: {type: carrier-pigeon}\n", "channels.x: channel type 'carrier-pigeon' is unknown"),
    "webhook without url": ("  x: {type: webhook}\n", "channels.x: invalid webhook settings: url: Field required"),
    "unset secret": ("  x: {type: webhook, url: {env: LW_TEST_UNSET_SECRET}}\n",
                     "environment variable LW_TEST_UNSET_SECRET is not set"),
    "no channel at all": ("", "no channels defined; expected at least one"),
}


@pytest.mark.parametrize("case", sorted(BAD_CHANNELS))
def test_a_bad_channel_is_one_line_in_the_service_and_in_every_alerts_command(tmp_path, capsys, case: str) -> None:  # noqa: ANN001
    channel, message = BAD_CHANNELS[case]
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"database: sqlite:///{tmp_path / 'a.db'}\n" + ("channels:\n" + channel if channel else "")
                     + "rules:\n  - {name: a, kind: run_failed" + (", channels: [x]}\n" if channel else "}\n"))
    runs = [cli("--bootstrap-servers", "127.0.0.1:1", "consume", "alerting", "--rules", str(rules)),
            cli("alerts", "--rules", str(rules), "list")]
    for run in runs:
        assert run.returncode == 2, (run.args, run.stderr)
        assert run.stderr.count("\n") == 1 and message in run.stderr, (run.args, run.stderr)
        assert "Traceback" not in run.stderr and "AssertionError" not in run.stderr
    # the other commands in this process (a Python process per call is slow): the same line from main()
    for args in (["show", "abc"], ["silences"], ["outbox"], ["expire", "abc"],
                 ["silence", "--match", "job=x", "--for", "1h", "--comment", "c"]):
        code, err = in_process(capsys, "alerts", "--rules", str(rules), *args)
        assert code == 2 and message in err, (args, err)
    assert not (tmp_path / "a.db").exists()


def test_a_rule_that_sends_nowhere_is_an_error(tmp_path) -> None:  # noqa: ANN001
    rules = tmp_path / "rules.yaml"
    rules.write_text("channels:\n  x: {type: webhook, url: 'http://127.0.0.1:9/'}\n"
                     "rules:\n  - {name: a, kind: run_failed, channels: [x]}\n  - {name: b, kind: run_failed}\n")
    run = cli("alerts", "--rules", str(rules), "list")
    assert run.returncode == 2 and "rules[1] (b): sends to no channel" in run.stderr, run.stderr


def test_read_commands_on_a_missing_database_say_so_and_create_nothing(tmp_path, capsys) -> None:  # noqa: ANN001
    missing = tmp_path / "nope.db"
    run = cli("alerts", "--database", f"sqlite:///{missing}", "list")
    assert run.returncode == 2 and f"(no file {str(missing)!r})" in run.stderr and run.stderr.count("\n") == 1
    for args in (["show", "abc"], ["silences"], ["outbox"], ["expire", "abc"]):
        code, err = in_process(capsys, "alerts", "--database", f"sqlite:///{missing}", *args)
        assert code == 2 and f"(no file {str(missing)!r})" in err, (args, err)
    assert list(tmp_path.iterdir()) == []
    # A database the service wrote is read without a write: list works on a read-only file.
    db = f"sqlite:///{tmp_path / 'a.db'}"
    AlertStore(db).close()
    (tmp_path / "a.db").chmod(0o444)
    listed = cli("alerts", "--database", db, "list")
    assert listed.returncode == 0 and listed.stdout == "", listed.stderr


def test_notify_since_takes_an_iso_time_or_a_duration_ago(capsys, tmp_path) -> None:  # noqa: ANN001
    from lineagewire.consumers.alerting.cli import _parse_since

    assert _parse_since("2026-11-20T08:00") == dt.datetime(2026, 11, 20, 8, 0, tzinfo=dt.UTC)
    assert _parse_since("2026-11-20T08:00+01:00") == dt.datetime(2026, 11, 20, 7, 0, tzinfo=dt.UTC)
    assert abs((dt.datetime.now(dt.UTC) - _parse_since("2h")).total_seconds() - 7200) < 60
    rules = tmp_path / "rules.yaml"
    rules.write_text("channels:\n  x: {type: webhook, url: 'http://127.0.0.1:9/'}\n"
                     "rules:\n  - {name: a, kind: run_failed, channels: [x]}\n")
    from lineagewire.cli import main

    with pytest.raises(SystemExit) as info:  # a usage error, as click prints them
        main(["--bootstrap-servers", "127.0.0.1:1", "consume", "alerting", "--rules", str(rules),
              "--notify-since", "last tuesday"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--notify-since: 'last tuesday': expected an ISO 8601 time" in err, err
    assert "Traceback" not in err
