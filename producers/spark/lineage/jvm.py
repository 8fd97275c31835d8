"""The JVM side of an extraction: the plan's JSON, and targeted py4j look-ups for what it leaves null.

``plan_json`` fetches the JSON in one call. Every look-up (paths, relations, maps,
modes) goes through ``JvmPlan``, which checks the time budget first and reaches a
node by its path from the root, caching the way there.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .. import internals, jvm_classes
from .exceptions import BudgetExceededError
from .plan import Step

__all__ = ["Deadline", "JvmPlan", "option", "plan_json", "plan_writer", "reads_persisted_view",
           "scala_map", "short_format", "sql_text"]

log = logging.getLogger(__name__)


class Deadline:
    """A time budget for one extraction.

    Optional work (schema look-ups, the SQL text, column lineage) stops when the
    budget is spent: ``check(what)`` raises ``BudgetExceededError`` naming the step.
    Naming the datasets is what an action's lineage is for, and takes a few cheap
    look-ups once the plan JSON is read (itself most of the budget on wide plans):
    ``check_essential`` lets those run on up to ``grace`` times the budget. Either
    way, a result that ran past the budget is marked incomplete.

    ``stop``, once set (the emitter is closing), ends the budget at once: the datasets are still named, the
    rest is skipped.
    """

    def __init__(self, budget_s: float, grace: float = 2.0, stop: threading.Event | None = None) -> None:
        self.budget_s = budget_s
        self.start = time.perf_counter()
        self.end = self.start + budget_s
        self.hard_end = self.start + budget_s * grace
        self._stop = stop

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000

    def stopped(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def expired(self) -> bool:
        return time.perf_counter() > self.end or self.stopped()

    def reason(self, what: str) -> str:
        if self.stopped():
            return f"the emitter closed {self.elapsed_ms():.0f} ms into the extraction, while {what}"
        return (f"time budget of {self.budget_s * 1000:.0f} ms exceeded after {self.elapsed_ms():.0f} ms "
                f"while {what}")

    def check(self, what: str) -> None:
        if self.expired():
            raise BudgetExceededError(self.reason(what))

    def check_essential(self, what: str) -> None:
        if time.perf_counter() > self.hard_end:
            raise BudgetExceededError(self.reason(what))


#: How long a driver without the compiled writer goes on with toJSON() before looking at the cache again
#: (the emitter compiles the classes in the background once per machine and Spark version: 2-3 s).
_RETRY_S = 10.0
#: Per py4j gateway: (the PlanJson instance or None, when that was decided).
_WRITERS: dict[int, tuple[Any, float]] = {}
_WRITERS_LOCK = threading.Lock()


def plan_writer() -> Any:
    """The driver JVM's ``lineagewire.spark.PlanJson`` (``java/PlanJson.java``), or None while it is not compiled.

    It is compiled with the emitter's SparkListener (``jvm_classes``); this only loads it
    from the cache, never compiles, so an extraction does not wait for javac.
    """
    sc = internals.active_context()
    if sc is None:
        return None
    key = id(internals.gateway(sc))
    now = time.monotonic()
    found = _WRITERS.get(key)
    if found is not None and (found[0] is not None or now - found[1] < _RETRY_S):
        return found[0]
    with _WRITERS_LOCK:
        writer = None
        try:
            directory = jvm_classes.cached(jvm_classes.JvmInfo.of(sc), jvm_classes.PLAN_JSON)
            if directory is not None:
                writer = jvm_classes.new_instance(sc, directory, jvm_classes.PLAN_JSON)
        except Exception:  # noqa: BLE001 - toJSON() does the same work, only slower
            log.warning("the JVM plan JSON writer could not be loaded; using Spark's toJSON()", exc_info=True)
        _WRITERS[key] = (writer, now)
        return writer


def plan_json(jplan: Any) -> str:
    """The JSON of the py4j plan ``jplan``: the string ``jplan.toJSON()`` returns.

    Written by ``PlanJson`` in the JVM when it is compiled (on 300-column plans several times
    faster than Spark's own, which builds a json4s tree and has Jackson render it), else by
    ``toJSON()``. ``PlanJson`` itself answers with ``toJSON()`` for a plan it cannot write.
    ``PlanJson`` writes the compact form: the same document less fields the lineage never reads
    (leaves' ``num-children``, expressions' ``metadata`` and ``qualifier``, ExprId's ``jvmId``),
    with each attribute written once and referred to by number (``plan.py``): a 1,000-column plan
    with 20 joins is 0.6 MB instead of 7.2, so much less to write, send and parse.
    """
    writer = plan_writer()
    if writer is None:
        return str(jplan.toJSON())
    return str(writer.writeCompact(jplan))


def reads_persisted_view(qe: Any) -> bool:
    """Whether the action's analyzed plan reads a persisted view (``PlanJson.readsPersistedView``: one call).

    The optimizer removes ``View`` nodes, so the optimized plan reads a view's tables as if the query
    had named them. Without the compiled writer this says False: a view's read then names its sources.
    """
    writer = plan_writer()
    return writer is not None and bool(writer.readsPersistedView(qe))


def _some(text: str) -> str | None:
    # Option.toString in one call ("Some(...)" / "None") rather than isDefined + get.
    return text[5:-1] if text.startswith("Some(") and text.endswith(")") else None


def sql_text(qe: Any) -> str | None:
    """The SQL statement the action's plan came from, or None (DataFrame API).

    Spark 4.0 keeps it on the origin of the plan the listener gets. Spark 4.3 runs a command
    made from a statement (CTAS, ``saveAsTable``) as a plan without it, and keeps it on the
    command's ``query``.
    """
    plan = qe.logical()
    text = _some(str(plan.origin().sqlText().toString()))
    if text is None:
        try:
            query = plan.query()
        except Exception:  # noqa: BLE001 - py4j's answer for a plan without a query: no SQL text
            return None
        text = _some(str(query.origin().sqlText().toString())) if query is not None else None
    return text


#: Plan fields that hold an Option[LogicalPlan] rather than a plan.
_OPTIONAL_PLAN_FIELDS = {"analyzedQuery"}


class JvmPlan:
    """The JVM side of the plan whose JSON was parsed."""

    def __init__(self, root: Any, deadline: Deadline, writer: Any = None) -> None:
        self._nodes: dict[tuple[Step, ...], Any] = {(): root}
        self.deadline = deadline
        #: ``PlanJson``, which walks a whole path in one call (else two py4j calls per step)
        self._writer = writer
        #: ``file_relation`` facts of LogicalRelation nodes by path (None: not a file relation)
        self._file_relations: dict[tuple[Step, ...], tuple[str, str, list[str]] | None] = {}

    def node(self, path: tuple[Step, ...]) -> Any:
        found = self._nodes.get(path)
        if found is not None:
            return found
        if self._writer is not None:
            # From the deepest node looked up already: a sibling's look-up shares the way there.
            at = len(path) - 1
            while at > 0 and path[:at] not in self._nodes:
                at -= 1
            self.deadline.check_essential("looking up a plan node on the JVM")
            obj = self._writer.node(self._nodes[path[:at]], _path_text(path[at:]))
            self._nodes[path] = obj
            return obj
        parent = self.node(path[:-1])
        kind, arg = path[-1]
        self.deadline.check_essential("looking up a plan node on the JVM")
        if kind == "c":
            obj = parent.children().apply(arg)
        elif kind == "s":
            obj = parent.subqueries().apply(arg)
        else:
            obj = getattr(parent, arg)()
            if arg in _OPTIONAL_PLAN_FIELDS:
                obj = option(obj)
        self._nodes[path] = obj
        return obj

    def fetch_file_relations(self, paths: list[tuple[Step, ...]]) -> None:
        """Look up the file relations of the LogicalRelation nodes at ``paths`` in one call (``PlanJson``
        only): a plan's inputs cost one round trip instead of three each (the node, its relation, the facts)."""
        if self._writer is None or not paths:
            return
        self.deadline.check_essential("looking up the input relations")
        try:
            text = str(self._writer.fileRelations(self._nodes[()], "\n".join(_path_text(p) for p in paths)))
        except Exception:  # noqa: BLE001 - each input is then looked up on its own, and fails on its own
            log.debug("the input relations could not be looked up at once", exc_info=True)
            return
        records = text.split("\x1e")
        if len(records) != len(paths):
            return  # not what was asked for: each input is looked up on its own
        for path, record in zip(paths, records, strict=True):
            self._file_relations[path] = _file_facts(record) if record else None

    def known_file_relation(self, path: tuple[Step, ...]) -> tuple[str, str, list[str]] | None:
        """What ``fetch_file_relations`` found for the LogicalRelation at ``path``; None if it is not a file
        relation or was not fetched."""
        return self._file_relations.get(path)

    def file_relation(self, relation: Any) -> tuple[str, str, list[str]] | None:
        """A HadoopFsRelation's (file format class simple name, short name or '', root paths) in one call;
        None for another relation, or without ``PlanJson``."""
        if self._writer is None:
            return None
        self.deadline.check_essential("looking up a file relation")
        text = self._writer.fileRelation(relation)
        return None if text is None else _file_facts(str(text))

    def rdd_inputs(self, rdd: Any) -> str | None:
        """What the RDD ``rdd`` reads, through its dependencies, in one call (``PlanJson.rddInputs``: the leaf
        RDDs, then ``\x1e`` and the RDD's debug string); None without ``PlanJson``."""
        if self._writer is None:
            return None
        self.deadline.check_essential("walking the RDD dependencies")
        return str(self._writer.rddInputs(rdd))


def _path_text(path: tuple[Step, ...]) -> str:
    return "/".join(f"{kind}:{arg}" for kind, arg in path)


def _file_facts(text: str) -> tuple[str, str, list[str]]:
    simple, short, *paths = text.split("\n")
    return simple, short, [p for p in paths if p]


def option(value: Any) -> Any:
    """The content of a scala.Option, or None."""
    if value is None:
        return None
    try:
        return value.get() if value.isDefined() else None
    except Exception:  # noqa: BLE001 - not an Option: take it as it is
        return value


_CONVERTERS: dict[int, Any] = {}


def scala_map(value: Any) -> dict[str, str]:
    """A scala Map[String, String] as a dict (through the JVM's own converter)."""
    if value is None or value.isEmpty():
        return {}
    jvm = internals.active_jvm()
    if jvm is None:
        return {}
    # Resolving a class through the JVM view costs a round trip per package level: once is enough.
    # JavaConverters is in Scala 2.12 (Spark 3.5) and 2.13 (Spark 4, deprecated there but kept);
    # 2.13's scala.jdk.javaapi.CollectionConverters is not in 2.12.
    converters = _CONVERTERS.get(id(jvm))
    if converters is None:
        converters = _CONVERTERS[id(jvm)] = jvm.scala.collection.JavaConverters
    converted = converters.mapAsJavaMap(value)
    return {str(k): str(v) for k, v in dict(converted).items()}


def short_format(file_format: Any) -> str | None:
    """'parquet', 'csv', ... for a FileFormat object (its DataSourceRegister short name)."""
    if file_format is None:
        return None
    try:
        return str(file_format.shortName())
    except Exception:  # noqa: BLE001 - a format without a short name: use its class
        name = str(file_format.getClass().getSimpleName())
        return name.removesuffix("FileFormat").lower() or name
