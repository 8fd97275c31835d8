"""The check of the comparison tests (``pytest -m upstream``): our fast path's output against the library's own.

Our OpenLineage and DataHub fast paths write what openlineage-python and acryl-datahub write, without their
slow walks (consumers/openlineage/render.py, consumers/datahub/proposals.py). ``make test-upstream`` runs the
comparison tests against the libraries' newest releases; when one changes its output, the failure must show
what changed, so ``assert_same`` prints the two outputs side by side (a plain ``assert a == b`` of two long
JSON texts shows a truncated one-line diff under ``-q``).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import json
from typing import Any

__all__ = ["assert_same", "side_by_side"]

_WIDTH = 72  # a column: two fit a 150-character terminal or CI log
_CONTEXT = 3  # unchanged lines shown around each difference
_MAX_ROWS = 150


def assert_same(ours: Any, theirs: Any, *, library: str, what: str) -> None:
    """Passes when ``ours == theirs``; else fails with both side by side.

    ``library``: the distribution whose output ``theirs`` is (its installed version is named);
    ``what``: what was compared, e.g. "Renderer.to_json of a START event".
    """
    __tracebackhide__ = True  # the failure is the caller's comparison
    if ours == theirs:
        return
    raise AssertionError(side_by_side(ours, theirs, library=library, what=what))


def side_by_side(ours: Any, theirs: Any, *, library: str, what: str) -> str:
    """The two outputs, as JSON one value a line, in two columns with the differing rows marked."""
    try:
        version = importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed)"
    left, right = _lines(ours), _lines(theirs)
    note = ""
    if left == right:  # the same values, written differently (key order, spacing, escapes): compare the text
        left, right = _chunks(ours), _chunks(theirs)
        note = f" (the same JSON written differently: first difference at character {_first_difference(ours, theirs)})"
    head = f"{what}: ours differs from {library} {version}'s{note}"
    rows = [head, f"  {'ours (lineagewire)':<{_WIDTH}} | {library} {version}", f"  {'-' * _WIDTH}-+-{'-' * _WIDTH}"]
    # Lines are matched without their trailing comma: a key added after the last one changes nothing else.
    matcher = difflib.SequenceMatcher(None, [x.rstrip(",") for x in left], [y.rstrip(",") for y in right],
                                      autojunk=False)
    for group in matcher.get_grouped_opcodes(_CONTEXT):
        rows.append(f"@@ ours from line {group[0][1] + 1}, {library}'s from line {group[0][3] + 1}")
        for tag, i1, i2, j1, j2 in group:
            for k in range(max(i2 - i1, j2 - j1)):
                a = left[i1 + k] if i1 + k < i2 else None
                b = right[j1 + k] if j1 + k < j2 else None
                mark = " " if tag == "equal" else "<" if b is None else ">" if a is None else "|"
                rows.extend(_row(a or "", b or "", mark))
    if len(rows) > _MAX_ROWS:
        rows = [*rows[:_MAX_ROWS], f"... {len(rows) - _MAX_ROWS} more rows"]
    rows.append("('|' differs, '<' only ours, '>' only the library's; "
                "the README's 'Upstream drift' says what to do)")
    return "\n".join(rows)


def _lines(value: Any) -> list[str]:
    """``value`` (a JSON text is parsed first) as indented JSON lines, keys in their own order."""
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError:
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            return text.splitlines() or [""]
    return json.dumps(_expanded(value), indent=1, default=repr, ensure_ascii=False).splitlines()


def _expanded(value: Any) -> Any:
    """``value`` with the JSON texts inside it (a DataHub proposal's aspect) parsed, each under a key that says
    so: a difference inside one shows as its own lines, not in one long line of escaped text."""
    if isinstance(value, dict):
        return {k: _expanded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_expanded(v) for v in value]
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return {"(JSON text)": _expanded(json.loads(value))}
        except ValueError:
            return value
    return value


def _chunks(value: Any) -> list[str]:
    text = value if isinstance(value, str) else repr(value)
    return [text[i:i + _WIDTH] for i in range(0, len(text), _WIDTH)] or [""]


def _first_difference(a: Any, b: Any) -> int:
    x, y = (v if isinstance(v, str) else repr(v) for v in (a, b))
    return next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))


def _row(a: str, b: str, mark: str) -> list[str]:
    """One line of each side, cut to the column width and continued on the next rows."""
    a_parts = [a[i:i + _WIDTH] for i in range(0, len(a), _WIDTH)] or [""]
    b_parts = [b[i:i + _WIDTH] for i in range(0, len(b), _WIDTH)] or [""]
    n = max(len(a_parts), len(b_parts))
    a_parts += [""] * (n - len(a_parts))
    b_parts += [""] * (n - len(b_parts))
    return [f"{mark} {x:<{_WIDTH}} {mark} {y}".rstrip() for x, y in zip(a_parts, b_parts, strict=True)]
