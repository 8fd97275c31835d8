"""Delta Lake table versions: the version a Delta file index reads and the version a write committed.

The file and V1 connectors need these for Delta tables read or written by path; ``delta`` (the Delta
commands) builds on those connectors. Kept apart so that dependencies point one way:
``delta`` -> ``v1`` -> ``files`` -> ``delta_log``.
"""

from __future__ import annotations

import logging
from typing import Any

from lineagewire.schemas.events import Dataset

from ... import internals
from ..context import Extraction

__all__ = ["add_write_version", "version_after_write", "version_read"]

log = logging.getLogger(__name__)


def version_read(file_index: Any) -> str | None:
    """The Delta version a Delta file index reads (time travel included), else None."""
    # The Delta file indexes differ by how the table was read: the current snapshot (TahoeLogFileIndex),
    # a time-travel read (a version pinned at analysis), a prepared scan.
    for way in (lambda: file_index.getSnapshot().version(), lambda: file_index.version(),
                lambda: file_index.snapshotAtAnalysis().version()):
        try:
            return str(way())
        except Exception:  # noqa: BLE001 - not this kind of index: try the next
            continue
    return None


def version_after_write(ctx: Extraction, path: str) -> str | None:
    """The version of the Delta table at ``path`` once the write committed (the listener runs after it)."""
    session = ctx.session()
    if session is None:
        return None
    try:
        jvm: Any = internals.active_jvm()
        # forTable returns the DeltaLog this JVM just committed through: its snapshot is the new version.
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(session, path)
        return str(delta_log.unsafeVolatileSnapshot().version())
    except Exception:  # noqa: BLE001 - a Delta version is extra information: leave it out
        log.debug("no Delta version for %s", path, exc_info=True)
        return None


def add_write_version(ctx: Extraction, ds: Dataset) -> None:
    """Put the version a write to a Delta dataset committed into its properties."""
    if ds["format"] != "delta":
        return
    ds["properties"].pop("version", None)
    version = version_after_write(ctx, ds["name"] if ds["namespace"] == "file" else f"{ds['namespace']}/{ds['name']}")
    if version is not None:
        ds["properties"]["version"] = version
