"""Aspects that differ from one event to the next only by a time: rendered once per content.

An output dataset's ``upstreamLineage`` carries the event time in each upstream's audit stamp, a run event
its ``timestampMillis``: the translator builds them for every event from content that repeats (a job's
lineage, a run status), only that number changing. ``Stamped(build)`` makes them: ``stamped(when)`` is
``build(when)``, an acryl-datahub aspect object as any other, and ``text(aspect)`` gives the JSON of an
aspect so made (``json.dumps(aspect_obj(aspect))``, what the renderer writes) as the content's template
with the time put in, instead of a walk of the object. The last ``KEEP`` aspects made are remembered by
identity until rendered (a sink renders an event's aspects while handling that event); any other aspect is
rendered in full.

The template is the rendering of ``build(_S1)`` cut at each occurrence of ``_S1``'s digits. It is kept
only if putting ``_S2`` (as many characters, other digits) in those places gives exactly the rendering of
``build(_S2)``: were the digits also in the content (in a string), that place would differ, so the
template is refused and every aspect of that content rendered in full. ``build`` must use its argument
only as the value of long fields (avrogen renders a long as its digits, at a place that does not depend
on the value). A time that is not an int in the long range is rendered in full too (which raises
avrogen's error for it). Content met once is rendered directly: the template (two renderings) is made
when a second aspect of it is rendered. ``tests/consumers/datahub/test_stamp.py`` compares with
acryl-datahub's rendering.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .aspect_json import aspect_obj

__all__ = ["KEEP", "Stamped", "render_text", "text"]

_S1, _S2 = -7_205_759_403_792_793_601, -7_205_759_403_792_793_610
_LONG = (-(1 << 63), (1 << 63) - 1)
#: how many of the last aspects made are remembered at least (an event's proposals are rendered before more
#: are made)
KEEP = 256
_dumps = json.dumps
# id(aspect) -> (aspect, its Stamped, its time) of aspects made and not rendered yet, at most the last KEEP to
# 2 * KEEP made (two generations: a sink that renders nothing lets them go); the aspect is held, so its id is
# not reused while it is here
_made: dict[int, tuple[Any, Stamped, int]] = {}
_older: dict[int, tuple[Any, Stamped, int]] = {}


def render_text(aspect: Any) -> str:
    """An aspect's JSON as DataHub's file sink writes it under ``aspect.json``."""
    return _dumps(aspect_obj(aspect))


def text(aspect: Any) -> str:
    """``render_text(aspect)``, from its template when it was made by a ``Stamped`` (once: the aspect is then
    forgotten, so that aspects do not outlive their event here; the renderer keeps what it needs again)."""
    key = id(aspect)
    hit = _made.pop(key, None) or _older.pop(key, None)
    if hit is None:
        return render_text(aspect)
    return hit[1].text(aspect, hit[2])


class Stamped:
    """Makes aspects of one content at given times (see the module docstring)."""

    __slots__ = ("_build", "_parts", "_rendered")

    def __init__(self, build: Callable[[int], Any]) -> None:
        self._build = build
        self._rendered = 0  # aspects rendered in full before the template was made
        self._parts: list[str] | None = None  # the template, once made and accepted

    def __call__(self, when: int) -> Any:
        global _made, _older
        aspect = self._build(when)
        _made[id(aspect)] = (aspect, self, when)
        if len(_made) >= KEEP:
            _made, _older = {}, _made
        return aspect

    def text(self, aspect: Any, when: int) -> str:
        """The JSON of ``aspect``, made by this at ``when``."""
        parts = self._parts
        if parts is None and self._rendered == 1:
            parts = self._parts = self._template()
        if parts is None or type(when) is not int or not _LONG[0] <= when <= _LONG[1]:
            self._rendered += 1
            return render_text(aspect)
        return str(when).join(parts)

    def _template(self) -> list[str] | None:
        try:
            parts = render_text(self._build(_S1)).split(str(_S1))
            same = str(_S2).join(parts) == render_text(self._build(_S2))
        except Exception:  # noqa: BLE001 - the sentinels are not valid there: not a long field, no template
            return None
        return parts if same else None  # refused: the content holds the digits, or the time is not a long
