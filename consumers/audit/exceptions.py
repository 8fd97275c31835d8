"""Errors of the audit tools (archive, query, replay from the archive, registry).

    LineagewireError (lineagewire.exceptions)
    └── AuditError
        ├── ArchiveError        the archive cannot be read or is not what was expected
        └── QueryError          an ``audit query`` SQL statement failed (the message is DuckDB's)

The CLI turns each into one line and exit code 2.
"""

from __future__ import annotations

from lineagewire.exceptions import LineagewireError

__all__ = ["ArchiveError", "AuditError", "QueryError"]


class AuditError(LineagewireError):
    """Base class of the audit tools' errors."""


class ArchiveError(AuditError):
    """The archive cannot be read, or a file in it is not an archive file."""


class QueryError(AuditError):
    """A SQL statement over the archive failed."""
