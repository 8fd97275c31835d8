"""What the demo prints: each service's output, short enough to read in a terminal."""

from __future__ import annotations

import datetime as dt
import pathlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import click

from .receiver import Receiver

OPENLINEAGE_PATH = "/api/v1/lineage"
ALERTS_PATH = "/alerts"

Lw = Callable[..., list[str]]
WIDTH = 160
_run_dir: list[str] = []  # the run's folder, printed once and shown as $RUN after that


def use_run_dir(path: pathlib.Path) -> None:
    _run_dir[:] = [str(path)]
    click.echo(f"  ($RUN below is {path})")


def echo(text: str) -> None:
    """click.echo with this run's folder shortened to $RUN and each line cut at WIDTH characters."""
    if _run_dir:
        text = text.replace(_run_dir[0], "$RUN")
    click.echo("\n".join(line if len(line) <= WIDTH else line[:WIDTH - 1] + "…" for line in text.splitlines()))


def _run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, check=False, capture_output=True, text=True)


def _indent(text: str, width: int = 2) -> str:
    return "\n".join(" " * width + line for line in text.rstrip().splitlines())


def show_subscribe(lw: Lw, env: dict[str, str], started: dt.datetime) -> None:
    sub = _run(lw("subscribe", "--from", started.isoformat(), "--exit-at-end", "--format", "table",
                  "--job", "daily_orders"), env)
    echo(sub.stdout.rstrip() or sub.stderr.rstrip())


def _column_lines(out: dict[str, Any]) -> list[str]:
    lines = []
    cl = out.get("facets", {}).get("columnLineage", {}).get("fields", {})
    for name, spec in list(cl.items())[:6]:
        kinds: dict[str, list[str]] = {"DIRECT": [], "INDIRECT": []}
        for i in spec.get("inputFields", []):
            types = {t.get("type", "DIRECT") for t in i.get("transformations", [])} or {"DIRECT"}
            for t in types & set(kinds):
                kinds[t].append(f"{i['name'].rsplit('/', 1)[-1]}.{i['field']}")
        lines.append(f"              column {name} <- {', '.join(kinds['DIRECT']) or '-'}"
                     f"   (indirect: {', '.join(kinds['INDIRECT']) or '-'})")
    return lines


def show_openlineage(receiver: Receiver, validator: pathlib.Path, started: dt.datetime) -> int:
    """Print the good run's OpenLineage events and check them against the spec; how many events there were."""
    since = started.isoformat()[:19]
    events = [e for e in receiver.received(OPENLINEAGE_PATH)
              if e["job"]["name"].startswith("daily_orders") and e["eventTime"] >= since]
    for ev in events:
        _show_event(ev)
    path = receiver.file_for(OPENLINEAGE_PATH)
    echo(f"\n  {len(events)} OpenLineage events of the good run; every event is in {path}")
    if validator.is_file() and events:
        check = _run([sys.executable, str(validator), str(path)])
        verdict = "valid against the OpenLineage spec" if check.returncode == 0 else check.stdout[-2000:]
        echo(f"  spec check: {verdict}")
    return len(events)


def _show_event(ev: dict[str, Any]) -> None:
    """One OpenLineage event: its type, job and run (and parent run), its datasets and its column lineage."""
    run = ev["run"]
    parent = run.get("facets", {}).get("parent", {}).get("run", {}).get("runId")
    ins = ", ".join(d["name"] for d in ev.get("inputs", [])) or "-"
    outs = ", ".join(d["name"] for d in ev.get("outputs", [])) or "-"
    echo(f"  {ev['eventType']:<9} {ev['job']['name'][:58]:<58} run {run['runId'][:8]}"
         f"{' parent ' + parent[:8] if parent else ''}")
    if ev.get("inputs") or ev.get("outputs"):
        echo(f"            {ins}  ->  {outs}")
    for out in ev.get("outputs", []):
        for line in _column_lines(out):
            echo(line)


def alert_notifications(receiver: Receiver, status: str) -> list[dict[str, Any]]:
    """The webhook notifications (Alertmanager's webhook payload) with ``status`` firing or resolved."""
    return [n for n in receiver.received(ALERTS_PATH) if n.get("status") == status]


def show_alert(notification: dict[str, Any]) -> None:
    for a in notification.get("alerts", []):
        labels, notes = a.get("labels", {}), a.get("annotations", {})
        echo(f"  {a['status'].upper():<8} {labels.get('alertname')} [{labels.get('severity')}] "
                   f"job {labels.get('job')}")
        if a["status"] == "firing":
            echo(_indent(notes.get("summary", "")[:200], 11))


def show_alert_list(lw: Lw, database: str) -> None:
    listed = _run(lw("alerts", "--database", database, "list", "--all"))
    echo(_indent(listed.stdout or listed.stderr))


def show_datahub(path: pathlib.Path) -> bool:
    """Summarise the proposals file and run DataHub's own check on it; whether the check passed."""
    summary = _run([sys.executable, "-m", "lineagewire.consumers.datahub.summary", str(path)])
    lines = summary.stdout.splitlines() or summary.stderr.splitlines()
    runs = [line for line in lines if line.startswith("DataProcessInstance")]
    apps = [line for line in runs if " of urn:li:dataFlow:" in line]  # the application runs
    shown = [line for line in lines if not line.startswith("DataProcessInstance") and "[INDIRECT" not in line]
    echo(_indent("\n".join(shown + apps)))
    echo(f"  ... and {len(runs) - len(apps)} DataProcessInstances of action runs; the indirect column lineage is "
         "left out here (all of it is in the file)")
    check = _run([sys.executable, "-m", "datahub", "check", "metadata-file", str(path)])
    ok = check.returncode == 0
    click.echo(f"\n  `datahub check metadata-file {path.name}`: "
               + ("passed" if ok else f"FAILED\n{_indent(check.stdout[-1500:] + check.stderr[-1500:], 4)}"))
    return ok


def show_registry(lw: Lw, dataset: pathlib.Path, db_url: str) -> bool:
    cmd = ["lineage", "downstream", str(dataset), "--db-url", db_url]
    echo(f"  $ lineagewire {' '.join(cmd)}")
    out = _run(lw(*cmd))
    echo(_indent(out.stdout or out.stderr, 4))
    return out.returncode == 0


def show_archive(lw: Lw, archive: pathlib.Path) -> bool:
    sql = ("SELECT job_name, status, count(*) AS events FROM events WHERE kind = 'JobStatusChangedEvent' "
           "AND job_name = 'daily_orders' GROUP BY ALL ORDER BY ALL")
    echo(f'  $ lineagewire audit query --archive {archive} "{sql}"')
    out = _run(lw("audit", "query", "--archive", str(archive), sql))
    echo(_indent(out.stdout or out.stderr, 4))
    verify = _run(lw("audit", "verify", str(archive)))
    echo(f"  $ lineagewire audit verify {archive}\n{_indent(verify.stdout or verify.stderr, 4)}")
    return out.returncode == 0 and verify.returncode == 0


def breaking_pages(receiver: Receiver) -> list[dict[str, Any]]:
    """The firing webhook notifications of a ``breaking_change`` alert."""
    return [n for n in alert_notifications(receiver, "firing")
            if any(a.get("labels", {}).get("kind") == "breaking_change" for a in n.get("alerts", []))]


def show_diff_and_impact(lw: Lw, run_id: str, dataset: pathlib.Path, column: str, db_url: str,
                         between: Callable[[], None]) -> bool:
    """``runs diff`` of the run, ``between()``, then ``impact`` of the column; both commands run at once, as they
    only read the registry. Whether both succeeded."""
    from concurrent.futures import ThreadPoolExecutor

    diff = ["runs", "diff", run_id, "--db-url", db_url]
    impact = ["impact", str(dataset), "--column", column, "--db-url", db_url]
    with ThreadPoolExecutor(2) as pool:
        done = [pool.submit(_run, lw(*cmd)) for cmd in (diff, impact)]
        ok = True
        for i, (cmd, future) in enumerate(zip((diff, impact), done, strict=True)):
            if i:
                between()
            out = future.result()
            echo(f"  $ lineagewire {' '.join(cmd)}")
            echo(_indent(_changed_only(out.stdout) or out.stderr, 4))
            ok = ok and out.returncode == 0
    return ok


def _changed_only(text: str) -> str:
    """The diff's text without its lines of ratios that did not change (rows and bytes written, 1.0x): the
    demo's v2 writes the same rows, so they would only push the change off the screen."""
    lines = text.rstrip().splitlines()
    kept = [line for line in lines if not line.rstrip().endswith("(1.0x)")]
    if len(kept) < len(lines):
        kept.append(f"({len(lines) - len(kept)} lines of unchanged ratios left out)")
    return "\n".join(kept)


def show_page(notification: dict[str, Any], pages: int) -> None:
    """The breaking_change page: what changed, whom it breaks, and the incident it opened."""
    echo(f"  the webhook got {pages} page(s) for the change:")
    for a in notification.get("alerts", []):
        labels, notes = a.get("labels", {}), a.get("annotations", {})
        echo(f"  {a['status'].upper():<8} {labels.get('alertname')} [{labels.get('severity')}] "
             f"job {labels.get('job')}")
        echo(_indent(f"{notes.get('summary', '')}\nbreaking: {notes.get('breaking', '-')}", 11))
        if notes.get("incident"):
            echo(f"           incident {notes['incident']}: affects {notes.get('affects')}")
