"""A server the tests start as a child process: its output kept in a log file, readiness read from that output."""

from __future__ import annotations

import pathlib
import re
import subprocess
import threading
import time


class ServerProcess:
    """``command`` started with its stdout and stderr merged into ``log``; ``wait_for(pattern)`` blocks until a line
    matches (or the deadline passes, or the process exits: AssertionError with the log's tail)."""

    def __init__(self, name: str, command: list[str], log: pathlib.Path, *, env: dict[str, str] | None = None,
                 cwd: pathlib.Path | None = None, stdin: bool = False) -> None:
        self.name = name
        self.log = log
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, env=env, cwd=cwd,
                                     errors="replace")
        self._reader = threading.Thread(target=self._read, name=f"{name}-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log, "a") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                with self._changed:
                    self._lines.append(line.rstrip("\n"))
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first line matching ``pattern`` (already printed or still to come)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self._lines[seen:]:
                    if (found := regex.search(line)) is not None:
                        return found
                seen = len(self._lines)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    break
                self._changed.wait(left)
        why = f"exited with status {self.proc.returncode}" if self.proc.poll() is not None else f"not within {timeout}s"
        raise AssertionError(f"{self.name} never printed /{pattern}/ ({why}); its log, {self.log}, ends:\n"
                             + "\n".join(self._lines[-40:]))

    def stop(self, timeout: float = 30.0) -> int:
        """Close stdin (servers that stop when it closes) or send SIGTERM; SIGKILL after ``timeout``. Also what
        a process that ended on its own needs (its pipes closed). The exit status."""
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        return self.proc.returncode
