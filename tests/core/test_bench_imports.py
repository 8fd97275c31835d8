"""Every benchmark `make bench` runs imports and has a main(): one moved test helper once stopped it midway."""

from __future__ import annotations

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAKE_BENCH = re.search(r"^bench:.*\n\tfor b in ([\w ]+); do", (ROOT / "Makefile").read_text(), re.M)
LISTED = MAKE_BENCH.group(1).split() if MAKE_BENCH else []


def test_make_bench_runs_every_benchmark() -> None:
    assert LISTED, "the Makefile's bench target no longer has the `for b in ...` list this test reads"
    helpers = {"samples"}  # shared by the benchmarks, not one itself
    on_disk = {p.stem for p in (ROOT / "bench").glob("*.py") if not p.stem.startswith("_")} - helpers
    assert sorted(LISTED) == sorted(on_disk)


@pytest.mark.parametrize("name", LISTED)
def test_benchmark_module_imports(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert callable(getattr(module, "main", None)), f"bench/{name}.py has no main()"
