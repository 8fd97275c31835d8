"""Stopping a child process the way every lineagewire command and test stops one: ask, wait, then kill."""

from __future__ import annotations

import signal
import subprocess

__all__ = ["stop_process"]


def stop_process(proc: subprocess.Popen, timeout: float = 30.0) -> int:
    """SIGTERM ``proc`` (a graceful stop: services commit and close), wait up to ``timeout`` seconds, then SIGKILL
    it and wait for that. Returns its exit code; a process that has already exited is left as it is."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
