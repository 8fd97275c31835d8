"""Breaking changes: what a writer did to a dataset, who reads what of it, and which readers that breaks.

Pure values and one pure function, so the classification is unit-tested
without a database, a broker or Spark:

* ``Change``: a change of one dataset that can break its readers: columns
  removed or retyped (a renamed column is a removed one, plus an added one
  that breaks nobody), or the dataset dropped, renamed or truncated.
* ``Reads``: one reader job of a dataset, as its latest run read it: the
  columns (from its column lineage: every input field of its output columns),
  or the whole dataset (it read the dataset, and no column lineage names its
  columns: an action without outputs, such as ``count()``), and whether that
  run's lineage was complete.
* ``classify(change, readers)``: each reader is **breaking** (it reads a
  changed column, or the dataset itself was dropped, renamed or truncated),
  **safe** (its complete lineage reads none of the changed columns) or
  **unknown** (its lineage was incomplete and names none of them: it may read
  them through what was cut). Never "safe" on incomplete lineage.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LIFECYCLE_BREAKING", "WHOLE", "Change", "Classification", "Reads", "base_type", "classify", "touches"]

#: lifecycle changes that break every reader of the dataset (CREATE, ALTER and OVERWRITE do not by themselves:
#: the columns they change are compared like any other write)
LIFECYCLE_BREAKING = ("DROP", "RENAME", "TRUNCATE")


def base_type(flat_type: str) -> str:
    """A flattened field type without its nullability (``"int not null"`` -> ``"int"``): a column made nullable
    or not null still reads as the same column."""
    return flat_type.removesuffix(" not null")


def touches(read: str, changed: str) -> bool:
    """Does reading column ``read`` read ``changed``? The same column, or one inside the other (``s`` and
    ``s.x`` of a struct)."""
    return read == changed or changed.startswith(read + ".") or read.startswith(changed + ".")


@dataclass(frozen=True)
class Change:
    """One change of ``dataset`` (``namespace/name``) by a writer run that can break its readers."""

    dataset: str
    writer_namespace: str
    writer_job: str
    writer_run: str
    at: dt.datetime
    #: the writer job's tags when it made the change (the alert's labels are built from them, firing and clearing)
    writer_tags: dict[str, str] = field(default_factory=dict)
    removed: tuple[str, ...] = ()
    #: "col: old -> new", base types only
    retyped: tuple[str, ...] = ()
    #: DROP, RENAME or TRUNCATE; None for a change of columns
    lifecycle: str | None = None
    #: for a RENAME: the dataset's new ``namespace/name``
    renamed_to: str | None = None
    #: the removed and retyped columns' types before the change: the schema is compatible again when they are back
    old_types: dict[str, str] = field(default_factory=dict)
    #: the writer run ended: the change is final (a run that drops a table and creates it again made no change)
    settled: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the change takes away from readers (removed, or no longer of the type they read)."""
        return self.removed + tuple(r.split(": ", 1)[0] for r in self.retyped)

    @property
    def ident(self) -> str:
        """What changed, without the run or the time: with the dataset, the alert's identity (a re-run making the
        same change is the same alert)."""
        if self.lifecycle is not None:
            return self.lifecycle + (f" to {self.renamed_to}" if self.renamed_to else "")
        return self.describe()

    def describe(self) -> str:
        if self.lifecycle == "RENAME":
            return f"renamed to {self.renamed_to}" if self.renamed_to else "renamed"
        if self.lifecycle is not None:
            return {"DROP": "dropped", "TRUNCATE": "truncated"}.get(self.lifecycle, self.lifecycle.lower())
        parts = []
        if self.removed:
            parts.append("removed " + ", ".join(self.removed))
        if self.retyped:
            parts.append("retyped " + ", ".join(self.retyped))
        return "; ".join(parts)

    def restored_by(self, fields: dict[str, str] | None, lifecycle: str | None) -> bool:
        """Does a later write of the dataset (its flattened ``fields``, None when it names none, and its
        ``lifecycle`` change) make it compatible with its readers again? A dropped, truncated or renamed-away
        dataset is back when it is written again (not dropped nor truncated); removed and retyped columns are
        back when each has its old type again."""
        if lifecycle in ("DROP", "TRUNCATE"):
            return False
        if self.lifecycle is not None:
            return lifecycle != "RENAME"
        if fields is None:
            return False
        return all(c in fields and base_type(fields[c]) == base_type(t) for c, t in self.old_types.items())

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "writer_namespace": self.writer_namespace, "writer_job": self.writer_job,
                "writer_run": self.writer_run, "at": self.at.isoformat(), "writer_tags": self.writer_tags,
                "removed": list(self.removed), "retyped": list(self.retyped), "lifecycle": self.lifecycle,
                "renamed_to": self.renamed_to, "old_types": self.old_types, "settled": self.settled}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Change:
        return cls(dataset=d["dataset"], writer_namespace=d["writer_namespace"], writer_job=d["writer_job"],
                   writer_run=d["writer_run"], at=dt.datetime.fromisoformat(d["at"]), writer_tags=d["writer_tags"],
                   removed=tuple(d["removed"]), retyped=tuple(d["retyped"]), lifecycle=d["lifecycle"],
                   renamed_to=d["renamed_to"], old_types=d["old_types"], settled=d["settled"])


@dataclass(frozen=True)
class Reads:
    """What one reader job read of one dataset in its latest run that read it."""

    namespace: str
    job: str
    run_id: str
    #: columns read; None: the whole dataset as far as we know (no column lineage names its columns)
    columns: frozenset[str] | None
    #: the run's lineage of this dataset was complete (lineage_complete of every action that read it)
    complete: bool
    seen: dt.datetime
    #: the reader job's tags (its owner is one of them)
    tags: dict[str, str] = field(default_factory=dict)

    def merged(self, other: Reads) -> Reads:
        """This run's reads and ``other``'s (a later action of the same run) together."""
        cols = None if self.columns is None or other.columns is None else self.columns | other.columns
        return Reads(self.namespace, self.job, self.run_id, cols, self.complete and other.complete,
                     max(self.seen, other.seen), other.tags or self.tags)

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "job": self.job, "run_id": self.run_id,
                "columns": sorted(self.columns) if self.columns is not None else None, "complete": self.complete,
                "seen": self.seen.isoformat(), "tags": self.tags}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Reads:
        cols = d["columns"]
        return cls(d["namespace"], d["job"], d["run_id"], frozenset(cols) if cols is not None else None,
                   d["complete"], dt.datetime.fromisoformat(d["seen"]), d.get("tags") or {})


@dataclass(frozen=True)
class Classification:
    """Readers of a changed dataset, by what the change does to them."""

    #: (reader, what of the change it reads: columns, or ["the whole dataset"])
    breaking: list[tuple[Reads, list[str]]] = field(default_factory=list)
    safe: list[Reads] = field(default_factory=list)
    unknown: list[Reads] = field(default_factory=list)


WHOLE = "the whole dataset"


def classify(change: Change, readers: list[Reads], *, since: dt.datetime | None = None) -> Classification:
    """Each reader of ``change.dataset`` seen at or after ``since`` (all when None) as breaking, safe or unknown
    (see the module docstring). The writer job itself is left out: it made the change."""
    out = Classification()
    for r in sorted(readers, key=lambda r: (r.namespace, r.job)):
        if (r.namespace, r.job) == (change.writer_namespace, change.writer_job):
            continue
        if since is not None and r.seen < since:
            continue
        what = _what_it_reads(change, r)
        if what:
            out.breaking.append((r, what))
        elif r.complete:
            out.safe.append(r)
        else:
            out.unknown.append(r)
    return out


def _what_it_reads(change: Change, reader: Reads) -> list[str]:
    """What of ``change`` ``reader`` reads (``[]``: none of it): the changed columns it reads (all of them when
    it reads the whole dataset), or for a dropped, renamed or truncated dataset every column it reads."""
    if reader.columns is None:
        return [WHOLE] if change.lifecycle is not None else list(change.columns)
    if change.lifecycle is not None:
        return sorted(reader.columns) or [WHOLE]
    return [c for c in change.columns if any(touches(read, c) for read in reader.columns)]
