"""SQL stores: their schema migrations and the one upsert, for SQLite and PostgreSQL.

Three services keep state in an SQL database: the scheduler (workflows, refreshes), the alerting
service (alerts, silences, outbox, facts) and the job registry (jobs, runs, datasets, lineage). Each
is a ``Store``: its SQLAlchemy metadata and an Alembic migration history in a ``migrations/`` folder
beside its code, with its own version table (``lineagewire_<name>_version``), so two stores can share
one database and be upgraded apart. The refresh runner's small SQLite file of completed commands is a
``Store`` too (upgraded when the runner opens it; no ``lineagewire db`` command, being a local file).

* ``upgrade(engine, store)`` brings a database to the newest schema; each service calls it at
  start, and ``lineagewire db upgrade`` lets an operator do it ahead of a deployment. A database made
  before the migrations existed (tables, no version table) is stamped at the first revision, whose
  schema it has, then upgraded. Two instances starting at once are serialised (an advisory lock on
  PostgreSQL, SQLite's write lock).
* ``current(engine, store)`` is the revision a database is at (``lineagewire db current``).
* ``insert_ignore`` and ``upsert`` are the one dialect-aware ``INSERT ... ON CONFLICT`` of the stores.
"""

from __future__ import annotations

from .migrate import Store, current, head, upgrade
from .upsert import insert_ignore, upsert

__all__ = ["Store", "current", "head", "insert_ignore", "upgrade", "upsert"]
