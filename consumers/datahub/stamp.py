"""Aspects that differ from one event to the next only by a few values: rendered once per content.

An output dataset's ``upstreamLineage`` carries the event time in each upstream's audit stamp, a run event
its ``timestampMillis``, an action run's properties its run id, action id and time: the translator builds
them for every event from content that repeats (a job's lineage, a run status, an action), only those
values changing. ``Stamped(build, kinds)`` makes them: ``stamped(*values)`` is ``build(*values)``, an
acryl-datahub aspect object as any other, and ``text(aspect)`` gives the JSON of an aspect so made
(``json.dumps(aspect_obj(aspect))``, what the renderer writes) as the content's template with the values
put in, instead of a walk of the object. Aspects made are remembered by identity until rendered (a sink
renders an event's aspects while handling that event; at most the last ``KEEP`` to ``2 * KEEP``); any
other aspect is rendered in full.

The template is the rendering of ``build`` given a first set of sentinels (an int that is no time, a
string of control characters), cut where each sentinel's text is. It is kept only if putting a second set
(each as many characters as the first, other characters) in those places gives exactly the rendering of
``build`` given the second set: were a sentinel's text also in the content, that place would differ, so
the template is refused and every aspect of that content rendered in full. ``build`` must use an ``int``
value only as a long field (avrogen renders it as its digits) and a ``str`` value only within string
fields (JSON escapes a string character by character), at places that do not depend on the values. A
value of another type, or an int out of the long range, is rendered in full (which raises avrogen's error
for it). Content met once is rendered directly: the template (two renderings) is made when a second
aspect of it is rendered. ``tests/consumers/datahub/test_stamp.py`` compares with acryl-datahub's rendering.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .aspect_json import aspect_obj

__all__ = ["KEEP", "Stamped", "made", "once", "render_text", "text"]

_LONG = (-(1 << 63), (1 << 63) - 1)
#: how many of the last aspects made are remembered at least (an event's proposals are rendered before more
#: are made)
KEEP = 256
_dumps = json.dumps
_quote = json.encoder.encode_basestring_ascii
# id(aspect) -> (aspect, its Stamped, its values) of aspects made and not rendered yet, at most the last KEEP
# to 2 * KEEP made (two generations: a sink that renders nothing lets them go); the aspect is held, so its id
# is not reused while it is here
_made: dict[int, tuple[Any, Stamped | None, tuple[Any, ...]]] = {}
_older: dict[int, tuple[Any, Stamped | None, tuple[Any, ...]]] = {}


def _sentinels(kind: type, i: int) -> tuple[Any, Any]:
    """The two sentinels of the ``i``-th value (of type ``kind``; ``i`` < 50): texts of equal length, unlike each
    other's and any other value's."""
    if kind is int:
        return -7_205_759_403_792_793_600 - i, -7_205_759_403_792_793_650 - i
    return f"\x00\x01{i:02d}\x02", f"\x00\x03{i:02d}\x04"


def _text_of(value: Any) -> str:
    """How a value's characters are rendered (an int: its digits; a str: escaped, without its quotes)."""
    return str(value) if type(value) is int else _quote(value)[1:-1]


def render_text(aspect: Any) -> str:
    """An aspect's JSON as DataHub's file sink writes it under ``aspect.json``."""
    return _dumps(aspect_obj(aspect))


def _remember(aspect: Any, stamped: Stamped | None, values: tuple[Any, ...]) -> None:
    global _made, _older
    _made[id(aspect)] = (aspect, stamped, values)
    if len(_made) >= KEEP:
        _made, _older = {}, _made


def once(aspect: Any) -> Any:
    """``aspect``, taken as one event's own like those a ``Stamped`` makes, but with no template (content that
    does not come again, such as an application run's properties): ``made`` is true for it until rendered."""
    _remember(aspect, None, ())
    return aspect


def made(aspect: Any) -> bool:
    """Whether ``aspect`` was made by a ``Stamped`` (or given to ``once``) and not rendered yet."""
    key = id(aspect)
    return key in _made or key in _older


def text(aspect: Any) -> str:
    """``render_text(aspect)``, from its template when it was made by a ``Stamped`` (once: the aspect is then
    forgotten, so that aspects do not outlive their event here; the renderer keeps what it needs again)."""
    key = id(aspect)
    hit = _made.pop(key, None) or _older.pop(key, None)
    if hit is None or hit[1] is None:
        return render_text(aspect)
    return hit[1].text(aspect, hit[2])


class Stamped:
    """Makes aspects of one content with given values (see the module docstring). ``kinds``: the type of each
    value, ``int`` or ``str``."""

    __slots__ = ("_build", "_holes", "_kinds", "_parts", "_rendered")

    def __init__(self, build: Callable[..., Any], kinds: tuple[type, ...] = (int,)) -> None:
        if not 0 < len(kinds) <= 50 or any(k not in (int, str) for k in kinds):
            raise ValueError(f"Stamped kinds={kinds!r}; expected a tuple of 1 to 50 types, int or str")
        self._build = build
        self._kinds = kinds
        self._rendered = 0  # aspects rendered in full before the template was made
        self._parts: list[str] | None = None  # the template's text between the values, once made and accepted
        self._holes: list[int] = []  # which value goes after each part but the last

    def __call__(self, *values: Any) -> Any:
        aspect = self._build(*values)
        _remember(aspect, self, values)
        return aspect

    def text(self, aspect: Any, values: tuple[Any, ...]) -> str:
        """The JSON of ``aspect``, made by this with ``values``."""
        parts = self._parts
        if parts is None and self._rendered == 1:
            parts = self._parts = self._template()
        if parts is None or not self._fits(values):
            self._rendered += 1
            return render_text(aspect)
        if len(values) == 1:
            return _text_of(values[0]).join(parts)
        texts = [_text_of(v) for v in values]
        out = [parts[0]]
        for hole, part in zip(self._holes, parts[1:], strict=True):
            out += (texts[hole], part)
        return "".join(out)

    def _fits(self, values: tuple[Any, ...]) -> bool:
        for kind, v in zip(self._kinds, values, strict=True):
            if type(v) is not kind or (type(v) is int and not _LONG[0] <= v <= _LONG[1]):
                return False
        return True

    def _template(self) -> list[str] | None:
        first, second = zip(*(_sentinels(k, i) for i, k in enumerate(self._kinds)), strict=True)
        where = {_text_of(s): i for i, s in enumerate(first)}
        try:
            cut = re.split("(" + "|".join(map(re.escape, where)) + ")", render_text(self._build(*first)))
            want = render_text(self._build(*second))
        except Exception:  # noqa: BLE001 - a sentinel is not valid where build puts it: no template
            return None
        parts, holes = cut[::2], [where[s] for s in cut[1::2]]
        texts = [_text_of(s) for s in second]
        if parts[0] + "".join(texts[h] + p for h, p in zip(holes, parts[1:], strict=True)) != want:
            return None  # refused: the content holds a sentinel's text, or a value is not where expected
        self._holes = holes
        return parts
