"""Scheduler high availability on a real PostgreSQL: 5 minutes of a 1-second cron, one instance killed midway.

    .venv/bin/python -m bench.scheduler_ha [--seconds 300] [--workflows 5] [--bootstrap-servers HOST:PORT]

Two `lineagewire scheduler serve` processes share one PostgreSQL database
(Debian's server binaries, started in a temporary folder on 127.0.0.1);
``--workflows`` workflows fire every second; at half time one instance is
killed with SIGKILL and restarted. Counted (``tests/producers/scheduler/ha.py``):
nominal times fired, commands on the topic, duplicate (workflow, nominal
time) pairs on the topic, nominal times missing between the first and the
last, and the claims of each instance. The goal: zero duplicates, zero missed.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import tempfile

import yaml

from bench._common import save
from lineagewire.config import Settings
from tests.postgres import LocalPostgres, find_bin_dir
from tests.producers.scheduler.conftest import TABLES
from tests.producers.scheduler.ha import run_ha
from tests.producers.scheduler.topics import fresh_topics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--workflows", type=int, default=5)
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL server binaries not found; install them with: apt-get install -y postgresql")
    with tempfile.TemporaryDirectory() as tmp_name, contextlib.ExitStack() as stack:
        tmp = pathlib.Path(tmp_name)
        bootstrap = args.bootstrap_servers
        if bootstrap is None:
            from lineagewire.kafka.local import LocalKafka, free_port

            kafka = LocalKafka("bench-scheduler-ha", port=free_port(), controller_port=free_port(),
                               base=tmp / "kafka")
            kafka.start(timeout=120)
            stack.callback(kafka.stop)
            bootstrap = kafka.bootstrap_servers
        pg = stack.enter_context(LocalPostgres(bin_dir))
        settings = stack.enter_context(fresh_topics(Settings(bootstrap_servers=bootstrap)))
        tables = tmp / "tables.yaml"
        tables.write_text(yaml.safe_dump(TABLES))
        figures = run_ha(settings, tables, pg.new_database(), tmp, seconds=args.seconds, workflows=args.workflows)
    figures["ok"] = figures["duplicates"] == 0 and figures["missed"] == 0 and figures["not_on_topic"] == 0
    save("scheduler_ha", figures)


if __name__ == "__main__":
    main()
