"""Is the cluster there? The one question every command that ends by itself asks first.

A service keeps reconnecting while the cluster is down (``errors.ClientErrorLog``). A one-shot command
(``subscribe``, ``replay``, ``topics``) is at a terminal and needs an answer: it calls ``connect`` (a
``TopicReader`` asks its own consumer the same way, with ``ConnectFailures`` and ``unreachable``), which
waits at most ``Settings.connect_timeout`` seconds (``--connect-timeout``, ``LINEAGEWIRE_KAFKA__CONNECT_TIMEOUT``)
for a broker and otherwise raises ``BrokerUnavailableError``: one line naming the bootstrap servers,
librdkafka's reason (connection refused, name not resolved, a TLS or SASL failure) and the next step.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from lineagewire.config import Settings
from lineagewire.exceptions import BrokerUnavailableError

from .errors import QUIET_LOGGER, UNREACHABLE_CODES

log = logging.getLogger(__name__)

__all__ = ["ConnectFailures", "admin", "connect", "next_step", "unreachable"]

#: librdkafka ends each failure with how long the attempt took: one reason, a new text at every reconnect
_ATTEMPT = re.compile(r"\s*\(after \d+ms in state \w+\)$")


class ConnectFailures:
    """An ``error_cb`` that keeps librdkafka's distinct reasons for not reaching a broker (the first ``keep``)."""

    def __init__(self, keep: int = 3) -> None:
        self.reasons: list[str] = []
        self._keep = keep

    def __call__(self, err: confluent_kafka.KafkaError) -> None:
        log.debug("admin client: %s", err.str())
        if err.code() in UNREACHABLE_CODES:  # "1/1 brokers are down" says less than the failure before it
            return
        reason = _ATTEMPT.sub("", err.str())
        if reason not in self.reasons and len(self.reasons) < self._keep:
            self.reasons.append(reason)


def admin(settings: Settings, error_cb: Any = None) -> AdminClient:
    """An AdminClient; connection failures go to ``error_cb`` (default: the debug log), not line by line to
    stderr (callers raise one clear error)."""
    conf: dict[str, Any] = {**settings.as_librdkafka_dict(), "logger": QUIET_LOGGER,
                            "error_cb": error_cb or (lambda err: log.debug("admin client: %s", err.str()))}
    return AdminClient(conf)


def connect(settings: Settings, *, timeout: float | None = None) -> tuple[AdminClient, ClusterMetadata]:
    """An AdminClient and the cluster's metadata, once a broker answered within ``timeout`` seconds (default
    ``settings.connect_timeout``); else ``BrokerUnavailableError`` naming the servers, why and what to do."""
    wait = settings.connect_timeout if timeout is None else timeout
    failures = ConnectFailures()
    client = admin(settings, failures)
    try:
        return client, client.list_topics(timeout=wait)
    except KafkaException as exc:
        client.poll(0)  # serves the error callbacks queued meanwhile: they say why
        raise unreachable(settings, wait, failures, exc) from exc


def unreachable(settings: Settings, wait: float, failures: ConnectFailures,
                exc: KafkaException) -> BrokerUnavailableError:
    """The one line for a cluster that did not answer within ``wait`` seconds: the servers, librdkafka's
    reason (from ``failures``, the client's ``error_cb``, once its callbacks were served; else ``exc``) and
    what to do."""
    reason = "; ".join(failures.reasons) or None
    detail = reason or (exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc))
    return BrokerUnavailableError(
        f"no broker answered at {settings.bootstrap_servers} within {wait:g}s: {detail}; "
        f"expected a reachable Kafka cluster: {next_step(settings)}",
        servers=settings.bootstrap_servers, reason=reason)


def next_step(settings: Settings) -> str:
    """What to do about an unreachable cluster: start the local broker when every server is on this machine,
    and check the setting that names the cluster (and the security settings, when set)."""
    check = "check bootstrap_servers (--bootstrap-servers, LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS)"
    if settings.security.security_protocol not in (None, "PLAINTEXT"):
        check += " and the security settings (LINEAGEWIRE_KAFKA__SECURITY__*)"
    servers = [s.strip().rpartition(":") for s in settings.bootstrap_servers.split(",")]
    if not all(_on_this_machine(host) for host, _, _ in servers):
        return check
    port = servers[0][2]
    start = "lineagewire kafka start" + ("" if port == "9092" else f" --port {port}")
    return f"start the local one with '{start}', or {check}"


def _on_this_machine(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
