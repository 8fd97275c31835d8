"""Run one compose service's exact ``lineagewire`` command up to the point where it would start serving, then exit.

Run by ``tests/deploy/test_deploy.py`` with the Python of a virtualenv installed as the Dockerfile installs the
image (not with the test's own environment: it imports only lineagewire and what that install brought):

    <venv>/bin/python tests/deploy/dry_run.py lineagewire consume datahub --gms-url ... --metrics-port 9465

Everything the command does before it serves runs for real: its options are parsed, its configuration (rules,
tables, sinks, database URL) is loaded and checked, its handler is built, and so every module of its optional
extras is imported. Only the long-running part is replaced, at the one place each kind of command reaches:

* ``consume <service>``: ``ConsumerRuntime.run`` (after the runtime was built around the handler) calls
  ``on_open`` and returns, instead of subscribing to Kafka;
* ``scheduler serve``: ``scheduler.service.serve`` returns instead of starting uvicorn (the service, its
  database and its Kafka producer are made first);
* ``ui``: ``uvicorn.run`` returns (the app is built on the registry's database first).
* ``ingest openlineage``: ``uvicorn.run`` returns (the receiver's app and its Kafka publisher are built first).

It prints ``dry-run reached <where>`` when it got there, so the test knows the command did not stop early;
a command that reaches neither is an error here (exit 3), not a silent pass.
"""

from __future__ import annotations

import sys

REACHED: list[str] = []


def _stub_runtime() -> None:
    from lineagewire.consumers.runtime import ConsumerRuntime, RunStats

    def run(self: ConsumerRuntime, *, on_open=None, **_: object) -> RunStats:  # noqa: ANN001
        REACHED.append(f"ConsumerRuntime.run of {self.service} (group {self.group_id}, topics {self.topics})")
        if on_open is not None:
            on_open()
        return RunStats()

    ConsumerRuntime.run = run  # type: ignore[method-assign]


def _stub_scheduler() -> None:
    from lineagewire.producers.scheduler import service

    def serve(svc: object, *, host: str, port: int, **_: object) -> None:
        REACHED.append(f"scheduler serve on {host}:{port}")
        close = getattr(svc, "close", None)
        if close is not None:
            close()

    service.serve = serve


def _stub_uvicorn() -> None:
    import uvicorn

    def run(app: object, *, host: str, port: int, **_: object) -> None:
        REACHED.append(f"uvicorn.run of {type(app).__name__} on {host}:{port}")

    uvicorn.run = run


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "lineagewire":
        print(f"dry-run: expected a lineagewire command, got {argv!r}", file=sys.stderr)
        return 2
    _stub_runtime()
    if "scheduler" in argv:
        _stub_scheduler()
    if "ui" in argv or "ingest" in argv:
        _stub_uvicorn()
    from lineagewire.cli import main as lineagewire_main

    try:
        lineagewire_main(argv[1:])
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    if not REACHED:
        print("dry-run: the command returned without reaching a service loop it knows", file=sys.stderr)
        return 3
    print(f"dry-run reached {REACHED[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
