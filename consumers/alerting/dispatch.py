"""The alert lifecycle, as Alertmanager users know it. Pure: state in memory, the clock passed in.

* A firing signal opens an alert (keyed by its fingerprint) or refreshes an
  open one; a clearing signal resolves it.
* Alerts are grouped by the route's ``group_by`` labels (and their channels).
  A group's first notification waits ``group_wait`` (to collect its
  siblings); later changes go out at most every ``group_interval``; a group
  with nothing new is re-sent only after ``repeat_interval``.
* A resolved alert that was notified is announced as resolved, to the same
  channels, with its group's next notification; one never notified (muted,
  or cleared within ``group_wait``) is closed quietly.
* ``muted(alert)`` (silences and inhibition, decided by the caller) keeps an
  alert out of notifications while it holds.

Every change is recorded in ``changed_alerts`` / ``changed_groups`` so the
store persists exactly what changed, in the same transaction as the outbox
rows of the notifications; after a restart the loaded state neither
re-notifies an open alert nor forgets a pending resolve.

With several instances on one database, what one remembers may be stale: the
service ``refresh``es the groups it decides for from the database (under their
row locks) before it applies signals and asks ``due(keys=...)``, and
``due_keys`` says, without changing anything, which groups look due.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .model import AlertView, Notification, Signal, fingerprint

__all__ = ["Alert", "Dispatcher", "Group", "Outgoing"]


@dataclass
class Alert:
    fingerprint: str
    rule: str
    labels: dict[str, str]
    annotations: dict[str, str]
    channels: tuple[str, ...]
    group_key: str
    starts_at: dt.datetime
    updated_at: dt.datetime
    state: str = "firing"  # firing | resolved
    ends_at: dt.datetime | None = None
    #: a firing notification of this episode went out
    notified: bool = False
    last_notified_at: dt.datetime | None = None
    #: resolved after being notified; the resolve is still to be sent
    resolve_pending: bool = False

    def view(self) -> AlertView:
        status = "firing" if self.state == "firing" else "resolved"
        return AlertView(self.fingerprint, status, self.labels, self.annotations, self.starts_at, self.ends_at)


@dataclass
class Group:
    key: str
    labels: dict[str, str]
    channels: tuple[str, ...]
    first_pending_at: dt.datetime | None = None
    last_sent_at: dt.datetime | None = None
    members: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Outgoing:
    """A notification for some channels."""

    channels: tuple[str, ...]
    notification: Notification


def group_key_of(labels: dict[str, str], channels: tuple[str, ...]) -> str:
    text = "\x1f".join(channels) + "\x1d" + fingerprint(labels)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Dispatcher:
    """Open alerts and their groups; ``apply`` signals, then ask ``due(now)`` for notifications."""

    def __init__(self, *, group_by: Iterable[str] = ("alertname", "job"), group_wait: float = 30.0,
                 group_interval: float = 300.0, repeat_interval: float = 4 * 3600.0) -> None:
        self.group_by = tuple(group_by)
        self.group_wait = dt.timedelta(seconds=group_wait)
        self.group_interval = dt.timedelta(seconds=group_interval)
        self.repeat_interval = dt.timedelta(seconds=repeat_interval)
        self.alerts: dict[str, Alert] = {}   # live: firing, or resolved with a resolve pending
        self.groups: dict[str, Group] = {}
        self.changed_alerts: dict[str, Alert] = {}
        self.changed_groups: dict[str, Group] = {}
        #: groups with something to tell (a new alert or a resolve): the only ones an event can make due
        self._active: set[str] = set()

    def clear_changes(self) -> None:
        """Forget ``changed_alerts`` and ``changed_groups`` (they were saved, or the save failed and is redone)."""
        self.changed_alerts.clear()
        self.changed_groups.clear()

    def key_of(self, signal: Signal) -> str:
        """The key of the group ``signal``'s alert belongs to."""
        return group_key_of({k: signal.labels.get(k, "") for k in self.group_by}, signal.channels)

    def group_of(self, signal: Signal) -> Group:
        """A new, empty group for ``signal``'s alert (what the store inserts when the group has no row yet)."""
        return self._new_group(signal.labels, signal.channels)

    def replace(self, alerts: Iterable[Alert], groups: Iterable[Group]) -> None:
        """Forget what is in memory and take ``alerts`` and ``groups`` (the database's live state)."""
        self.alerts.clear()
        self.groups.clear()
        self._active.clear()
        self.load(alerts, groups)

    def refresh(self, keys: Iterable[str], groups: Iterable[Group], alerts: Iterable[Alert]) -> None:
        """Replace groups ``keys`` and their alerts with ``groups`` and ``alerts`` as read from the database (a key
        without a group there is forgotten); the other groups are left as they are."""
        for key in keys:
            g = self.groups.pop(key, None)
            if g is not None:
                for fp in g.members:
                    a = self.alerts.get(fp)
                    if a is not None and a.group_key == key:
                        del self.alerts[fp]
            self._active.discard(key)
        alerts = list(alerts)
        for a in alerts:  # an alert remembered in another group (its rule's channels changed) moves with the database
            old = self.alerts.pop(a.fingerprint, None)
            if old is not None and (og := self.groups.get(old.group_key)) is not None:
                og.members.discard(a.fingerprint)
        self.load(alerts, groups)

    def load(self, alerts: Iterable[Alert], groups: Iterable[Group]) -> None:
        for g in groups:
            self.groups[g.key] = g
        for a in alerts:
            self.alerts[a.fingerprint] = a
            known = self.groups.get(a.group_key)
            g = known if known is not None else self._new_group(a.labels, a.channels)
            self.groups[a.group_key] = g
            g.members.add(a.fingerprint)
            if not a.notified or a.resolve_pending:
                self._active.add(g.key)

    def _new_group(self, labels: dict[str, str], channels: tuple[str, ...]) -> Group:
        glabels = {k: labels.get(k, "") for k in self.group_by}
        return Group(group_key_of(glabels, channels), glabels, channels)

    def _group(self, labels: dict[str, str], channels: tuple[str, ...]) -> Group:
        glabels = {k: labels.get(k, "") for k in self.group_by}
        key = group_key_of(glabels, channels)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = Group(key, glabels, channels)
        return g

    def _pending(self, g: Group, now: dt.datetime) -> None:
        self._active.add(g.key)
        if g.first_pending_at is None:
            g.first_pending_at = now
            self.changed_groups[g.key] = g

    def apply(self, signal: Signal, now: dt.datetime) -> Alert | None:
        """Open, refresh or resolve the alert of ``signal``; the alert when something changed."""
        fp = signal.fingerprint
        a = self.alerts.get(fp)
        if signal.firing:
            if a is None:
                g = self._group(signal.labels, signal.channels)
                a = Alert(fp, signal.rule, dict(signal.labels), dict(signal.annotations), signal.channels, g.key,
                          starts_at=signal.at, updated_at=now)
                self.alerts[fp] = a
                g.members.add(fp)
                self._pending(g, now)
            elif a.state == "resolved":  # fired again before its resolve went out: it never stopped, for them
                a.state, a.ends_at, a.resolve_pending = "firing", None, False
                a.annotations, a.updated_at = dict(signal.annotations), now
            else:
                if a.annotations == signal.annotations:
                    return None  # a repeat: nothing new to keep or tell
                a.annotations, a.updated_at = dict(signal.annotations), now
            self.changed_alerts[fp] = a
            return a
        if a is None or a.state == "resolved":
            return None
        a.state, a.ends_at, a.updated_at = "resolved", signal.at, now
        g = self.groups[a.group_key]
        if a.notified:
            a.resolve_pending = True
            self._pending(g, now)
        else:
            self._drop(a)
        self.changed_alerts[fp] = a
        return a

    def _drop(self, a: Alert) -> None:
        self.alerts.pop(a.fingerprint, None)
        g = self.groups.get(a.group_key)
        if g is not None:
            g.members.discard(a.fingerprint)
            if not g.members:
                # An empty group starts afresh (group_wait again) like Alertmanager's aggregation groups.
                g.first_pending_at = g.last_sent_at = None
                self.changed_groups[g.key] = g

    def _decide(self, g: Group, now: dt.datetime, muted: Callable[[Alert], bool]
                ) -> tuple[list[Alert], list[Alert]] | None:
        """(firing, resolving) alerts of ``g`` to notify at ``now``, or None when nothing is due."""
        members = [self.alerts[f] for f in sorted(g.members)]
        firing = [a for a in members if a.state == "firing" and not muted(a)]
        resolving = [a for a in members if a.resolve_pending]
        fresh = [a for a in firing if not a.notified]
        if not fresh and not resolving:
            self._active.discard(g.key)
        if fresh or resolving:
            start = g.first_pending_at or now
            if g.last_sent_at is None:
                if now < start + self.group_wait:
                    return None
            elif now < g.last_sent_at + self.group_interval:
                return None
        elif not (firing and g.last_sent_at is not None and now >= g.last_sent_at + self.repeat_interval):
            return None
        return firing, resolving

    def due_keys(self, now: dt.datetime, muted: Callable[[Alert], bool] = lambda a: False) -> set[str]:
        """The keys of the groups with a notification due at ``now``; marks nothing (what ``due`` would answer)."""
        return {key for key, g in self.groups.items() if g.members and self._decide(g, now, muted) is not None}

    def due(self, now: dt.datetime, muted: Callable[[Alert], bool] = lambda a: False, *,
            everything: bool = True, keys: Iterable[str] | None = None) -> list[Outgoing]:
        """The notifications due at ``now``; marks what they tell as told.

        ``everything=False`` looks only at groups with something new (after an event: cheap with many open
        alerts); the clock's call looks at all of them (repeats, silences that ended). ``keys``: only these groups.
        """
        out: list[Outgoing] = []
        if keys is not None:
            look = list(keys)
        else:
            look = list(self.groups) if everything else list(self._active)
        for key in look:
            g = self.groups.get(key)
            if g is None or not g.members:
                self._active.discard(key)
                continue
            decided = self._decide(g, now, muted)
            if decided is None:
                continue
            firing, resolving = decided
            views = tuple(a.view() for a in firing + resolving)
            out.append(Outgoing(g.channels, Notification(g.key, dict(g.labels), views, now)))
            for a in firing:
                a.notified, a.last_notified_at = True, now
                self.changed_alerts[a.fingerprint] = a
            for a in resolving:
                a.resolve_pending = False
                self.changed_alerts[a.fingerprint] = a
                self._drop(a)
            g.last_sent_at, g.first_pending_at = (now, None) if g.members else (None, None)
            self._active.discard(key)
            self.changed_groups[g.key] = g
        return out

    def firing_for(self, channel: str, now: dt.datetime, muted: Callable[[Alert], bool] = lambda a: False
                   ) -> Notification | None:
        """The notified, still-firing alerts routed to ``channel`` (for receivers that need re-sending)."""
        views = tuple(a.view() for a in self.alerts.values()
                      if a.state == "firing" and a.notified and channel in a.channels and not muted(a))
        return Notification(f"resend:{channel}", {}, views, now) if views else None
