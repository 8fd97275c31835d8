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


def show_subscribe(lw: Callable[..., list[str]], env: dict[str, str], started: dt.datetime) -> None:
    sub = subprocess.run(lw("subscribe", "--from", started.isoformat(), "--exit-at-end", "--format", "table",
                            "--job", "daily_orders"), env=env, check=False, capture_output=True, text=True)
    click.echo(sub.stdout.rstrip() or sub.stderr.rstrip())


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
    """Print the job's OpenLineage runs and check them against the spec; how many events there were."""
    since = started.isoformat()[:19]
    events = [e for e in receiver.received(OPENLINEAGE_PATH)
              if e["job"]["name"].startswith("daily_orders") and e["eventTime"] >= since]
    for ev in events:
        run = ev["run"]
        parent = run.get("facets", {}).get("parent", {}).get("run", {}).get("runId")
        ins = ", ".join(d["name"] for d in ev.get("inputs", [])) or "-"
        outs = ", ".join(d["name"] for d in ev.get("outputs", [])) or "-"
        click.echo(f"  {ev['eventType']:<9} {ev['job']['name'][:58]:<58} run {run['runId'][:8]}"
                   f"{' parent ' + parent[:8] if parent else ''}")
        if ev.get("inputs") or ev.get("outputs"):
            click.echo(f"            {ins}  ->  {outs}")
        for out in ev.get("outputs", []):
            for line in _column_lines(out):
                click.echo(line)
    path = receiver.file_for(OPENLINEAGE_PATH)
    click.echo(f"\n  {len(events)} OpenLineage events, all in {path}")
    if validator.is_file() and events:
        check = subprocess.run([sys.executable, str(validator), str(path)], capture_output=True, text=True,
                               check=False)
        verdict = "valid against the OpenLineage spec" if check.returncode == 0 else check.stdout[-2000:]
        click.echo(f"  spec check: {verdict}")
    return len(events)
