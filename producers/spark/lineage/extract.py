"""Lineage of one Spark action from its QueryExecution.

One ``toJSON()`` call on the optimized plan gives the whole plan; Python parses it,
finds the write command (outputs) and the leaf relations (inputs), and traces
column lineage through the expressions. Only what JSON leaves null (file
paths, JDBC and Kafka relations, save modes, static partitions, table
locations) is looked up on the JVM, node by node, within the time budget.
"""

from __future__ import annotations

import gc
import logging
import os
import re
from typing import Any

from lineagewire.schemas.events import Boundedness, Dataset, SchemaField, Symlink, dataset

from .columns import ColumnGraph
from .exceptions import BudgetExceededError
from .jvm import Deadline, JvmPlan, option, quick_acks, scala_map, short_format
from .model import ActionLineage
from .naming import file_dataset_id, jdbc_dataset_id, kafka_namespace, normalize_uri
from .plan import PlanNode, parse_plan_json
from .schema import fields_of_attributes, fields_of_catalog_string, fields_of_struct_json

__all__ = ["extract_action_lineage", "extract_from_plan"]

log = logging.getLogger(__name__)

#: Nodes whose nested plans are not executed by the action (a view's text, a cached command's result).
_NOT_EXECUTED = {"CreateViewCommand", "AlterViewAsCommand", "CommandResult", "CreateView", "AlterViewAs"}
_CACHED = '"class":"org.apache.spark.sql.execution.columnar.InMemoryRelation"'
#: Nested plans that only copy another (a V2 write keeps its query as analyzed, next to the optimized one).
_COPIES = {"analyzedQuery"}
#: Leaves that read no dataset.
_NO_DATASET = {"LogicalRDD", "LocalRelation", "OneRowRelation", "Range", "ExternalRDD",
               "UnresolvedRelation", "ResolvedIdentifier", "ResolvedNamespace", "ResolvedTable",
               "StreamingExecutionRelation", "InMemoryRelation"}


def extract_action_lineage(qe: Any, func_name: str, *, budget_s: float = 0.1) -> ActionLineage:
    """Inputs, outputs and column lineage of the action whose QueryExecution is ``qe``.

    ``qe`` is the py4j ``org.apache.spark.sql.execution.QueryExecution`` a
    QueryExecutionListener receives; ``func_name`` the action's name
    ("collectToPython", "command", "save", ...). Never raises: on an error, or
    once ``budget_s`` seconds are spent, it returns what it has with
    ``complete=False`` and the reason.
    """
    result = ActionLineage()
    # A wide plan's JSON is ~10^5 short-lived dicts and lists: they set off the cyclic collector's
    # full passes mid-parse (the 20-35 ms p99 spikes). Nothing built here is cyclic garbage, so the
    # collector waits until the extraction is over.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _extract(qe, func_name, budget_s, result)
    finally:
        if paused:
            gc.enable()


def _extract(qe: Any, func_name: str, budget_s: float, result: ActionLineage) -> ActionLineage:
    try:
        deadline = Deadline(budget_s)
        jroot = _plan_of(qe)
        with quick_acks(jroot):
            text = str(jroot.toJSON())
            if _CACHED in text:
                # Cached data replaces the relations it was read from in the optimized plan, not in the
                # analyzed one: read that too (a second toJSON, only for plans that use the cache).
                deadline.check("reading the analyzed plan behind cached data")
                jroot = qe.analyzed()
                text = str(jroot.toJSON())
            root = parse_plan_json(text)
            _Extraction(qe, root, JvmPlan(jroot, deadline), result).run()
    except BudgetExceededError as exc:
        result.mark_incomplete(str(exc))
    except Exception as exc:  # noqa: BLE001 - never let lineage hurt the job: report it instead
        log.debug("lineage extraction of %s failed", func_name, exc_info=True)
        result.mark_incomplete(f"lineage extraction of action {func_name!r} failed: {type(exc).__name__}: "
                               f"{str(exc)[:300]}")
    return result


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


def _column_names(node: PlanNode) -> list[str] | None:
    raw = node.fields.get("outputColumnNames")
    if isinstance(raw, list):
        return [str(n) for n in raw]
    if isinstance(raw, str) and raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1]
        return [n for n in inner.split(", ")] if inner else []
    return None


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _table_name(catalog_table: dict[str, Any]) -> str:
    ident = catalog_table.get("identifier") or {}
    table = str(ident.get("table", ""))
    database = ident.get("database")
    return f"{database}.{table}" if database else table


class _Extraction:
    def __init__(self, qe: Any, root: PlanNode, jvm: JvmPlan | None, result: ActionLineage,
                 deadline: Deadline | None = None) -> None:
        self.qe = qe
        self.root = root
        self.jvm = jvm
        self.deadline = deadline or (jvm.deadline if jvm else Deadline(1.0))
        self.result = result
        self.graph = ColumnGraph(self.deadline.check)
        self._catalog_ns: str | None = None
        #: ids of plan nodes that are write targets, not inputs
        self._targets: set[int] = set()
        #: (output dataset, query node, column names)
        self._writes: list[tuple[Dataset, PlanNode | None, list[str] | None]] = []

    # -- driver ------------------------------------------------------------------------------------

    def run(self) -> None:
        root = self.root
        self.result.plan_node = root.simple
        if any(node.fields.get("isStreaming") is True for node in root.walk()):
            self.result.job_type = "STREAMING"
        executed = list(self._executed(root))
        for node in executed:
            handler = getattr(self, f"_out_{node.simple}", None)
            if handler is not None:
                self._guard(f"output {node.simple}", handler, node)
        for node in executed:
            if node.children or id(node) in self._targets:
                continue
            self._guard(f"input {node.simple}", self._input, node)
        if self.deadline.expired():
            self.result.mark_incomplete(self.deadline.reason("naming the datasets; column lineage skipped"))
            return
        self._sql()
        if not self._writes:
            return
        self.graph.add_plan(root)
        for ds, query, names in self._writes:
            if query is None:
                continue
            attrs = self.graph.output(query)
            if names is None or len(names) != len(attrs):
                names = [a.name for a in attrs]
            self.result.column_lineage += self.graph.lineage(
                ds["namespace"], ds["name"], [(n, a.expr_id) for n, a in zip(names, attrs, strict=True)])

    def _executed(self, node: PlanNode) -> Any:
        yield node
        if node.simple in _NOT_EXECUTED:
            return
        for key, sub in node.nested.items():
            if key not in _COPIES:
                yield from self._executed(sub)
        for child in node.children:
            yield from self._executed(child)

    def _guard(self, what: str, fn: Any, node: PlanNode) -> None:
        try:
            fn(node)
        except BudgetExceededError:
            raise
        except Exception as exc:  # noqa: BLE001 - one odd node must not cost the rest
            log.debug("lineage of %s failed", what, exc_info=True)
            self.result.mark_incomplete(f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                                        if str(exc) else f"{what}: {type(exc).__name__}")

    def _j(self, node: PlanNode) -> Any:
        if self.jvm is None:
            raise LookupError("needs a JVM look-up (plan JSON only)")
        return self.jvm.node(node.path)

    def _sql(self) -> None:
        if self.qe is None:
            return
        try:
            self.deadline.check("reading the SQL text")
            # Option.toString in one call ("Some(...)" / "None") rather than isDefined + get.
            text = str(self.qe.logical().origin().sqlText().toString())
            self.result.sql = text[5:-1] if text.startswith("Some(") and text.endswith(")") else None
        except BudgetExceededError:
            raise
        except Exception:  # noqa: BLE001 - older Spark versions have no sqlText on the origin
            log.debug("no SQL text on the plan origin", exc_info=True)

    # -- catalog tables ------------------------------------------------------------------------------

    def catalog_namespace(self) -> str:
        """Namespace of catalog-table symlinks: the Hive metastore, else the warehouse folder."""
        if self._catalog_ns is not None:
            return self._catalog_ns
        ns = "spark_catalog"
        if self.qe is not None:
            self.deadline.check_essential("reading the catalog's location")
            session = self.qe.sparkSession()
            conf = session.conf()
            uris = ""
            if str(conf.get("spark.sql.catalogImplementation", "in-memory")) == "hive":
                uris = str(session.sparkContext().hadoopConfiguration().get("hive.metastore.uris") or "")
            if uris:
                ns = "hive://" + re.sub(r"^[a-z]+://", "", uris.split(",")[0].strip())
            else:
                warehouse = str(conf.get("spark.sql.warehouse.dir"))
                if "://" not in warehouse and not warehouse.startswith("file:"):
                    warehouse = normalize_uri(os.path.abspath(warehouse))
                ns = warehouse.rstrip("/")
        self._catalog_ns = ns
        return ns

    def _symlinks(self, catalog_table: dict[str, Any] | None) -> list[Symlink]:
        if not catalog_table:
            return []
        return [{"namespace": self.catalog_namespace(), "name": _table_name(catalog_table), "type": "TABLE"}]

    # -- inputs ------------------------------------------------------------------------------------------

    def _add_input(self, ds: Dataset, node: PlanNode) -> None:
        if "query" not in ds["properties"]:  # a query's columns are not one table's
            self.graph.add_source(self.graph.output(node), ds["namespace"], ds["name"])
        for known in self.result.inputs:
            if (known["namespace"], known["name"]) == (ds["namespace"], ds["name"]):
                return
        self.result.inputs.append(ds)

    def _input(self, node: PlanNode) -> None:
        s = node.simple
        if s in _NO_DATASET:
            return
        handler = getattr(self, f"_in_{s}", None)
        if handler is None:
            if "Relation" in s or "Scan" in s:
                self.result.mark_incomplete(f"input relation {s} is not supported")
            return
        for ds in handler(node):
            self._add_input(ds, node)

    def _boundedness(self, node: PlanNode) -> Boundedness:
        return "CONTINUOUS_UNBOUNDED" if node.fields.get("isStreaming") is True else "BOUNDED"

    def _relation_datasets(self, node: PlanNode, relation: Any, catalog_table: dict[str, Any] | None,
                           fields: list[SchemaField]) -> list[Dataset]:
        """Datasets of a V1 BaseRelation (files, JDBC, Kafka)."""
        cls = str(relation.getClass().getName())
        symlinks = self._symlinks(catalog_table)
        bounded = self._boundedness(node)
        if cls.endswith("HadoopFsRelation"):
            fmt = short_format(relation.fileFormat())
            if catalog_table and catalog_table.get("provider"):
                fmt = str(catalog_table["provider"])
            paths = [p for p in str(relation.location().rootPaths().mkString("\n")).split("\n") if p]
            return [dataset(*file_dataset_id(p), format=fmt, fields=fields, symlinks=symlinks,
                            boundedness=bounded) for p in paths]
        if cls.endswith("JDBCRelation"):
            opts = relation.jdbcOptions()
            url, table = str(opts.url()), str(opts.tableOrQuery())
            tables = _query_tables(table)
            if tables is None:
                ns, name = jdbc_dataset_id(url, table)
                return [dataset(ns, name, format="jdbc", fields=fields, symlinks=symlinks, boundedness=bounded)]
            # A 'query' option: the tables it names; its columns cannot be told apart without a SQL parser.
            return [dataset(*jdbc_dataset_id(url, t), format="jdbc", boundedness=bounded,
                            properties={"query": table}) for t in tables]
        if cls.endswith("KafkaRelation"):
            params = scala_map(_private_field(relation, "specifiedKafkaParams"))
            servers = params.get("bootstrap.servers", "")
            strategy = str(_private_field(relation, "strategy").toString())
            return [dataset(kafka_namespace(servers), topic, format="kafka", fields=fields,
                            boundedness=bounded, properties=props)
                    for topic, props in _kafka_topics(strategy)]
        raise LookupError(f"relation class {cls} is not supported")

    def _in_LogicalRelation(self, node: PlanNode) -> list[Dataset]:  # noqa: N802
        catalog_table = _dict(node.fields.get("catalogTable"))
        fields = fields_of_attributes(self.graph.output(node))
        self.deadline.check_essential("looking up an input relation")
        return self._relation_datasets(node, self._j(node).relation(), catalog_table, fields)

    def _in_HiveTableRelation(self, node: PlanNode) -> list[Dataset]:  # noqa: N802
        meta = node.fields.get("tableMeta") if isinstance(node.fields.get("tableMeta"), dict) else None
        self.deadline.check_essential("looking up a Hive table location")
        location = str(self._j(node).tableMeta().location())
        return [dataset(*file_dataset_id(location), format=str((meta or {}).get("provider") or "hive"),
                        fields=fields_of_attributes(self.graph.output(node)), symlinks=self._symlinks(meta))]

    def _v2_datasets(self, node: PlanNode, fields: list[SchemaField]) -> list[Dataset]:
        self.deadline.check_essential("looking up a DataSourceV2 table")
        jnode = self._j(node)
        table = jnode.table()
        cls = str(table.getClass().getName())
        bounded = self._boundedness(node)
        if cls.rstrip("$").endswith("NoopTable"):
            return []  # format("noop"): benchmarks write here, nothing is stored
        if cls.endswith("V1Table"):
            catalog_table = table.v1Table()
            ident = catalog_table.identifier()
            name = f"{option(ident.database())}.{ident.table()}" if option(ident.database()) else str(ident.table())
            symlinks: list[Symlink] = [{"namespace": self.catalog_namespace(), "name": name, "type": "TABLE"}]
            provider = option(catalog_table.provider())
            return [dataset(*file_dataset_id(str(catalog_table.location())), format=provider and str(provider),
                            fields=fields, symlinks=symlinks, boundedness=bounded)]
        try:
            paths = [p for p in str(table.fileIndex().rootPaths().mkString("\n")).split("\n") if p]
            fmt = str(table.formatName()).lower()
            return [dataset(*file_dataset_id(p), format=fmt, fields=fields, boundedness=bounded)
                    for p in paths]
        except Exception:  # noqa: BLE001 - not a file table: name it by catalog and identifier
            log.debug("DataSourceV2 table %s is not a file table", cls, exc_info=True)
        catalog = option(jnode.catalog())
        ident = option(jnode.identifier())
        namespace = str(catalog.name()) if catalog is not None else "spark"
        name = str(ident.toString()) if ident is not None else str(table.name())
        return [dataset(namespace, name, fields=fields, boundedness=bounded)]

    def _in_DataSourceV2Relation(self, node: PlanNode) -> list[Dataset]:  # noqa: N802
        return self._v2_datasets(node, fields_of_attributes(self.graph.output(node)))

    def _in_DataSourceV2ScanRelation(self, node: PlanNode) -> list[Dataset]:  # noqa: N802
        # The optimizer's scan keeps the relation it reads (a nested plan, named there) and its exprIds.
        return []

    # -- outputs -----------------------------------------------------------------------------------------

    def _add_output(self, ds: Dataset, query: PlanNode | None, names: list[str] | None) -> None:
        self.result.outputs.append(ds)
        self._writes.append((ds, query, names))

    def _query_fields(self, query: PlanNode | None, names: list[str] | None,
                      catalog_table: dict[str, Any] | None = None) -> list[SchemaField]:
        schema = (catalog_table or {}).get("schema")
        if isinstance(schema, dict) and schema.get("fields"):
            return fields_of_struct_json(schema)
        if query is None:
            return []
        attrs = self.graph.output(query)
        fields: list[SchemaField] = []
        if self.jvm is not None and not self.deadline.expired():
            # Expression types are not in the plan JSON; catalogString is the cheap way to get them.
            fields = fields_of_catalog_string(str(self._j(query).schema().catalogString()),
                                              [a.nullable for a in attrs])
        else:
            fields = fields_of_attributes(attrs)
        if names and len(names) == len(fields):
            for f, n in zip(fields, names, strict=True):
                f["name"] = n
        return fields

    def _mode(self, node: PlanNode) -> str | None:
        self.deadline.check_essential("looking up the save mode")
        mode = self._j(node).mode()
        return str(mode.toString()) if mode is not None else None

    def _out_InsertIntoHadoopFsRelationCommand(self, node: PlanNode) -> None:  # noqa: N802
        query = node.children[0] if node.children else node.nested.get("query")
        names = _column_names(node)
        catalog_table = _dict(node.fields.get("catalogTable"))
        self.deadline.check_essential("looking up the output path")
        jnode = self._j(node)
        path = str(jnode.outputPath().toString())
        fmt = str(catalog_table["provider"]) if catalog_table and catalog_table.get("provider") \
            else short_format(jnode.fileFormat())
        static = scala_map(jnode.staticPartitions())
        ds = dataset(*file_dataset_id(path), format=fmt, fields=self._query_fields(query, names, catalog_table),
                     symlinks=self._symlinks(catalog_table), operation=self._mode(node), partition_values=static)
        self._add_output(ds, query, names)

    def _out_CreateDataSourceTableAsSelectCommand(self, node: PlanNode) -> None:  # noqa: N802
        table = _dict(node.fields.get("table")) or {}
        query = node.nested.get("query") or (node.children[0] if node.children else None)
        names = _column_names(node)
        self.deadline.check_essential("looking up the new table's location")
        jtable = self._j(node).table()
        location = option(jtable.storage().locationUri())
        if location is None:
            location = self.qe.sparkSession().sessionState().catalog().defaultTablePath(jtable.identifier())
        mode = self._mode(node)
        ds = dataset(*file_dataset_id(str(location.toString())), format=table.get("provider"),
                     fields=self._query_fields(query, names), symlinks=self._symlinks(table),
                     operation="CreateTableAsSelect", properties={"mode": mode} if mode else {})
        self._add_output(ds, query, names)

    def _out_InsertIntoDataSourceDirCommand(self, node: PlanNode) -> None:  # noqa: N802
        # INSERT OVERWRITE DIRECTORY '...' USING fmt SELECT ...
        query = node.nested.get("query") or (node.children[0] if node.children else None)
        self.deadline.check_essential("looking up the directory written")
        location = option(self._j(node).storage().locationUri())
        if location is None:
            raise LookupError("INSERT OVERWRITE DIRECTORY without a location")
        op = "Overwrite" if node.fields.get("overwrite") is True else "Append"
        ds = dataset(*file_dataset_id(str(location.toString())), format=node.fields.get("provider"),
                     fields=self._query_fields(query, None), operation=op)
        self._add_output(ds, query, None)

    def _out_InsertIntoDataSourceCommand(self, node: PlanNode) -> None:  # noqa: N802
        target = node.nested.get("logicalRelation")
        query = node.nested.get("query") or (node.children[0] if node.children else None)
        if target is None:
            raise LookupError("InsertIntoDataSourceCommand without a logicalRelation")
        self._targets.add(id(target))
        for sub in target.walk():
            self._targets.add(id(sub))
        catalog_table = _dict(target.fields.get("catalogTable"))
        self.deadline.check_essential("looking up the target relation")
        fields = self._query_fields(query, None, catalog_table)
        op = "Overwrite" if node.fields.get("overwrite") is True else "Append"
        for ds in self._relation_datasets(target, self._j(target).relation(), catalog_table, fields):
            ds["operation"] = op
            self._add_output(ds, query, None)

    def _out_SaveIntoDataSourceCommand(self, node: PlanNode) -> None:  # noqa: N802
        query = node.nested.get("query") or (node.children[0] if node.children else None)
        self.deadline.check_essential("looking up the data source written")
        jnode = self._j(node)
        provider = jnode.dataSource()
        cls = str(provider.getClass().getName())
        # Only the keys that name the target are read: options also hold passwords.
        opts = {k.lower(): v for k, v in scala_map(jnode.options()).items()}
        mode = self._mode(node)
        fields = self._query_fields(query, None)
        if cls.endswith("JdbcRelationProvider"):
            url, table = opts.get("url"), opts.get("dbtable")
            if not url or not table:
                raise LookupError("JDBC write without 'url' and 'dbtable' options")
            ns, name = jdbc_dataset_id(url, table)
            self._add_output(dataset(ns, name, format="jdbc", fields=fields, operation=mode), query, None)
        elif cls.endswith("KafkaSourceProvider"):
            ns = kafka_namespace(opts.get("kafka.bootstrap.servers", ""))
            topic = opts.get("topic")
            if not topic:
                self.result.mark_incomplete("Kafka sink without a 'topic' option: topics come from each row")
                return
            self._add_output(dataset(ns, topic, format="kafka", fields=fields, operation=mode), query, None)
        elif opts.get("path"):
            try:
                fmt = str(provider.shortName())
            except Exception:  # noqa: BLE001 - a provider without a short name
                fmt = cls.rsplit(".", 1)[-1]
            self._add_output(dataset(*file_dataset_id(opts["path"]), format=fmt, fields=fields, operation=mode),
                             query, None)
        else:
            self.result.mark_incomplete(f"output data source {cls} is not supported")

    def _v2_write(self, node: PlanNode, operation: str) -> None:
        target = node.nested.get("table")
        query = node.nested.get("query") or (node.children[0] if node.children else None)
        if target is None:
            raise LookupError(f"{node.simple} without a table")
        for sub in target.walk():
            self._targets.add(id(sub))
        fields = self._query_fields(query, None)
        for ds in self._v2_datasets(target, fields):
            ds["operation"] = operation
            self._add_output(ds, query, None)

    def _out_AppendData(self, node: PlanNode) -> None:  # noqa: N802
        self._v2_write(node, "Append")

    def _out_OverwriteByExpression(self, node: PlanNode) -> None:  # noqa: N802
        self._v2_write(node, "Overwrite")

    def _out_OverwritePartitionsDynamic(self, node: PlanNode) -> None:  # noqa: N802
        self._v2_write(node, "OverwritePartitionsDynamic")


_QUERY_TABLES = re.compile(r"\b(?:FROM|JOIN)\s+((?:\"[^\"]+\"|[\w$]+)(?:\.(?:\"[^\"]+\"|[\w$]+))*)", re.I)


def _query_tables(table_or_query: str) -> list[str] | None:
    """Tables a JDBC 'query' option reads (Spark wraps it as '(query) SPARK_GEN_SUBQ_n'); None for a table."""
    text = table_or_query.strip()
    if not text.startswith("("):
        return None
    found: list[str] = []
    for name in _QUERY_TABLES.findall(text):
        if not name.startswith("(") and name not in found:
            found.append(name)
    return found


def _private_field(obj: Any, name: str) -> Any:
    """A private field of a JVM object (KafkaRelation keeps its options in constructor fields)."""
    f = obj.getClass().getDeclaredField(name)
    f.setAccessible(True)
    return f.get(obj)


def _kafka_topics(strategy: str) -> list[tuple[str, dict[str, str]]]:
    """Topics of a Kafka ConsumerStrategy's toString: Subscribe[a, b], Assign[a-0, a-1], SubscribePattern[p]."""
    m = re.match(r"^(\w+)\[(.*)\]$", strategy.strip(), re.S)
    if not m:
        return [(strategy, {"strategy": strategy})]
    kind, body = m.group(1), m.group(2)
    items = [i.strip() for i in body.split(",") if i.strip()]
    if kind == "SubscribePattern":
        return [(body, {"pattern": "true"})]
    if kind == "Assign":
        items = [re.sub(r"-\d+$", "", i) for i in items]
    seen: list[str] = []
    for i in items:
        if i not in seen:
            seen.append(i)
    return [(t, {}) for t in seen]
