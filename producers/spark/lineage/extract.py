"""Lineage of one Spark action from its QueryExecution.

One ``toJSON()`` call on the optimized plan gives the whole plan; Python parses it,
finds the write command (outputs) and the leaf relations (inputs), and traces
column lineage through the expressions. Only what JSON leaves null (file
paths, JDBC and Kafka relations, save modes, static partitions, table
locations) is looked up on the JVM, node by node, within the time budget.
"""

from __future__ import annotations

import functools
import gc
import logging
import threading
from collections.abc import Callable
from typing import Any

from .. import internals
from . import metrics, origins
from .connectors import INPUTS, NO_DATASET, OUTPUTS, lifecycle
from .context import Extraction
from .exceptions import BudgetExceededError
from .jvm import Deadline, JvmPlan, plan_json, plan_writer, reads_persisted_view, sql_text
from .model import ActionLineage
from .origins import Origin
from .plan import PlanNode, is_persisted_view, parse_plan_json

__all__ = ["extract_action_lineage", "extract_from_plan", "extract_stream_lineage"]

log = logging.getLogger(__name__)

#: Nodes whose nested plans are not executed by the action (a cached command's result; the unresolved view
#: commands, which a session catalog's views never reach: ``CreateViewCommand``'s query is the view's lineage).
_NOT_EXECUTED = {"CommandResult", "CreateView", "AlterViewAs"}
_CACHED = '"class":"org.apache.spark.sql.execution.columnar.InMemoryRelation"'
_VIEW = '"class":"org.apache.spark.sql.catalyst.plans.logical.View"'
#: Nested plans that only copy another (a V2 write keeps its query as analyzed, next to the optimized one).
_COPIES = {"analyzedQuery"}
#: Leaves that name what a command acts on (``ResolvedTable``, ``ResolvedIdentifier``, ``UnresolvedNamespace``,
#: ...), not rows it reads.
_COMMAND_ARGUMENTS = ("Resolved", "Unresolved")
#: The JVM class SparkSession, per py4j JVM view.
_SESSION_CLASS: dict[int, Any] = {}


def extract_action_lineage(qe: Any, func_name: str, *, budget_s: float = 0.1,
                           stop: threading.Event | None = None) -> ActionLineage:
    """Inputs, outputs and column lineage of the action whose QueryExecution is ``qe``.

    ``qe`` is the py4j ``org.apache.spark.sql.execution.QueryExecution`` a
    QueryExecutionListener receives; ``func_name`` the action's name
    ("collectToPython", "command", "save", ...). Never raises: on an error, or
    once ``budget_s`` seconds are spent, it returns what it has with
    ``complete=False`` and the reason; and so it does soon after ``stop`` is set (the emitter is closing).
    """
    return _extract(qe, func_name, budget_s, stop=stop)


def extract_stream_lineage(query: Any, *, budget_s: float = 0.1) -> ActionLineage:
    """Inputs, outputs and column lineage of a streaming query: ``query`` is its ``StreamExecution`` (py4j,
    ``StreamingQueryManager.get(id).streamingQuery()``). Never raises, as ``extract_action_lineage``.

    The query's logical plan (``logicalPlan()``) is read, not a micro-batch's: it is the sink's write node
    (``WriteToMicroBatchDataSourceV1`` / ``WriteToMicroBatchDataSource``, with the writer's options and
    table) over the query with its sources as the query planned them, the same in every micro-batch. A
    micro-batch's own plan has only what that batch read (the new files, or an empty relation for a batch
    without new data), and its optimized plan drops a V1 sink's write node.
    """
    return _extract(query, "microBatch", budget_s, plan=lambda q: q.logicalPlan(), sql=False)


def _extract(qe: Any, func_name: str, budget_s: float, *, plan: Callable[[Any], Any] | None = None,
             sql: bool = True, stop: threading.Event | None = None) -> ActionLineage:
    """``plan(qe)``: the plan to read (default: ``_plan_of``); ``sql``: whether ``qe`` may have SQL text.

    A wide plan's JSON is ~10^5 short-lived dicts and lists: they set off the cyclic collector's full passes
    mid-parse (the 20-35 ms p99 spikes). Nothing built here is cyclic garbage, so the collector waits until
    the extraction is over.
    """
    result = ActionLineage()
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        deadline = Deadline(budget_s, stop=stop)
        jroot, text = _read_plan(qe, plan, deadline)
        root = parse_plan_json(text)
        extraction = _Extraction(qe, root, JvmPlan(jroot, deadline, plan_writer()), result)
        extraction.with_sql = sql
        extraction.counts_writes = plan is None
        extraction.run()
        if func_name in origins.CHECKPOINT_ACTIONS:
            origins.remember(extraction.origin(func_name))
    except BudgetExceededError as exc:
        result.mark_incomplete(str(exc))
    except Exception as exc:  # noqa: BLE001 - never let lineage hurt the job: report it instead
        log.debug("lineage extraction of %s failed", func_name, exc_info=True)
        result.mark_incomplete(f"lineage extraction of action {func_name!r} failed: {type(exc).__name__}: "
                               f"{str(exc)[:300]}")
    finally:
        if paused:
            gc.enable()
    return result


def _read_plan(qe: Any, plan: Callable[[Any], Any] | None, deadline: Deadline) -> tuple[Any, str]:
    """The plan to extract from (py4j) and its JSON: ``plan(qe)``, default the optimized plan, or the
    analyzed one where only it names the inputs."""
    jroot = (plan or _plan_of)(qe)
    text = plan_json(jroot)
    if _CACHED in text:
        # Cached data replaces the relations it was read from in the optimized plan, not in the
        # analyzed one: read that too (a second toJSON, only for plans that use the cache).
        deadline.check("reading the analyzed plan behind cached data")
        jroot = qe.analyzed()
        text = plan_json(jroot)
    elif plan is None and _VIEW not in text and reads_persisted_view(qe):
        # A read of a persisted view is named by the view, which only the analyzed plan still shows
        # (a second toJSON, only for plans that read one).
        deadline.check("reading the analyzed plan of a view's read")
        jroot = qe.analyzed()
        text = plan_json(jroot)
    return jroot, text


def _plan_of(qe: Any) -> Any:
    """The optimized plan, else (when optimization itself failed) the analyzed one.

    The optimized plan is already computed once the action ran, and it collapses the chains of
    projections that ``withColumn`` loops leave in the analyzed plan: on a 300-column frame with
    100 ``withColumn`` calls the analyzed JSON is 10 MB (1.7 s to write), the optimized 0.26 MB.
    """
    try:
        return qe.optimizedPlan()
    except Exception:  # noqa: BLE001 - e.g. onFailure for a plan the optimizer rejected
        log.debug("no optimized plan; using the analyzed plan", exc_info=True)
        return qe.analyzed()


def extract_from_plan(plan_json: str, *, budget_s: float = 0.1) -> ActionLineage:
    """Lineage from plan JSON alone (no JVM): what needs a look-up is reported as incomplete.

    Useful for tests and for plans captured earlier.
    """
    result = ActionLineage()
    try:
        root = parse_plan_json(plan_json)
        _Extraction(None, root, None, result, Deadline(budget_s)).run()
    except BudgetExceededError as exc:
        result.mark_incomplete(str(exc))
    except Exception as exc:  # noqa: BLE001 - same promise as extract_action_lineage
        result.mark_incomplete(f"lineage extraction failed: {type(exc).__name__}: {str(exc)[:300]}")
    return result


class _Extraction(Extraction):
    """The order of the work: outputs, then inputs, then (budget allowing) SQL text and column lineage."""

    #: the plan is read as another plan's origin: its SQL text is not needed
    for_origin = False
    #: the plan may have SQL text (a streaming query's logical plan has none to read)
    with_sql = True
    #: ``qe`` is the action's QueryExecution, whose executed plan counts what it wrote (a streaming query's is not)
    counts_writes = True

    def run(self) -> None:
        root = self.root
        self.result.plan_node = root.simple
        if any(node.fields.get("isStreaming") is True for node in root.walk()):
            self.result.job_type = "STREAMING"
        executed = list(self._executed(root))
        self._name_outputs(executed)
        self._name_inputs(executed)
        if not self.for_origin:
            lifecycle.settle(self)
        if self.deadline.expired():
            self.result.mark_incomplete(self.deadline.reason("naming the datasets; column lineage skipped"))
            return
        self._sql()
        if self.writes:
            self._column_lineage()

    def _name_outputs(self, executed: list[PlanNode]) -> None:
        for node in executed:
            out = OUTPUTS.get(node.simple)
            if out is not None:
                self._guard(f"output {node.simple}", functools.partial(out, self, node))
        if self.result.outputs and self.counts_writes and not self.for_origin:
            metrics.attach(self)  # only actions that write: a read-only action makes no call for it

    def _name_inputs(self, executed: list[PlanNode]) -> None:
        """The leaves' datasets; a leaf that is a written target (named by ``_name_outputs``) is not an input."""
        leaves = [n for n in executed if (not n.children or is_persisted_view(n)) and id(n) not in self.targets]
        if self.jvm is not None:
            self.jvm.fetch_file_relations([n.path for n in leaves if n.simple == "LogicalRelation"])
        for node in leaves:
            self._guard(f"input {node.simple}", functools.partial(self._input, node))

    def _column_lineage(self) -> None:
        self.graph.add_plan(self.root)
        for ds, columns in self.column_ids:
            self.result.column_lineage += self.graph.lineage(ds["namespace"], ds["name"], columns)
        for ds, query, names in self.writes:
            if query is None:
                continue
            attrs = self.graph.output(query)
            if names is None or len(names) != len(attrs):
                names = [a.name for a in attrs]
            self.result.column_lineage += self.graph.lineage(
                ds["namespace"], ds["name"], [(n, a.expr_id) for n, a in zip(names, attrs, strict=True)])

    def origin(self, how: str) -> Origin:
        """This plan as the origin of a ``LogicalRDD`` cut from it (``origins``): its inputs, and the source
        columns of its output attributes."""
        attrs = self.graph.output(self.root)
        try:
            self.deadline.check("tracing the column lineage of a plan cut by " + how)
            self.graph.add_plan(self.root)
            columns, indirect = [self.graph.resolve(a.expr_id) for a in attrs], self.graph.resolved_indirect()
        except BudgetExceededError:  # the datasets matter most: keep them without column lineage
            return Origin(tuple(a.expr_id for a in attrs), how, list(self.result.inputs), [{} for _ in attrs], {},
                          complete=False, gaps=self.result.incomplete_reason)
        return Origin(tuple(a.expr_id for a in attrs), how, list(self.result.inputs), columns, indirect,
                      gaps=self.result.incomplete_reason)

    def stream_origin(self, key: tuple[int, ...]) -> Origin | None:
        """The streaming query whose micro-batch plan outputs ``key``, as an origin (``foreachBatch``).

        The micro-batch runs the user's function while the listener extracts the function's actions,
        so the query is active; its current micro-batch (``lastExecution``) has the same output
        exprIds as every other batch of that query. Each query's origin is kept once found.
        """
        for query in self._active_queries():
            self.deadline.check_essential("reading the plan of a streaming query")
            batch = query.streamingQuery().lastExecution()
            if batch is None:
                continue
            jroot = batch.optimizedPlan()
            found = _Extraction(batch, parse_plan_json(plan_json(jroot)),
                                JvmPlan(jroot, self.deadline, plan_writer()), ActionLineage())
            found.for_origin = True
            found.run()
            origin = found.origin("foreachBatch")
            origins.remember(origin)
            if origin.key == key:
                return origin
        return None

    def _active_queries(self) -> list[Any]:
        """Active streaming queries of the action's session and of the default session.

        ``foreachBatch`` runs the user's function in a clone of the session that started the query, and a
        clone has a streaming query manager of its own, without the query.
        """
        sessions = [self.session()]
        jvm = internals.active_jvm()
        if jvm is not None:
            # Resolving the class through the JVM view is a round trip per package level: once per JVM.
            cls = _SESSION_CLASS.get(id(jvm))
            if cls is None:
                cls = _SESSION_CLASS[id(jvm)] = jvm.org.apache.spark.sql.SparkSession
            default = cls.getDefaultSession()
            if default.isDefined():
                sessions.append(default.get())
        seen: dict[str, Any] = {}
        for session in sessions:
            if session is None:
                continue
            self.deadline.check_essential("listing the active streaming queries")
            for query in session.streams().active():
                seen.setdefault(str(query.runId().toString()), query)
        return list(seen.values())

    def _executed(self, node: PlanNode) -> Any:
        yield node
        if node.simple in _NOT_EXECUTED or is_persisted_view(node):
            return
        for key, sub in node.nested.items():
            if key not in _COPIES:
                yield from self._executed(sub)
        for child in node.children:
            yield from self._executed(child)

    def _guard(self, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BudgetExceededError:
            raise
        except Exception as exc:  # noqa: BLE001 - one odd node must not cost the rest
            log.debug("lineage of %s failed", what, exc_info=True)
            self.result.mark_incomplete(f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                                        if str(exc) else f"{what}: {type(exc).__name__}")

    def _input(self, node: PlanNode) -> None:
        s = node.simple
        if s in NO_DATASET or s.startswith(_COMMAND_ARGUMENTS):
            return
        handler = INPUTS.get(s)
        if handler is None:
            # A leaf that is the whole plan and no relation is a command that reads nothing (SET, SHOW, DDL);
            # any other leaf feeds rows into the action: what it reads is not known, so the result says so.
            if node is not self.root or "Relation" in s or "Scan" in s or "RDD" in s:
                self.result.mark_incomplete(f"input relation {s} is not supported: its inputs cannot be traced")
            return
        for ds in handler(self, node):
            self.add_input(ds, node)

    def _sql(self) -> None:
        if self.qe is None or self.for_origin or not self.with_sql:
            return
        try:
            self.deadline.check("reading the SQL text")
            self.result.sql = sql_text(self.qe)
        except BudgetExceededError:
            raise
        except Exception:  # noqa: BLE001 - older Spark versions have no sqlText on the origin
            log.debug("no SQL text on the plan origin", exc_info=True)
