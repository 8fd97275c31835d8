"""A ratchet on the cyclomatic complexity of lineagewire's code (radon's count; issues 32 and 43).

No function is above ``LIMIT``: past that a function is a maze to review and to test, and the place to split it
is where this test points. And no more than ``CEILING`` functions and methods are at ``CROWDED`` or more: that
number only goes down; when a change brings it lower, lower ``CEILING`` with it.
"""

from __future__ import annotations

import pathlib

from radon.complexity import cc_visit
from radon.visitors import Class

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = ("consumers", "producers", "lineagewire")
LIMIT = 20
#: radon's grade C starts here: a function with this many paths is worth a second look
CROWDED = 11
CEILING = 83


def over_limit(folder: pathlib.Path, limit: int = LIMIT) -> list[str]:
    """``path:line name complexity`` of every function and method under ``folder`` above ``limit``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        # functions and methods (a class's own number sums its methods, which are listed one by one)
        found += [f"{path.relative_to(folder.parent)}:{b.lineno} {b.fullname} {b.complexity}"
                  for b in cc_visit(path.read_text(encoding="utf-8"))
                  if not isinstance(b, Class) and b.complexity > limit]
    return found


def test_no_function_is_more_complex_than_the_limit() -> None:
    found = [f for name in FOLDERS for f in over_limit(ROOT / name)]
    assert not found, f"cyclomatic complexity above {LIMIT} (split these functions):\n" + "\n".join(found)


def test_no_more_functions_are_crowded_than_the_ceiling() -> None:
    crowded = [f for name in FOLDERS for f in over_limit(ROOT / name, CROWDED - 1)]
    assert len(crowded) <= CEILING, (
        f"{len(crowded)} functions and methods have a cyclomatic complexity of {CROWDED} or more; expected at most "
        f"{CEILING} (split one where it does two jobs, or keep the new one simpler):\n" + "\n".join(crowded))


def test_the_check_sees_a_complex_function(tmp_path: pathlib.Path) -> None:
    """The check itself: a function of 26 branches, and a method of 26, are found; 25 are not. The count of
    crowded functions takes those at ``CROWDED`` and leaves out those below it and the class itself."""
    pkg = tmp_path / "probe"
    pkg.mkdir()
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(24))
    crowded = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(CROWDED - 1))
    calm = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(CROWDED - 2))
    (pkg / "probe.py").write_text(f"def too_many(x):\n{branches}    return x if x else -1\n\n"
                                  f"def enough(x):\n{branches}    return x\n\n"
                                  f"def crowded(x):\n{crowded}    return x\n\n"
                                  f"def calm(x):\n{calm}    return x\n\n"
                                  "class K:\n" + "".join("    " + line + "\n" for line in
                                                         f"def method(self, x):\n{branches}    return x and -1"
                                                         .splitlines()))
    assert [f.split()[1:] for f in over_limit(pkg, 25)] == [["too_many", "26"], ["K.method", "26"]]
    assert [f.split()[1:] for f in over_limit(pkg, CROWDED - 1)] == [
        ["too_many", "26"], ["enough", "25"], ["crowded", str(CROWDED)], ["K.method", "26"]]
