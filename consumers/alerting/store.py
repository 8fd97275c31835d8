"""The alert database (SQLAlchemy; SQLite by default, any SQLAlchemy URL): alerts, groups, silences,
the notification outbox, and the rules' facts.

One transaction per ``save`` holds the alert and group changes and the
outbox rows of the notifications they caused, so a crash either keeps both
or neither: an alert marked notified always has its notification waiting in
the outbox, and a resolve is never forgotten. Channels read the outbox
(``Outbox`` in outbox.py); ``alerts silence`` writes silences from another
process, which the service re-reads on its clock.

Several instances share one database. Two things make each alert state change
one notification whoever handles it:

* ``locked(must, may, create)``: the transaction in which an instance decides
  notifications holds the row locks of the groups it decides for (``FOR
  UPDATE``, in key order; the clock's optional groups ``SKIP LOCKED``, so a
  group another instance is deciding is left to it) and reads those groups and
  their live alerts afresh, so it decides on what the database says, never on
  what it remembered. On SQLite the transaction's first statement writes, so
  it holds the database's write lock before it reads.
* ``claim_outbox``: an outbox row is sent by the one instance that claimed it
  (``claimed_by`` until ``claimed_until``); a claim whose lease ran out (its
  instance died) is taken over, and ``claims`` counts them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import pathlib
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from lineagewire.db import Store, insert_ignore, upgrade, upsert

from .dispatch import Alert, Group
from .exceptions import RulesError, StoreError
from .facts import change_row_key, reader_row_prefix
from .incidents import Edge, Incident, Member
from .model import labels_match

__all__ = ["DEFAULT_URL", "STORE", "AlertStore", "Held", "OutboxRow", "Silence", "StoreLineage", "read_incidents",
           "write_edges", "write_incidents"]

DEFAULT_URL = "sqlite:///lineagewire-alerting.db"
#: kinds of alerting_facts rows that are a new group's catch-up (catchup.py), not the rules' facts
CATCHUP, CATCHUP_POS = "catchup", "catchup_pos"

meta = sa.MetaData()
TS = sa.DateTime(timezone=True)

alerts_t = sa.Table(
    "alerting_alerts", meta,
    sa.Column("fingerprint", sa.String(32), primary_key=True),
    sa.Column("rule", sa.String(200), nullable=False),
    sa.Column("labels", sa.JSON, nullable=False),
    sa.Column("annotations", sa.JSON, nullable=False),
    sa.Column("channels", sa.JSON, nullable=False),
    sa.Column("group_key", sa.String(32), nullable=False, index=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("starts_at", TS, nullable=False),
    sa.Column("ends_at", TS),
    sa.Column("updated_at", TS, nullable=False),
    sa.Column("notified", sa.Boolean, nullable=False),
    sa.Column("last_notified_at", TS),
    sa.Column("resolve_pending", sa.Boolean, nullable=False),
)
groups_t = sa.Table(
    "alerting_groups", meta,
    sa.Column("key", sa.String(32), primary_key=True),
    sa.Column("labels", sa.JSON, nullable=False),
    sa.Column("channels", sa.JSON, nullable=False),
    sa.Column("first_pending_at", TS),
    sa.Column("last_sent_at", TS),
)
silences_t = sa.Table(
    "alerting_silences", meta,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("matchers", sa.JSON, nullable=False),
    sa.Column("starts_at", TS, nullable=False),
    sa.Column("ends_at", TS, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("comment", sa.Text, nullable=False),
)
outbox_t = sa.Table(
    "alerting_outbox", meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("channel", sa.String(200), nullable=False, index=True),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),  # pending | delivered | failed
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("next_attempt_at", TS, nullable=False),
    sa.Column("delivered_at", TS),
    sa.Column("last_error", sa.Text),
    # 0002: the row's group (a group's rows go out in order) and its claim by one instance (see ``claim_outbox``)
    sa.Column("group_key", sa.String(32)),
    sa.Column("claimed_by", sa.String(64)),
    sa.Column("claimed_until", TS),
    sa.Column("claims", sa.Integer, nullable=False, default=0, server_default="0"),
    #: claims taken over from another instance whose lease ran out (it died, or froze, mid-send)
    sa.Column("takeovers", sa.Integer, nullable=False, default=0, server_default="0"),
    sa.Index("ix_alerting_outbox_claim", "state", "channel", "group_key", "id"),
)
facts_t = sa.Table(
    "alerting_facts", meta,
    sa.Column("kind", sa.String(16), primary_key=True),
    sa.Column("key", sa.String(500), primary_key=True),
    sa.Column("value", sa.JSON, nullable=False),
    # 0002: the partition ("topic[n]") of a run's, job's or refresh's events: an instance loads those it owns
    sa.Column("partition", sa.String(300), index=True),
)

# 0003 (incidents.py): the lineage the incidents need, job to dataset, whoever's partition the job is on; the
# incidents, and the alerts attached to them
edges_t = sa.Table(
    "alerting_lineage_edges", meta,
    sa.Column("job_namespace", sa.String(200), primary_key=True),
    sa.Column("job", sa.String(500), primary_key=True),
    sa.Column("dataset", sa.String(1000), primary_key=True),
    sa.Column("writes", sa.Boolean, primary_key=True),
    sa.Column("seen_at", TS, nullable=False),
    sa.Index("ix_alerting_lineage_edges_dataset", "dataset", "writes"),
)
incidents_t = sa.Table(
    "alerting_incidents", meta,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("root_fingerprint", sa.String(32), nullable=False, index=True),
    sa.Column("root", sa.JSON, nullable=False),  # the root alert as a member: job, start, labels
    sa.Column("state", sa.String(16), nullable=False, index=True),  # open | resolved | merged
    sa.Column("started_at", TS, nullable=False),
    sa.Column("resolved_at", TS),
    sa.Column("affects", sa.JSON, nullable=False),
)
incident_alerts_t = sa.Table(
    "alerting_incident_alerts", meta,
    sa.Column("incident_id", sa.String(32), primary_key=True),
    sa.Column("fingerprint", sa.String(32), primary_key=True, index=True),
    sa.Column("member", sa.JSON, nullable=False),
    sa.Column("attached_at", TS, nullable=False),
)


def _utc(when: dt.datetime | None) -> dt.datetime | None:
    # SQLite hands datetimes back naive; they were stored as UTC.
    if when is None:
        return None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


@dataclass(frozen=True)
class Silence:
    id: str
    matchers: dict[str, str]
    starts_at: dt.datetime
    ends_at: dt.datetime
    created_by: str
    comment: str

    def active(self, now: dt.datetime) -> bool:
        return self.starts_at <= now < self.ends_at

    def mutes(self, labels: dict[str, str], now: dt.datetime) -> bool:
        return self.active(now) and labels_match(self.matchers, labels)


@dataclass(frozen=True)
class OutboxRow:
    id: int
    channel: str
    payload: dict[str, Any]
    attempts: int
    state: str
    created_at: dt.datetime
    next_attempt_at: dt.datetime
    last_error: str | None
    claims: int = 0
    takeovers: int = 0


class Held:
    """The groups a ``locked`` transaction holds (``keys``) with their rows and live alerts read under the lock;
    ``write`` stores the changes decided on them in the same transaction."""

    def __init__(self, conn: sa.Connection, keys: set[str], groups: list[Group], alerts: list[Alert]) -> None:
        self.conn = conn
        self.keys = keys
        self.groups = groups
        self.alerts = alerts

    def write(self, alerts: Iterable[Alert], groups: Iterable[Group], outbox: Iterable[tuple[str, dict[str, Any]]],
              facts: Iterable[tuple[str, str, dict[str, Any] | None]], now: dt.datetime) -> list[int]:
        return _write(self.conn, alerts, groups, outbox, facts, now)


class AlertStore:
    """The alert database at ``url``; tables are created when missing.

    ``create=False`` (the ``alerts`` commands other than ``silence``): the database must exist already, a
    mistyped ``--database`` is an error rather than a new empty database; ``read_only`` also opens a SQLite file
    read-only.
    """

    def __init__(self, url: str = DEFAULT_URL, *, create: bool = True, read_only: bool = False) -> None:
        try:
            if url.startswith("sqlite"):
                target: str | sa.URL = url if create else _existing_sqlite(url, read_only=read_only)
                self.engine = sa.create_engine(target, connect_args={"timeout": 30})
                if not read_only:
                    sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            else:
                self.engine = sa.create_engine(url, pool_pre_ping=True)
            if create:
                upgrade(self.engine, STORE)
            elif not sa.inspect(self.engine).has_table(alerts_t.name):
                self.engine.dispose()
                raise RulesError(f"database={url!r} is not an alert database (no table {alerts_t.name}); expected "
                                 "the database `lineagewire consume alerting` writes")
        except sa.exc.ArgumentError as exc:
            raise RulesError(f"database={url!r}: not a SQLAlchemy URL ({exc}); expected e.g. "
                             "sqlite:///alerting.db or postgresql+psycopg://user@host/db") from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"alert database {self.engine.url.render_as_string(hide_password=True)}: {exc}") from exc

    def close(self) -> None:
        self.engine.dispose()

    # -- the service's state ------------------------------------------------------------------------

    def load(self) -> tuple[list[Alert], list[Group], list[tuple[str, str, dict[str, Any]]]]:
        """Live alerts (firing, or with a resolve to send), their groups, and the facts."""
        with self._conn() as c:
            alerts = [self._alert(r) for r in c.execute(sa.select(alerts_t).where(
                sa.or_(alerts_t.c.state == "firing", alerts_t.c.resolve_pending.is_(True))))]
            groups = [Group(r.key, r.labels, tuple(r.channels), _utc(r.first_pending_at), _utc(r.last_sent_at))
                      for r in c.execute(sa.select(groups_t))]
            facts = [(r.kind, r.key, r.value) for r in c.execute(
                sa.select(facts_t).where(facts_t.c.kind.not_in((CATCHUP, CATCHUP_POS))))]
        return alerts, groups, facts

    # -- a new group's catch-up (catchup.py): rows of alerting_facts, no table of their own -----------------

    def catchup(self, group: str) -> dict[str, Any] | None:
        with self._conn() as c:
            return c.execute(sa.select(facts_t.c.value).where(facts_t.c.kind == CATCHUP,
                                                              facts_t.c.key == group)).scalar()

    def start_catchup(self, group: str, plan: dict[str, Any]) -> dict[str, Any]:
        """Store ``plan`` unless an instance of the group stored one first; the plan that holds."""
        try:
            with self._begin() as c:
                c.execute(facts_t.insert().values(kind=CATCHUP, key=group, value=plan))
        except StoreError as exc:
            if not isinstance(exc.__cause__, sa.exc.IntegrityError):
                raise
        held = self.catchup(group)
        return held if held is not None else plan

    def finish_catchup(self, group: str, plan: dict[str, Any]) -> None:
        with self._begin() as c:
            c.execute(facts_t.update().where(facts_t.c.kind == CATCHUP, facts_t.c.key == group)
                      .values(value={**plan, "done": True}))
            c.execute(facts_t.delete().where(facts_t.c.kind == CATCHUP_POS,
                                             facts_t.c.key.startswith(group + "\x1f", autoescape=True)))

    def catchup_positions(self, group: str) -> dict[str, int]:
        """Partition key -> the next offset any instance of ``group`` has saved while catching up."""
        prefix = group + "\x1f"
        with self._conn() as c:
            return {r.key[len(prefix):]: int(r.value["pos"]) for r in c.execute(
                sa.select(facts_t.c.key, facts_t.c.value).where(
                    facts_t.c.kind == CATCHUP_POS, facts_t.c.key.startswith(prefix, autoescape=True)))}

    def save(self, alerts: Iterable[Alert], groups: Iterable[Group], outbox: Iterable[tuple[str, dict[str, Any]]],
             facts: Iterable[tuple[str, str, dict[str, Any] | None]], now: dt.datetime) -> list[int]:
        """Write changes and new outbox rows in one transaction (no locks: one writer); the ids of the outbox rows."""
        with self._begin() as c:
            return _write(c, alerts, groups, outbox, facts, now)

    def live(self) -> tuple[list[Alert], list[Group]]:
        """Live alerts (firing, or with a resolve to send) and their groups, as the database has them now."""
        live = sa.or_(alerts_t.c.state == "firing", alerts_t.c.resolve_pending.is_(True))
        with self._conn() as c:
            alerts = [self._alert(r) for r in c.execute(sa.select(alerts_t).where(live))]
            groups = [_group(r) for r in c.execute(sa.select(groups_t).where(
                groups_t.c.key.in_(sa.select(alerts_t.c.group_key).where(live))))]
        return alerts, groups

    def facts(self, partitions: Iterable[str]) -> list[tuple[str, str, dict[str, Any]]]:
        """The rules' facts of ``partitions`` (runs, jobs and refreshes whose events come from them)."""
        with self._conn() as c:
            return [(r.kind, r.key, r.value) for r in c.execute(
                sa.select(facts_t).where(facts_t.c.partition.in_(sorted(set(partitions)))))]

    def shared_facts(self, datasets: Iterable[str]) -> list[tuple[str, str, dict[str, Any]]]:
        """The reader and change rows of ``datasets`` (``Facts.shared_keys``), whichever instance saved them."""
        datasets = sorted(set(datasets))
        if not datasets:
            return []
        readers = sa.or_(*(facts_t.c.key.startswith(reader_row_prefix(d), autoescape=True) for d in datasets))
        with self._conn() as c:
            return [(r.kind, r.key, r.value) for r in c.execute(sa.select(facts_t).where(sa.or_(
                sa.and_(facts_t.c.kind == "reader", readers),
                sa.and_(facts_t.c.kind == "change", facts_t.c.key.in_([change_row_key(d) for d in datasets])))))]

    def written_datasets(self) -> list[dict[str, Any]]:
        """The write states of every dataset with a successful write, whichever instance saved them (writes.py;
        a promise is "never written" only if none of them matches it)."""
        with self._conn() as c:
            return [r.value for r in c.execute(sa.select(facts_t.c.value).where(facts_t.c.kind == "write"))
                    if r.value.get("last_success")]

    def fact_partitions(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str | None]:
        """The partition each fact ``(kind, key)`` has in the database (facts without a row are left out)."""
        keys = sorted(set(keys))
        if not keys:
            return {}
        with self._conn() as c:
            return {(r.kind, r.key): r.partition for r in c.execute(
                sa.select(facts_t.c.kind, facts_t.c.key, facts_t.c.partition).where(
                    sa.tuple_(facts_t.c.kind, facts_t.c.key).in_(keys)))}

    @contextlib.contextmanager
    def locked(self, must: Iterable[str], may: Iterable[str] = (), create: Iterable[Group] = ()) -> Iterator[Held]:
        """One transaction holding the locks of groups ``must`` (waiting for them) and of those of ``may`` no other
        transaction holds (skipping the others), with ``create`` inserted first where missing; yields them read
        afresh (``Held``). Keys of ``must`` without a row are not held (no alert of theirs exists)."""
        must, may = sorted(set(must)), sorted(set(may) - set(must))
        fresh = sorted(({"key": g.key, "labels": g.labels, "channels": list(g.channels), "first_pending_at": None,
                         "last_sent_at": None} for g in create), key=lambda r: str(r["key"]))
        with self._begin() as c:
            if c.dialect.name == "sqlite":
                # A write first: it takes SQLite's write lock, so what is read next stays true until the commit.
                c.execute(groups_t.update().where(sa.false()).values(key=groups_t.c.key))
            insert_ignore(c, groups_t, fresh)
            keys: set[str] = set()
            if must:
                keys.update(c.execute(sa.select(groups_t.c.key).where(groups_t.c.key.in_(must))
                                      .order_by(groups_t.c.key).with_for_update()).scalars())
            if may:
                keys.update(c.execute(sa.select(groups_t.c.key).where(groups_t.c.key.in_(may))
                                      .order_by(groups_t.c.key).with_for_update(skip_locked=True)).scalars())
            groups: list[Group] = []
            alerts: list[Alert] = []
            if keys:
                groups = [_group(r) for r in c.execute(sa.select(groups_t).where(groups_t.c.key.in_(keys)))]
                alerts = [self._alert(r) for r in c.execute(sa.select(alerts_t).where(
                    alerts_t.c.group_key.in_(keys),
                    sa.or_(alerts_t.c.state == "firing", alerts_t.c.resolve_pending.is_(True))))]
            yield Held(c, keys, groups, alerts)

    # -- alerts, for the CLI -------------------------------------------------------------------------

    def list_alerts(self, *, include_resolved: bool = False) -> list[Alert]:
        q = sa.select(alerts_t).order_by(alerts_t.c.starts_at)
        if not include_resolved:
            q = q.where(alerts_t.c.state == "firing")
        with self._conn() as c:
            return [self._alert(r) for r in c.execute(q)]

    def find_alert(self, prefix: str) -> list[Alert]:
        with self._conn() as c:
            return [self._alert(r) for r in c.execute(sa.select(alerts_t).where(
                alerts_t.c.fingerprint.startswith(prefix, autoescape=True)))]

    @staticmethod
    def _alert(r: Any) -> Alert:
        return Alert(r.fingerprint, r.rule, r.labels, r.annotations, tuple(r.channels), r.group_key,
                     starts_at=_utc(r.starts_at), updated_at=_utc(r.updated_at), state=r.state,  # type: ignore[arg-type]
                     ends_at=_utc(r.ends_at), notified=r.notified, last_notified_at=_utc(r.last_notified_at),
                     resolve_pending=r.resolve_pending)

    # -- silences ------------------------------------------------------------------------------------

    def add_silence(self, matchers: dict[str, str], ends_at: dt.datetime, *, comment: str, created_by: str,
                    starts_at: dt.datetime | None = None) -> Silence:
        s = Silence(str(uuid.uuid4()), dict(matchers), starts_at or dt.datetime.now(dt.UTC), ends_at, created_by,
                    comment)
        with self._begin() as c:
            c.execute(silences_t.insert().values(id=s.id, matchers=s.matchers, starts_at=s.starts_at,
                                                 ends_at=s.ends_at, created_by=s.created_by, comment=s.comment))
        return s

    def silences(self, now: dt.datetime | None = None) -> list[Silence]:
        """All silences, or those not yet ended at ``now``."""
        q = sa.select(silences_t).order_by(silences_t.c.starts_at)
        if now is not None:
            q = q.where(silences_t.c.ends_at > now)
        with self._conn() as c:
            return [Silence(r.id, r.matchers, _utc(r.starts_at), _utc(r.ends_at), r.created_by,  # type: ignore[arg-type]
                            r.comment) for r in c.execute(q)]

    def expire_silence(self, prefix: str, now: dt.datetime) -> list[str]:
        with self._begin() as c:
            ids = [r.id for r in c.execute(sa.select(silences_t.c.id).where(
                silences_t.c.id.startswith(prefix, autoescape=True), silences_t.c.ends_at > now))]
            if len(ids) == 1:
                c.execute(silences_t.update().where(silences_t.c.id == ids[0]).values(ends_at=now))
        return ids

    # -- outbox --------------------------------------------------------------------------------------

    def claim_outbox(self, owner: str, now: dt.datetime, lease: float, skip: Iterable[str] = ()) -> OutboxRow | None:
        """Claim the oldest due row no live claim holds (none held, or its lease ended: its instance died) for
        ``owner`` until ``now + lease``, and return it; None when there is none. A row waits while an earlier row of
        its group and channel is pending, so a group's notifications go out in order whoever sends them. Rows of
        the channels in ``skip`` (known to be down) are left alone."""
        earlier = outbox_t.alias("earlier")
        before = sa.exists().where(earlier.c.channel == outbox_t.c.channel, earlier.c.group_key == outbox_t.c.group_key,
                                   earlier.c.state == "pending", earlier.c.id < outbox_t.c.id)
        pick = (sa.select(outbox_t.c.id)
                .where(outbox_t.c.state == "pending", outbox_t.c.next_attempt_at <= now,
                       sa.or_(outbox_t.c.claimed_until.is_(None), outbox_t.c.claimed_until <= now), ~before,
                       *([outbox_t.c.channel.not_in(sorted(set(skip)))] if skip else []))
                .order_by(outbox_t.c.id).limit(1).with_for_update(skip_locked=True).scalar_subquery())
        with self._begin() as c:
            row = c.execute(outbox_t.update().where(outbox_t.c.id == pick)
                            .values(claimed_by=owner, claimed_until=now + dt.timedelta(seconds=lease),
                                    claims=outbox_t.c.claims + 1,
                                    # a lease that ran out, not released by a mark: its instance died mid-send
                                    takeovers=outbox_t.c.takeovers + sa.case(
                                        (outbox_t.c.claimed_until.is_not(None), 1), else_=0))
                            .returning(*outbox_t.c)).first()
        return None if row is None else self._outbox(row)

    def outbox(self, state: str | None = None) -> list[OutboxRow]:
        q = sa.select(outbox_t).order_by(outbox_t.c.id)
        if state is not None:
            q = q.where(outbox_t.c.state == state)
        with self._conn() as c:
            return [self._outbox(r) for r in c.execute(q)]

    @staticmethod
    def _outbox(r: Any) -> OutboxRow:
        return OutboxRow(r.id, r.channel, r.payload, r.attempts, r.state, _utc(r.created_at),  # type: ignore[arg-type]
                         _utc(r.next_attempt_at), r.last_error, r.claims, r.takeovers)  # type: ignore[arg-type]

    def mark_outbox(self, row_id: int, *, state: str, attempts: int, now: dt.datetime,
                    next_attempt_at: dt.datetime | None = None, error: str | None = None,
                    owner: str | None = None) -> bool:
        """Record an attempt of row ``row_id``; with ``owner``, only while that instance still holds its claim.
        False when the claim was lost (taken over: the row is another instance's now)."""
        # The claim ends with the attempt: a row to retry is free for whichever instance is there at its next attempt.
        values: dict[str, Any] = {"state": state, "attempts": attempts, "last_error": error, "claimed_until": None}
        if state == "delivered":
            values["delivered_at"] = now
        if next_attempt_at is not None:
            values["next_attempt_at"] = next_attempt_at
        where = [outbox_t.c.id == row_id] + ([outbox_t.c.claimed_by == owner] if owner is not None else [])
        with self._begin() as c:
            return bool(c.execute(outbox_t.update().where(*where).values(**values)).rowcount)

    def mark_delivered(self, rows: list[tuple[int, int]], now: dt.datetime, owner: str | None = None) -> bool:
        """Mark ``(row id, attempts)`` delivered, all in one statement; with ``owner``, only the rows that instance
        still holds the claim of. False when some were not (their claim was taken over)."""
        if not rows:
            return True
        where = [outbox_t.c.id == sa.bindparam("b_id")] + ([outbox_t.c.claimed_by == owner] if owner else [])
        with self._begin() as c:
            res = c.execute(outbox_t.update().where(*where)
                            .values(state="delivered", attempts=sa.bindparam("b_attempts"), last_error=None,
                                    delivered_at=now, claimed_until=None),
                            [{"b_id": row_id, "b_attempts": attempts} for row_id, attempts in rows])
            return res.rowcount in (-1, len(rows))

    def renew_claim(self, row_id: int, owner: str, until: dt.datetime) -> bool:
        """Extend ``owner``'s claim of row ``row_id`` to ``until`` (while a send lasts); False when it was lost."""
        with self._begin() as c:
            return bool(c.execute(outbox_t.update().where(
                outbox_t.c.id == row_id, outbox_t.c.claimed_by == owner, outbox_t.c.state == "pending",
                outbox_t.c.claimed_until.is_not(None)).values(claimed_until=until)).rowcount)

    def prune_outbox(self, before: dt.datetime) -> int:
        with self._begin() as c:
            return int(c.execute(outbox_t.delete().where(outbox_t.c.state == "delivered",
                                                         outbox_t.c.delivered_at < before)).rowcount)

    # -- incidents (incidents.py) ---------------------------------------------------------------------

    def incidents(self, *, open_only: bool = True, limit: int | None = None) -> list[Incident]:
        """The open incidents with their attached alerts (``open_only=False``: the most recent of every state)."""
        with self._conn() as c:
            return read_incidents(c, open_only=open_only, limit=limit)

    def prune_incidents(self, before: dt.datetime) -> None:
        with self._begin() as c:
            prune_incidents(c, before)

    # -- plumbing ------------------------------------------------------------------------------------

    def _conn(self) -> Any:
        return self._guard(self.engine.connect)

    def _begin(self) -> Any:
        return self._guard(self.engine.begin)

    @contextlib.contextmanager
    def _guard(self, opener: Any) -> Iterator[sa.Connection]:
        """A connection or transaction whose database errors become ``StoreError`` (retried by the runtime)."""
        try:
            with opener() as c:
                yield c
        except SQLAlchemyError as exc:
            raise StoreError(f"alert database {self.engine.url.render_as_string(hide_password=True)}: "
                             f"{exc}") from exc


def _group(r: Any) -> Group:
    return Group(r.key, r.labels, tuple(r.channels), _utc(r.first_pending_at), _utc(r.last_sent_at))


def _write(c: sa.Connection, alerts: Iterable[Alert], groups: Iterable[Group],
           outbox: Iterable[tuple[str, dict[str, Any]]], facts: Iterable[tuple[str, str, dict[str, Any] | None]],
           now: dt.datetime) -> list[int]:
    """Write changes and new outbox rows on ``c`` (in its transaction); the ids of the outbox rows.

    One statement per table and kind of change, each executed for all its rows (executemany): a poll batch
    of a thousand events is a handful of statements, not thousands compiled one by one.
    """
    alert_rows = {a.fingerprint: {
        "fingerprint": a.fingerprint, "rule": a.rule, "labels": a.labels, "annotations": a.annotations,
        "channels": list(a.channels), "group_key": a.group_key, "state": a.state, "starts_at": a.starts_at,
        "ends_at": a.ends_at, "updated_at": a.updated_at, "notified": a.notified,
        "last_notified_at": a.last_notified_at, "resolve_pending": a.resolve_pending} for a in alerts}
    group_rows = {g.key: {"key": g.key, "labels": g.labels, "channels": list(g.channels),
                          "first_pending_at": g.first_pending_at, "last_sent_at": g.last_sent_at} for g in groups}
    fact_rows = {(kind, key): value for kind, key, value in facts}  # the last change of a fact wins
    outbox_rows = [{"channel": channel, "payload": payload, "created_at": now, "state": "pending", "attempts": 0,
                    "next_attempt_at": now, "group_key": payload.get("group_key"), "claims": 0}
                   for channel, payload in outbox]
    upsert(c, alerts_t, list(alert_rows.values()), keys=["fingerprint"])
    upsert(c, groups_t, list(group_rows.values()), keys=["key"])
    if fact_rows:
        c.execute(facts_t.delete().where(facts_t.c.kind == sa.bindparam("b_kind"),
                                         facts_t.c.key == sa.bindparam("b_key")),
                  [{"b_kind": kind, "b_key": key} for kind, key in fact_rows])
        kept = [{"kind": kind, "key": key, "value": value, "partition": value.get("partition")}
                for (kind, key), value in fact_rows.items() if value is not None]
        if kept:
            c.execute(facts_t.insert(), kept)
    if not outbox_rows:
        return []
    res = c.execute(outbox_t.insert().returning(outbox_t.c.id, sort_by_parameter_order=True), outbox_rows)
    return [int(row[0]) for row in res]


def _existing_sqlite(url: str, *, read_only: bool) -> sa.URL:
    """``url`` of a SQLite file that must exist (RulesError otherwise), opened read-only if asked."""
    parsed = sa.make_url(url)
    name = parsed.database or ""
    if not name or name == ":memory:" or name.startswith("file:"):
        return parsed  # in memory, or a URI the user spelled out: nothing to check
    path = pathlib.Path(name)
    if not path.is_file():
        raise RulesError(f"alert database {url!r} does not exist (no file {str(path)!r}); expected the database "
                         "`lineagewire consume alerting` writes (--database, or the rules file's database:)")
    if not read_only:
        return parsed
    return parsed.set(database=f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro",
                      query={**parsed.query, "uri": "true"})


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets `lineagewire alerts ...` read and write silences while the service writes.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


# -- incidents (incidents.py): the lineage edges, open incidents and their alerts --------------------------


class StoreLineage:
    """``incidents.Lineage`` answered from the edges table on ``conn`` (in the caller's transaction), edges seen
    since ``since`` only."""

    def __init__(self, conn: sa.Connection, since: dt.datetime) -> None:
        self.conn, self.since = conn, since

    def _step(self, jobs: set[tuple[str, str]], start_writes: bool) -> set[tuple[str, str]]:
        if not jobs:
            return set()
        mine, theirs = edges_t.alias("mine"), edges_t.alias("theirs")
        q = (sa.select(theirs.c.job_namespace, theirs.c.job).distinct()
             .join_from(mine, theirs, sa.and_(theirs.c.dataset == mine.c.dataset,
                                              theirs.c.writes.is_(not start_writes)))
             .where(sa.tuple_(mine.c.job_namespace, mine.c.job).in_(sorted(jobs)),
                    mine.c.writes.is_(start_writes), mine.c.seen_at >= self.since, theirs.c.seen_at >= self.since))
        return {(r[0], r[1]) for r in self.conn.execute(q)}

    def upstream(self, jobs: set[tuple[str, str]]) -> set[tuple[str, str]]:
        return self._step(jobs, False)

    def downstream(self, jobs: set[tuple[str, str]]) -> set[tuple[str, str]]:
        return self._step(jobs, True)


def write_edges(conn: sa.Connection, edges: Iterable[tuple[Edge, dt.datetime]]) -> None:
    """Record that each job read or wrote each dataset, last seen at the time given (the latest wins)."""
    rows = {(e.job[0], e.job[1], e.dataset, e.writes): when for e, when in edges}
    upsert(conn, edges_t, [{"job_namespace": ns, "job": job, "dataset": ds, "writes": w, "seen_at": when}
                           for (ns, job, ds, w), when in sorted(rows.items(), key=lambda kv: kv[0])],
           keys=["job_namespace", "job", "dataset", "writes"])


def _member(doc: dict[str, Any]) -> Member:
    return Member(doc["fingerprint"], (doc["job"][0], doc["job"][1]), dt.datetime.fromisoformat(doc["starts_at"]),
                  doc.get("labels") or {})


def _member_json(m: Member) -> dict[str, Any]:
    return {"fingerprint": m.fingerprint, "job": list(m.job), "starts_at": m.starts_at.isoformat(),
            "labels": m.labels}


def read_incidents(conn: sa.Connection, *, open_only: bool = True, limit: int | None = None) -> list[Incident]:
    """The open incidents (or the most recent ones, of every state) with their attached alerts."""
    q = sa.select(incidents_t).order_by(incidents_t.c.started_at.desc(), incidents_t.c.id)
    q = q.where(incidents_t.c.state == "open") if open_only else q.where(incidents_t.c.state != "merged")
    if limit is not None:
        q = q.limit(limit)
    found = {r.id: Incident(r.id, _member(r.root), _utc(r.started_at), [(j[0], j[1]) for j in r.affects],  # type: ignore[arg-type]
                            state=r.state, resolved_at=_utc(r.resolved_at)) for r in conn.execute(q)}
    if found:
        for r in conn.execute(sa.select(incident_alerts_t).where(incident_alerts_t.c.incident_id.in_(sorted(found)))
                              .order_by(incident_alerts_t.c.attached_at)):
            m = _member(r.member)
            found[r.incident_id].members[m.fingerprint] = m
    return list(found.values())


def write_incidents(conn: sa.Connection, incidents: Iterable[Incident], attached: Iterable[tuple[str, Member]],
                    now: dt.datetime) -> None:
    """Store incidents opened, resolved or merged, and the alerts attached to them (once each)."""
    upsert(conn, incidents_t, [{"id": i.id, "root_fingerprint": i.root.fingerprint, "root": _member_json(i.root),
                                "state": i.state, "started_at": i.started_at, "resolved_at": i.resolved_at,
                                "affects": [list(j) for j in i.affects]}
                               for i in sorted(incidents, key=lambda i: i.id)], keys=["id"])
    insert_ignore(conn, incident_alerts_t, [{"incident_id": iid, "fingerprint": m.fingerprint,
                                             "member": _member_json(m), "attached_at": now}
                                            for iid, m in attached])


def prune_incidents(conn: sa.Connection, before: dt.datetime) -> None:
    """Forget lineage edges not seen since ``before`` and incidents that ended before it."""
    conn.execute(edges_t.delete().where(edges_t.c.seen_at < before))
    ended = sa.select(incidents_t.c.id).where(incidents_t.c.state != "open", incidents_t.c.resolved_at < before)
    conn.execute(incident_alerts_t.delete().where(incident_alerts_t.c.incident_id.in_(ended)))
    conn.execute(incidents_t.delete().where(incidents_t.c.state != "open", incidents_t.c.resolved_at < before))

#: the tables above and their migration history (``migrations/`` beside this package's code)
STORE = Store("alerting", meta, "lineagewire.consumers.alerting", baseline="0001")
