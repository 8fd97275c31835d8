"""A real ``lineagewire consume openlineage`` process against a port nothing listens on (issue 10.5).

No broker fixture: the point is that there is none.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from lineagewire.kafka.local import free_port
from tests.helpers import wait_for


def _healthz(port: int) -> tuple[int, dict] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())
    except OSError:
        return None  # not serving yet


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in ("OPENLINEAGE_CONFIG", "OPENLINEAGE_URL", "LINEAGEWIRE_CONFIG"):
        env.pop(name, None)
    return env


@pytest.mark.slow
def test_service_with_no_broker_is_unhealthy_quiet_and_stops_on_sigterm(tmp_path) -> None:  # noqa: ANN001
    dead, metrics = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lineagewire", "--bootstrap-servers", f"127.0.0.1:{dead}", "consume", "openlineage",
         "--url", "http://127.0.0.1:9/", "--metrics-port", str(metrics)],
        cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        status = wait_for(lambda: (h := _healthz(metrics)) is not None and h[0] == 503 and h, timeout=30)
        assert any("kafka unreachable" in p for p in status[1]["problems"]), status
        # Let it run a few seconds with the broker down: librdkafka retries ~20 times a second meanwhile.
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=4)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        proc.wait(timeout=10)  # it once took ~30 s, blocked creating the dead-letter topic
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    # Every line the service logged at WARNING or above while the broker was down: one per backoff step
    # (1 s, 2 s, 4 s...) over ~5 s, not one per reconnect attempt (librdkafka's ~20 a second).
    loud = [ln for ln in err.splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", ln)]
    refused = [ln for ln in loud if "Connection refused" in ln or "brokers are down" in ln]
    assert 1 <= len(refused) <= len(loud) <= 8, "\n".join(loud[:30])
    assert "Traceback" not in err
    assert took <= 2.0, f"SIGTERM to exit took {took:.2f} s; expected at most 2 s"


def _cli(*args: str, env: dict[str, str] | None = None, cwd=None) -> subprocess.CompletedProcess:  # noqa: ANN001
    return subprocess.run([sys.executable, "-m", "lineagewire", *args], capture_output=True, text=True,
                          timeout=60, env=env or _env(), cwd=cwd, check=False)


def _one_clear_line(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr[-2000:]
    return lines[0]


def test_topics_list_on_a_dead_broker_is_one_line_and_exit_2() -> None:
    line = _one_clear_line(_cli("--bootstrap-servers", f"127.0.0.1:{free_port()}", "topics", "list",
                                "--timeout", "2"))
    assert "no broker answered at 127.0.0.1:" in line and "expected a reachable Kafka cluster" in line


def test_malformed_config_yaml_is_one_line_and_exit_2(tmp_path) -> None:  # noqa: ANN001
    bad = tmp_path / "bad.yaml"
    bad.write_text("bootstrap_servers: [127.0.0.1:9092,\n")
    line = _one_clear_line(_cli("--config", str(bad), "topics", "list", "--timeout", "1"))
    assert str(bad) in line and "not valid YAML at line 2" in line and "expected a YAML mapping" in line


def test_unknown_consumer_property_is_one_line_and_exit_2(tmp_path) -> None:  # noqa: ANN001
    line = _one_clear_line(_cli("--bootstrap-servers", f"127.0.0.1:{free_port()}", "consume", "openlineage",
                                "--url", "http://127.0.0.1:9/", "--consumer-property", "bogus.prop=1", cwd=tmp_path))
    assert "bogus.prop" in line and "expected consumer properties" in line


def test_unknown_openlineage_transport_is_one_line_and_exit_2(tmp_path) -> None:  # noqa: ANN001
    env = {**_env(), "OPENLINEAGE__TRANSPORT__TYPE": "bogus"}
    line = _one_clear_line(_cli("--bootstrap-servers", f"127.0.0.1:{free_port()}", "consume", "openlineage",
                                env=env, cwd=tmp_path))
    assert "bogus" in line and "expected a transport type such as http" in line


def test_a_service_waits_for_its_dead_letter_topics_as_long_as_before(monkeypatch, caplog) -> None:  # noqa: ANN001
    """A service started before Kafka (docker compose) creates its dead-letter topics in the background with
    create_topics' own 30 s, not the 10 s connect timeout of the one-shot commands, and logs the reason once."""
    from lineagewire.config import Settings
    from lineagewire.consumers.runtime import ConsumerRuntime
    from lineagewire.exceptions import BrokerUnavailableError
    from lineagewire.kafka import topics
    from tests.consumers.runtime.support import Recording

    waits: list[float | None] = []

    def unreachable(settings: Settings, *, timeout: float | None = None) -> None:
        waits.append(timeout)
        raise BrokerUnavailableError(f"no broker answered at {settings.bootstrap_servers} within {timeout:g}s")

    monkeypatch.setattr(topics, "connect", unreachable)
    runtime = ConsumerRuntime(Settings(bootstrap_servers="127.0.0.1:1", connect_timeout=10), Recording())
    with caplog.at_level("WARNING"):
        runtime._create_dlq_topics()
    assert waits == [30.0]
    lines = [r.getMessage() for r in caplog.records if "dead-letter" in r.getMessage()]
    assert len(lines) == 1 and "within 30s" in lines[0], lines
