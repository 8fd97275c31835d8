"""A capturing QueryExecutionListener on the shared SparkSession, extracting lineage as the emitter would.

The listener runs on Spark's listener bus, asynchronously: ``Capture.run``
does an action and waits (with a generous timeout) for the extraction result
that matches it.
"""

from __future__ import annotations

import gc
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lineagewire.producers.spark.lineage import ActionLineage, extract_action_lineage

from ..listening import query_listener


def _shipped_budget_s() -> float:
    from lineagewire.producers.spark.config import EmitterConfig

    return float(EmitterConfig.model_fields["time_budget_ms"].default) / 1000


#: The budget users get (issue 9.8): what the tests check is what users see. A test that needs more
#: says why where it passes its own.
BUDGET_S = _shipped_budget_s()
WAIT_S = 90.0


class Capture:
    """QueryExecutionListener (through py4j) that keeps (func_name, ActionLineage) per action."""

    def __init__(self, spark: Any = None, budget_s: float = BUDGET_S) -> None:
        self.spark = spark
        self.budget_s = budget_s
        self.results: list[tuple[str, ActionLineage]] = []
        self._cond = threading.Condition()

    def onSuccess(self, func_name: str, qe: Any, duration_ns: int) -> None:  # noqa: N802 - Java interface
        self._add(func_name, qe)

    def onFailure(self, func_name: str, qe: Any, exception: Any) -> None:  # noqa: N802 - Java interface
        self._add(func_name, qe)

    def _add(self, func_name: str, qe: Any) -> None:
        result = extract_action_lineage(qe, func_name, budget_s=self.budget_s)
        with self._cond:
            self.results.append((str(func_name), result))
            self._cond.notify_all()

    def run(self, action: Callable[[], Any], match: Callable[[ActionLineage], bool] | None = None,
            timeout: float = WAIT_S) -> ActionLineage:
        """Run ``action`` and return the first new result for which ``match`` is true (default: any output)."""
        match = match or (lambda r: bool(r.outputs))
        self.settle()
        with self._cond:
            start = len(self.results)
        action()
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for _, result in self.results[start:]:
                    if match(result):
                        return result
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(f, r.plan_node, r.incomplete_reason) for f, r in self.results[start:]]
                    raise AssertionError(f"no matching lineage within {timeout} s; seen: {seen}")
                self._cond.wait(left)

    def settle(self, timeout_ms: int = 60_000) -> None:
        """Wait until Spark's listener bus has delivered every earlier event (setup actions of the test)."""
        if self.spark is not None:
            self.spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty(timeout_ms)

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]


@pytest.fixture(scope="session")
def jvm_writer(spark: Any) -> None:
    """The JVM plan writer (``java/PlanJson.java``) compiled into the cache, as the emitter's install does.

    Without it the extraction reads Spark's ``toJSON()``; with it the compact form, which is what
    users get once the emitter has compiled its classes: the tests check that path whatever the cache
    held before (``tests/producers/spark/test_plan_json.py`` covers the fallback).
    """
    from lineagewire.producers.spark import jvm_classes
    from lineagewire.producers.spark.lineage import jvm

    info = jvm_classes.JvmInfo.of(spark)
    javac = jvm_classes.find_javac(info)
    if javac is not None:
        jvm_classes.compile_classes(info, javac)
        jvm._WRITERS.clear()  # look the cache up now, not after the retry interval of an earlier miss


@pytest.fixture
def capture(spark: Any, jvm_writer: None) -> Iterator[Capture]:
    with query_listener(spark, Capture(spark)) as listener:
        yield listener


def collect(df: Any) -> list[Any]:
    """``df.collect()`` without PySpark 4.0's unclosed result socket turning into a test error.

    PySpark's collect leaves its local result socket to the garbage collector (a
    ResourceWarning even without lineagewire); collect it here, where the warning is ignored.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        rows = df.collect()
        gc.collect()
    return rows


def reads(result: ActionLineage) -> bool:
    return bool(result.inputs)


def by_name(datasets: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in datasets}


def column(result: ActionLineage, field: str) -> dict[str, Any]:
    for c in result.column_lineage:
        if c["field"] == field:
            return c
    raise AssertionError(f"no column lineage for {field!r}; have {[c['field'] for c in result.column_lineage]}")


def inputs_of(result: ActionLineage, field: str) -> dict[str, set[tuple[str, str]]]:
    """{source field: {(type, subtype)}} for output column ``field``."""
    out: dict[str, set[tuple[str, str]]] = {}
    for i in column(result, field)["inputs"]:
        out.setdefault(i["field"], set()).update((t["type"], t["subtype"]) for t in i["transformations"])
    return out
