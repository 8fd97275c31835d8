"""Read-only view of the alerting service's database (``--alerts-db``): alerts, incidents, silences, outbox.

The services are independent (pyproject's import-linter contract), so this reads the alerting
service's tables with plain SQL through reflection instead of importing ``consumers.alerting``: the
tables are its documented storage (``lineagewire alerts`` reads the same). Nothing is ever written;
silencing stays in the CLI. A database that is not there or has no alert tables yet reads as empty.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import sqlalchemy as sa

from lineagewire.exceptions import ConfigError

from .queries import utc

log = logging.getLogger(__name__)

__all__ = ["AlertsReader"]

#: the alerting service's table names (consumers/alerting/store.py)
_TABLES = {"alerts": "alerting_alerts", "silences": "alerting_silences", "outbox": "alerting_outbox",
           "incidents": "alerting_incidents", "incident_alerts": "alerting_incident_alerts"}
#: alerts per page of the alerts page
RECENT = 200


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else (value or {})


class Alerts(list[dict[str, Any]]):
    """Alerts as the page lists them; ``incidents``: the incidents they are grouped into (read when asked), so the
    alerts page shows them with the one call it makes."""

    def __init__(self, alerts: list[dict[str, Any]], reader: AlertsReader) -> None:
        super().__init__(alerts)
        self._reader = reader

    @property
    def incidents(self) -> list[dict[str, Any]]:
        return self._reader.incidents()


class AlertsReader:
    """Alerts, silences and outbox rows of the alerting database at ``url`` (None: no alerting)."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.engine: sa.engine.Engine | None = None
        if url:
            try:
                self.engine = sa.create_engine(url, **({"connect_args": {"timeout": 30}}
                                                       if url.startswith("sqlite") else {}))
            except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
                raise ConfigError(f"--alerts-db {url!r}: {exc}; expected an SQLAlchemy URL such as "
                                  "sqlite:///alerting.db") from exc
        self._tables: dict[str, sa.Table] = {}

    @property
    def enabled(self) -> bool:
        return self.engine is not None

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()

    def _table(self, conn: sa.engine.Connection, key: str) -> sa.Table | None:
        if key not in self._tables:
            if not sa.inspect(conn).has_table(_TABLES[key]):
                return None  # the service has not started on this database yet
            self._tables[key] = sa.Table(_TABLES[key], sa.MetaData(), autoload_with=conn)
        return self._tables[key]

    def _rows(self, key: str, build: Any) -> list[Any]:
        if self.engine is None:
            return []
        with self.engine.connect() as conn:
            table = self._table(conn, key)
            return [] if table is None else list(conn.execute(build(table)).fetchall())

    def alerts(self, *, open_only: bool = False, limit: int = RECENT) -> Alerts:
        """Firing alerts first, then the most recently updated."""
        def build(t: sa.Table) -> Any:
            q = sa.select(t).order_by((t.c.state == "firing").desc(), t.c.updated_at.desc()).limit(limit)
            return q.where(t.c.state == "firing") if open_only else q
        out = []
        for r in self._rows("alerts", build):
            labels, notes = _json(r.labels), _json(r.annotations)
            out.append({"fingerprint": r.fingerprint, "rule": r.rule, "state": r.state, "labels": labels,
                        "summary": notes.get("summary", ""), "starts_at": utc(r.starts_at), "ends_at": utc(r.ends_at),
                        "updated_at": utc(r.updated_at), "channels": _json(r.channels),
                        "notified": bool(r.notified), "job": f"{labels.get('namespace', '')}/{labels.get('job', '')}"})
        return Alerts(out, self)

    def incidents(self, limit: int = RECENT) -> list[dict[str, Any]]:
        """Open incidents first, then the most recent: each with its root alert, the jobs its page listed as
        affected, and its attached alerts with their state now (an incident merged into another is left out)."""
        def build(t: sa.Table) -> Any:
            return (sa.select(t).where(t.c.state != "merged")
                    .order_by((t.c.state == "open").desc(), t.c.started_at.desc()).limit(limit))
        rows = self._rows("incidents", build)
        if not rows:
            return []
        members = self._incident_members([r.id for r in rows])
        state = self._alert_states({r.root_fingerprint for r in rows}
                                   | {m["fingerprint"] for ms in members.values() for m in ms})

        def alert(m: dict[str, Any]) -> dict[str, Any]:
            now, summary = state.get(m["fingerprint"], ("resolved", ""))
            labels = m.get("labels") or {}
            return {"fingerprint": m["fingerprint"], "job": "/".join(m["job"]), "rule": labels.get("alertname", ""),
                    "kind": labels.get("kind", ""), "state": now, "summary": summary,
                    "starts_at": utc(dt.datetime.fromisoformat(m["starts_at"]))}

        return [{"id": r.id, "state": r.state, "started_at": utc(r.started_at), "resolved_at": utc(r.resolved_at),
                 "root": alert(_json(r.root)), "affects": ["/".join(j) for j in _json(r.affects) or []],
                 "alerts": [alert(m) for m in members.get(r.id, [])]} for r in rows]

    def open_by_job(self) -> dict[str, int]:
        """Firing alerts per ``namespace/job``."""
        counts: dict[str, int] = {}
        for a in self.alerts(open_only=True, limit=10_000):
            counts[a["job"]] = counts.get(a["job"], 0) + 1
        return counts

    def for_job(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return [a for a in self.alerts() if a["labels"].get("namespace") == namespace
                and a["labels"].get("job") == name]

    def _incident_members(self, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Incident id -> its attached alerts as the service recorded them, in the order they were attached."""
        members: dict[str, list[dict[str, Any]]] = {}
        for m in self._rows("incident_alerts", lambda t: sa.select(t).where(t.c.incident_id.in_(ids))
                            .order_by(t.c.attached_at)):
            members.setdefault(m.incident_id, []).append(_json(m.member))
        return members

    def _alert_states(self, fingerprints: set[str]) -> dict[str, tuple[str, str]]:
        """Fingerprint -> (state, summary) of those alerts now."""
        return {r.fingerprint: (r.state, _json(r.annotations).get("summary", "")) for r in self._rows(
            "alerts", lambda t: sa.select(t.c.fingerprint, t.c.state, t.c.annotations).where(
                t.c.fingerprint.in_(sorted(fingerprints))))}

    def silences(self, now: dt.datetime | None = None) -> list[dict[str, Any]]:
        now = now or dt.datetime.now(dt.UTC)
        out = []
        for r in self._rows("silences", lambda t: sa.select(t).order_by(t.c.ends_at.desc()).limit(RECENT)):
            starts, ends = utc(r.starts_at), utc(r.ends_at)
            active = starts is not None and ends is not None and starts <= now < ends
            out.append({"id": r.id, "matchers": _json(r.matchers), "starts_at": starts, "ends_at": ends,
                        "created_by": r.created_by, "comment": r.comment, "active": active})
        return out

    def outbox(self) -> dict[str, Any]:
        """Counts per state and the newest undelivered rows (pending or failed)."""
        counts = {r[0]: r[1] for r in self._rows(
            "outbox", lambda t: sa.select(t.c.state, sa.func.count()).group_by(t.c.state))}
        rows = [{"id": r.id, "channel": r.channel, "state": r.state, "attempts": r.attempts,
                 "created_at": utc(r.created_at), "next_attempt_at": utc(r.next_attempt_at), "last_error": r.last_error}
                for r in self._rows("outbox", lambda t: sa.select(t.c.id, t.c.channel, t.c.state, t.c.attempts,
                                                                  t.c.created_at, t.c.next_attempt_at, t.c.last_error)
                                    .where(t.c.state != "delivered").order_by(t.c.id.desc()).limit(RECENT))]
        return {"counts": counts, "rows": rows}
