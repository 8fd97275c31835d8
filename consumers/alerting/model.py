"""The values rules, the lifecycle and the channels pass around: signals, alerts, notifications.

A rule emits ``Signal``s: "this alert is firing" or "this alert cleared",
identified by its labels. ``fingerprint(labels)`` is the alert's stable id
(the PagerDuty ``dedup_key``, the key of the alert table); it depends on the
labels only, so the same condition seen again, after a restart or on another
instance, is the same alert.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SEVERITIES", "AlertView", "Notification", "Signal", "fingerprint", "gist", "glob_match", "iso", "labels_match",
    "parse_duration", "parse_time",
]

SEVERITIES = ("critical", "error", "warning", "info")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, None: 1.0}


def parse_duration(value: Any, what: str = "duration") -> float:
    """Seconds from ``90``, ``"30s"``, ``"5m"``, ``"2h"``, ``"1d"``; ValueError naming ``what`` otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what}={value!r}: expected a duration such as 30s, 5m, 2h or 1d")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise ValueError(f"{what}={value!r}: expected a duration such as 30s, 5m, 2h or 1d")
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if seconds < 0:
        raise ValueError(f"{what}={value!r}: expected a duration >= 0")
    return seconds


def gist(message: str) -> str:
    """The line of an error message that says what went wrong. A Python UDF's error (PythonException) opens with
    "An exception was thrown from the Python worker" and a traceback; its last line ("ValueError: bad amount 25.0")
    is the one to read."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and any(line.startswith("Traceback (most recent call last)") for line in lines):
        return lines[-1]
    return lines[0] if lines else message


def fingerprint(labels: dict[str, str]) -> str:
    """Stable id of the alert with these labels: 16 hex digits of SHA-256 over the sorted label pairs."""
    text = "\x1f".join(f"{k}\x1e{labels[k]}" for k in sorted(labels))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def glob_match(patterns: str | list[str] | tuple[str, ...], value: str) -> bool:
    """True when ``value`` matches one of the shell-style globs (case-sensitive)."""
    if isinstance(patterns, str):
        return patterns == "*" or fnmatch.fnmatchcase(value, patterns)
    return any(p == "*" or fnmatch.fnmatchcase(value, p) for p in patterns)


def labels_match(matchers: dict[str, str], labels: dict[str, str]) -> bool:
    """Alertmanager-style matchers on labels: ``{name: glob}``; a glob prefixed with ``!`` must not match."""
    for name, pattern in matchers.items():
        value = labels.get(name, "")
        if pattern.startswith("!"):
            if fnmatch.fnmatchcase(value, pattern[1:]):
                return False
        elif not fnmatch.fnmatchcase(value, pattern):
            return False
    return True


def iso(when: dt.datetime | None) -> str | None:
    """RFC 3339 UTC with a Z, as Alertmanager and PagerDuty take it."""
    if when is None:
        return None
    return when.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def parse_time(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Signal:
    """A rule's verdict on one alert: firing (with what to tell people) or cleared."""

    rule: str
    labels: dict[str, str]
    firing: bool
    at: dt.datetime
    annotations: dict[str, str] = field(default_factory=dict)
    channels: tuple[str, ...] = ()
    #: the run or refresh (command id) the firing is about: the engine flags it, so a clean later run clears
    run_id: str | None = None
    refresh_id: str | None = None
    #: the dataset (``ns/name``, or ``writes.never_key``) whose freshness window the signal is about: the engine
    #: keeps a firing's labels with its write state, so the next successful write clears that very alert
    dataset: str | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)


@dataclass(frozen=True)
class AlertView:
    """One alert as a channel renders it."""

    fingerprint: str
    status: str  # "firing" or "resolved"
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: dt.datetime
    ends_at: dt.datetime | None

    @property
    def summary(self) -> str:
        return self.annotations.get("summary") or f"{self.labels.get('alertname', 'alert')} on {self.labels.get('job')}"

    def to_json(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "status": self.status, "labels": self.labels,
                "annotations": self.annotations, "startsAt": iso(self.starts_at), "endsAt": iso(self.ends_at)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> AlertView:
        return cls(fingerprint=doc["fingerprint"], status=doc["status"], labels=doc["labels"],
                   annotations=doc["annotations"], starts_at=parse_time(doc["startsAt"]),  # type: ignore[arg-type]
                   ends_at=parse_time(doc["endsAt"]))


@dataclass(frozen=True)
class Notification:
    """What one channel is asked to deliver for one alert group: its firing and newly resolved alerts."""

    group_key: str
    group_labels: dict[str, str]
    alerts: tuple[AlertView, ...]
    sent_at: dt.datetime

    @property
    def status(self) -> str:
        return "firing" if any(a.status == "firing" for a in self.alerts) else "resolved"

    @property
    def firing(self) -> list[AlertView]:
        return [a for a in self.alerts if a.status == "firing"]

    @property
    def resolved(self) -> list[AlertView]:
        return [a for a in self.alerts if a.status == "resolved"]

    @property
    def common_labels(self) -> dict[str, str]:
        if not self.alerts:
            return {}
        first = self.alerts[0].labels
        return {k: v for k, v in first.items() if all(a.labels.get(k) == v for a in self.alerts[1:])}

    def to_json(self) -> dict[str, Any]:
        return {"group_key": self.group_key, "group_labels": self.group_labels, "sent_at": iso(self.sent_at),
                "alerts": [a.to_json() for a in self.alerts]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Notification:
        return cls(group_key=doc["group_key"], group_labels=doc["group_labels"],
                   alerts=tuple(AlertView.from_json(a) for a in doc["alerts"]),
                   sent_at=parse_time(doc["sent_at"]))  # type: ignore[arg-type]
