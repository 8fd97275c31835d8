"""``RegistryHandler``: the job registry as a consumer service on the shared runtime.

Each decoded event is applied to the registry (``RegistryStore.apply``) in
its own transaction before ``handle`` returns, so the runtime commits only
what the database holds. Applying an event twice is a no-op. A database that
is down is retried by the runtime with backoff; a value the database refuses
(``DataError``, ``IntegrityError``) can never be stored and is dead-lettered.
"""

from __future__ import annotations

from typing import ClassVar

import sqlalchemy as sa

from lineagewire.consumers.runtime import Handler, PermanentError, Record

from .registry_store import DEFAULT_DB_URL, RegistryStore

__all__ = ["RegistryHandler"]


class RegistryHandler(Handler):
    """Keeps every job, run, spec snapshot, transition, dataset and lineage edge in ``db_url``."""

    name: ClassVar[str] = "registry"

    def __init__(self, db_url: str = DEFAULT_DB_URL, store: RegistryStore | None = None) -> None:
        self.db_url = db_url
        self._store = store
        self.applied = 0

    def open(self) -> None:
        if self._store is None:
            self._store = RegistryStore(self.db_url)

    def handle(self, record: Record) -> int:
        assert self._store is not None and record.event is not None
        try:
            applied = self._store.apply(record.event)
        except (sa.exc.DataError, sa.exc.IntegrityError) as exc:
            raise PermanentError(f"{record.where}: the registry database refuses event "
                                 f"{record.event['header']['event_id']}: {exc.orig}") from exc
        self.applied += int(applied)
        return int(applied)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
