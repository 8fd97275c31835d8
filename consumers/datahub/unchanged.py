"""The memory that skips re-emitting an aspect identical to the last one a sink took for its URN."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from datahub.emitter.aspect import ASPECT_MAP
from datahub.metadata.schema_classes import ChangeTypeClass

from .proposals import JSON, Proposal

__all__ = ["Unchanged", "fingerprint"]

Mark = tuple[tuple[str, str, str], bytes | None]


def fingerprint(text: str | bytes) -> bytes:
    """What ``Unchanged`` compares: a 16-byte hash of an aspect's JSON text (as UTF-8 bytes)."""
    return hashlib.blake2b(text if isinstance(text, bytes) else text.encode(), digest_size=16).digest()


def _timeseries(aspect_name: str | None) -> bool:
    cls = ASPECT_MAP.get(aspect_name or "")
    return cls is not None and cls.ASPECT_TYPE == "timeseries"


class Unchanged:
    """Which proposals of an event can be skipped because the same aspect was the last one emitted for its URN.

    Only upserts of versioned aspects are skipped; timeseries aspects (run events) are points, never skipped.
    A patch of an aspect forgets what was emitted for it (its state is no longer the last upsert). The memory
    holds ``size`` entries (the oldest emitted are forgotten first, which only means a re-emit) and lives in
    the process: a new process, or a replay into a fresh DataHub, emits everything once again. ``select``
    does not change the memory; ``commit`` records what the sink took, so a failed write skips nothing on
    its retry. A sink that drops what it took without delivering it (partitions revoked) calls ``forget``.

    The memory is kept per ``scope``, the job whose event the proposals come from: a job's events are in
    order on one partition, but two jobs' events (on two partitions) interleave differently from one
    consumption to the next. Were the memory shared, an aspect both jobs emit (a dataset they both read)
    would go out with whichever job came first, and a replay of the same range would not give the same
    records. Per job, what is written depends only on that job's own events. The price: such an aspect is
    written once per job rather than once.
    """

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        # oldest emitted first; an OrderedDict, as forgetting the first of a plain dict gets slower with each
        # one forgotten (it scans the holes they leave: ~30 µs each at 100,000 entries, until the dict resizes)
        self._last: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._last)

    def select(self, proposals: list[Proposal], scope: str = "") -> tuple[list[Proposal], list[Mark]]:
        """(the proposals to emit, the changes to ``commit`` once the sink took them)."""
        fresh: list[Proposal] = []
        marks: list[Mark] = []
        pending: dict[tuple[str, str, str], bytes | None] = {}
        for p in proposals:
            key = (scope, p.entityUrn or "", p.aspectName or "")
            if p.changeType != ChangeTypeClass.UPSERT or p.aspect is None or p.aspect.contentType != JSON:
                pending[key] = None
                marks.append((key, None))
                fresh.append(p)
                continue
            if _timeseries(p.aspectName):
                fresh.append(p)
                continue
            fp = fingerprint(p.aspect.value)
            last = pending[key] if key in pending else self._last.get(key)
            if last == fp:
                continue
            pending[key] = fp
            marks.append((key, fp))
            fresh.append(p)
        return fresh, marks

    def commit(self, marks: Iterable[Mark]) -> None:
        last = self._last
        for key, fp in marks:
            last.pop(key, None)
            if fp is not None:
                last[key] = fp
        while len(last) > self.size:
            last.popitem(last=False)

    def forget(self) -> None:
        """Forget everything (what was taken may not have been delivered): the next of each is emitted."""
        self._last.clear()

    def seed(self, record: dict[str, Any], scope: str = "") -> None:
        """Take a record already in the output (the file after a restart) as emitted, in output order."""
        key = (scope, record.get("entityUrn") or "", record.get("aspectName") or "")
        aspect = record.get("aspect") or {}
        if _timeseries(key[2]):
            return
        if record.get("changeType") != ChangeTypeClass.UPSERT or "json" not in aspect:
            self.commit([(key, None)])
        else:
            self.commit([(key, fingerprint(json.dumps(aspect["json"])))])
