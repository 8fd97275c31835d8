"""Column lineage: which source columns feed each output column, and how.

Catalyst names every attribute by an ``exprId``. Walking the analyzed plan we
record, per attribute a node defines (an ``Alias`` in a projection, an
aggregate or a window; a union's output; a generator's output), the
attributes it is computed from and how:

- DIRECT IDENTITY: the value is copied (``SELECT a``, ``a AS b``);
- DIRECT TRANSFORMATION: computed from it (``a + 1``, ``upper(a)``);
- DIRECT AGGREGATION: through an aggregate function (``sum(a)``);
- INDIRECT CONDITIONAL: it decides which value is taken (``CASE WHEN a ...``);
  a value such a condition picks unchanged stays IDENTITY.

Attributes that decide which rows reach the output (join keys, filters, group
keys, window partition and order, sort keys) are INDIRECT for every output
column of the action, as in OpenLineage's Spark integration. Resolving an
output attribute follows these edges back to the attributes of the source
relations (leaves), through projections, aliases, subqueries, views, unions,
joins, aggregates and windows.
"""

from __future__ import annotations

from collections.abc import Callable

from lineagewire.schemas.events import ColumnLineage, InputField, Transformation

from .plan import Attribute, Expr, PlanNode, attribute_of, attribute_of_fields, expr_id, parse_expression

__all__ = ["IDENTITY", "ColumnGraph", "FieldKey", "Sources", "Trans", "combine"]

#: (type, subtype, masking)
Trans = tuple[str, str, bool]
FieldKey = tuple[str, str, str]  # (dataset namespace, dataset name, field)
#: Source columns of one attribute and how they reach it.
Sources = dict[FieldKey, set[Trans]]

IDENTITY: Trans = ("DIRECT", "IDENTITY", False)
_RANK = {"IDENTITY": 0, "TRANSFORMATION": 1, "AGGREGATION": 2}
#: Functions whose output does not reveal their input.
_MASKING = {"Sha1", "Sha2", "Md5", "Crc32", "Murmur3Hash", "XxHash64", "HiveHash", "Mask"}
_ATTRIBUTES = {"AttributeReference", "OuterReference"}
#: Plan nodes that evaluate extracted Python UDFs (``udf``: BatchEvalPython, ``pandas_udf``: ArrowEvalPython).
_PYTHON_EVAL = {"BatchEvalPython", "ArrowEvalPython"}
#: Plan nodes that hand whole rows (or groups of rows) to a Python function (``mapInPandas``,
#: ``mapInArrow``, ``applyInPandas``, ``applyInArrow``, their cogrouped and stateful forms): field
#: ``functionExpr`` is the function over the columns it is given, field ``output`` what it returns.
_PYTHON_FUNCTIONS = frozenset({
    "MapInPandas", "MapInArrow", "PythonMapInArrow", "FlatMapGroupsInPandas", "FlatMapGroupsInArrow",
    "FlatMapCoGroupsInPandas", "FlatMapCoGroupsInArrow", "FlatMapGroupsInPandasWithState",
    "TransformWithStateInPandas",
})
#: Their grouping keys (a cogroup's are the first ``leftGroupingLen`` / ``rightGroupingLen`` columns of each side).
_GROUPINGS = ("groupingAttributes", "groupingAttrs")
_COGROUPINGS = ("leftGroupingLen", "rightGroupingLen")
#: Filters the optimizer adds from a join's keys to skip partitions or files at run time (dynamic
#: partition pruning; a V2 MERGE's filter on the target's ``_file``): not the user's filters, and the
#: join keys they come from are INDIRECT/JOIN already.
_RUNTIME_FILTERS = frozenset({"DynamicPruningExpression", "DynamicPruningSubquery"})
#: ``MergeRows`` (MERGE into a V2 table) instruction lists.
_MERGE_INSTRUCTIONS = ("matchedInstructions", "notMatchedInstructions", "notMatchedBySourceInstructions")


def combine(outer: Trans, inner: Trans) -> Trans:
    """How a source feeds a column through two steps (the column from ``outer``, that from ``inner``)."""
    masking = outer[2] or inner[2]
    if outer[0] == "INDIRECT":
        return ("INDIRECT", outer[1], masking)
    if inner[0] == "INDIRECT":
        return ("INDIRECT", inner[1], masking)
    subtype = outer[1] if _RANK.get(outer[1], 1) >= _RANK.get(inner[1], 1) else inner[1]
    return ("DIRECT", subtype, masking)


SubplanOutput = Callable[[Expr], list[int] | None]


def _attr_ids(exprs: list[Expr], subplan: SubplanOutput, prune: frozenset[str] = frozenset()) -> list[int]:
    """Attributes read by expressions, a subquery's output attributes included (not under ``prune``)."""
    ids = []
    stack = list(reversed(exprs))
    while stack:
        e = stack.pop()
        if e.simple in prune:
            continue
        if e.simple in _ATTRIBUTES:
            ident = expr_id(e.fields)
            if ident is not None:
                ids.append(ident)
        else:
            ids += subplan(e) or []
        stack.extend(reversed(e.children))
    return ids


def _direct_inputs(expr: Expr, subplan: SubplanOutput) -> list[tuple[int, Trans]]:
    """Attributes an expression reads and how (window specs are left to the dataset-wide WINDOW edges)."""
    found: list[tuple[int, Trans]] = []

    def visit(e: Expr, agg: bool, mask: bool, cond: bool, root: bool) -> None:
        s = e.simple
        if s in _ATTRIBUTES:
            ident = expr_id(e.fields)
            if ident is None:
                return
            if cond:
                found.append((ident, ("INDIRECT", "CONDITIONAL", mask)))
            elif agg:
                found.append((ident, ("DIRECT", "AGGREGATION", mask)))
            elif root:
                found.append((ident, IDENTITY))
            else:
                found.append((ident, ("DIRECT", "TRANSFORMATION", mask)))
            return
        if s == "WindowSpecDefinition":
            return
        sub = subplan(e)
        if sub:
            # A scalar subquery's value is computed from its plan's output.
            kind: Trans = ("INDIRECT", "CONDITIONAL", mask) if cond else ("DIRECT", "TRANSFORMATION", mask)
            found.extend((ident, kind) for ident in sub)
        agg = agg or s == "AggregateExpression" or ".aggregate." in e.cls
        mask = mask or s in _MASKING
        conditions: set[int] = set()
        if s == "If" and e.children:
            conditions = {0}
        elif s == "CaseWhen":
            branches = len(e.children) // 2
            conditions = {2 * i for i in range(branches)}
        # A value a condition picks is copied as it is: it stays IDENTITY if it is the whole expression.
        picks = s in ("If", "CaseWhen")
        for i, child in enumerate(e.children):
            visit(child, agg, mask, cond or i in conditions, root and picks and i not in conditions)

    visit(expr, False, False, False, True)
    return found


def _write_sorts(nodes: list[PlanNode]) -> set[int]:
    """The sorts a partitioned file write adds under WriteFiles: they order rows for the writer, not the user."""
    return {id(n.children[0]) for n in nodes
            if n.simple == "WriteFiles" and n.children and n.children[0].simple == "Sort"}


#: Nodes whose output is a list of their own: the field that holds it.
_OWN_OUTPUT = {"Project": "projectList", "Aggregate": "aggregateExpressions"}
#: Nodes that output their child's columns and then some of their own: the field that holds those.
_APPENDED_OUTPUT = {"Window": "windowExpressions", "Generate": "generatorOutput",
                    **dict.fromkeys(_PYTHON_EVAL, "resultAttrs")}


class ColumnGraph:
    """Edges between attributes of one plan, and the source columns of its leaves."""

    def __init__(self, check: Callable[[str], None] | None = None) -> None:
        self.deps: dict[int, list[tuple[int, Trans]]] = {}
        self.sources: dict[int, list[FieldKey]] = {}
        self.indirect: list[tuple[int, str]] = []
        #: Attributes whose source columns were resolved elsewhere (a checkpointed plan, a JDBC query's SQL)
        self.presolved: dict[int, Sources] = {}
        #: Source columns that decide which rows reach the output, resolved elsewhere (as ``presolved``)
        self.indirect_fields: Sources = {}
        self._outputs: dict[int, list[Attribute]] = {}
        self._resolved: dict[int, dict[FieldKey, set[Trans]]] = {}
        self._subplans: dict[int, PlanNode] = {}
        #: Attributes of the compact form's shared attribute dicts, by id() of the dict
        self._by_raw: dict[int, Attribute | None] = {}
        self._check = check or (lambda what: None)
        #: what each kind of plan node adds to the graph
        self._edges_of: dict[str, Callable[[PlanNode], None]] = {
            "Project": self._project_edges, "Aggregate": self._aggregate_edges, "Window": self._window_edges,
            "Filter": self._filter_edges, "Join": self._join_edges, "Sort": self._sort_edges,
            "Union": self._union_edges, "Generate": self._generate_edges, "Expand": self._expand_edges,
            "MergeRows": self._merge_rows_edges,
            **dict.fromkeys(_PYTHON_EVAL, self._python_udf_edges),
            **dict.fromkeys(_PYTHON_FUNCTIONS, self._python_function_edges),
        }
        self._next_synthetic = 0
        #: roots whose edges are recorded (a plan is both written and kept as an origin)
        self._planned: set[int] = set()

    # -- outputs of plan nodes -------------------------------------------------------------

    def output(self, node: PlanNode) -> list[Attribute]:
        """The attributes ``node`` outputs, in order."""
        key = id(node)
        cached = self._outputs.get(key)
        if cached is not None:
            return cached
        out = self._compute_output(node)
        self._outputs[key] = out
        return out

    def _named(self, node: PlanNode, field: str) -> list[Attribute]:
        value = node.fields.get(field)
        table = node.attrs
        if not table or not isinstance(value, list) or not value or not isinstance(value[0], list):
            return [a for a in (attribute_of(e) for e in node.expressions(field)) if a is not None]
        # Compact form: most items of a wide node's list are one attribute reference ([~i]), whose
        # Attribute is made once per plan, not parsed again at every node that lists it.
        out: list[Attribute] = []
        by_raw = self._by_raw
        for flat in value:
            if not flat:
                continue
            ref = flat[0]
            if len(flat) == 1 and type(ref) is int and 0 <= ~ref < len(table):
                raw = table[~ref]
                found = by_raw.get(id(raw))
                if found is None:
                    found = by_raw[id(raw)] = attribute_of_fields(raw)
            else:
                found = attribute_of(node.parse(flat))
            if found is not None:
                out.append(found)
        return out

    def _compute_output(self, node: PlanNode) -> list[Attribute]:
        s = node.simple
        own = _OWN_OUTPUT.get(s)
        if own is not None:
            return self._named(node, own)
        if s == "HiveTableRelation":
            return self._named(node, "dataCols") + self._named(node, "partitionCols")
        derived = self._output_from_children(node) if node.children else None
        if derived is not None:
            return derived
        if isinstance(node.fields.get("output"), list):
            return self._named(node, "output")
        if len(node.children) == 1:
            return self.output(node.children[0])
        return [a for child in node.children for a in self.output(child)]

    def _output_from_children(self, node: PlanNode) -> list[Attribute] | None:
        """The output of a node that passes its (first) child's columns on; None for the other kinds."""
        s = node.simple
        appended = _APPENDED_OUTPUT.get(s)
        if appended is not None:
            return self.output(node.children[0]) + self._named(node, appended)
        if s == "Union":
            return self.output(node.children[0])
        if s == "Join" and len(node.children) == 2:
            join_type = str(node.fields.get("joinType"))
            left = self.output(node.children[0])
            if "LeftSemi" in join_type or "LeftAnti" in join_type or "ExistenceJoin" in join_type:
                return left
            return left + self.output(node.children[1])
        return None

    # -- edges -------------------------------------------------------------------------------

    def _edge(self, target: int, source: int, trans: Trans) -> None:
        if target != source:
            self.deps.setdefault(target, []).append((source, trans))

    def _subplan_output(self, expr: Expr) -> list[int] | None:
        plan = self._subplans.get(id(expr.fields))
        return [a.expr_id for a in self.output(plan)] if plan is not None else None

    def _ids(self, exprs: list[Expr]) -> list[int]:
        return _attr_ids(exprs, self._subplan_output)

    def _named_edges(self, exprs: list[Expr]) -> None:
        for e in exprs:
            if e.simple == "Alias" and e.children:
                target = expr_id(e.fields)
                if target is None:
                    continue
                for source, trans in _direct_inputs(e.children[0], self._subplan_output):
                    self._edge(target, source, trans)

    def add_plan(self, root: PlanNode) -> None:
        """Record the edges of every node under ``root`` (once)."""
        if id(root) in self._planned:
            return
        self._planned.add(id(root))
        nodes = list(root.walk())
        write_sorts = _write_sorts(nodes)
        for node in nodes:
            self._subplans.update(node.subplans)
        runtime = self._runtime_filter_plans(nodes)
        edges_of = self._edges_of
        for node in nodes:
            if id(node) in runtime:
                continue
            self._check("tracing column lineage")
            add = edges_of.get(node.simple)
            if add is not None and id(node) not in write_sorts:
                add(node)

    def _project_edges(self, node: PlanNode) -> None:
        self._named_edges(node.aliases("projectList"))

    def _aggregate_edges(self, node: PlanNode) -> None:
        self._named_edges(node.aliases("aggregateExpressions"))
        self.indirect += [(i, "GROUP_BY") for i in self._ids(node.expressions("groupingExpressions"))]

    def _filter_edges(self, node: PlanNode) -> None:
        ids = _attr_ids(node.expressions("condition"), self._subplan_output, _RUNTIME_FILTERS)
        self.indirect += [(i, "FILTER") for i in ids]

    def _join_edges(self, node: PlanNode) -> None:
        self.indirect += [(i, "JOIN") for i in self._ids(node.expressions("condition"))]

    def _sort_edges(self, node: PlanNode) -> None:
        self.indirect += [(i, "SORT") for i in self._ids(node.expressions("order"))]

    def _window_edges(self, node: PlanNode) -> None:
        self._named_edges(node.aliases("windowExpressions"))
        spec = node.expressions("partitionSpec") + node.expressions("orderSpec")
        self.indirect += [(i, "WINDOW") for i in self._ids(spec)]

    def _union_edges(self, node: PlanNode) -> None:
        # A union's output columns are its first child's: each is its own input of every other child.
        if len(node.children) < 2:
            return
        first = self.output(node.children[0])
        for other in node.children[1:]:
            for a, b in zip(first, self.output(other), strict=False):
                self._edge(a.expr_id, b.expr_id, IDENTITY)

    def _generate_edges(self, node: PlanNode) -> None:
        # explode() and its kind: every column the generator outputs comes from every column it reads.
        sources = self._ids(node.expressions("generator"))
        for out in self._named(node, "generatorOutput"):
            for source in sources:
                self._edge(out.expr_id, source, ("DIRECT", "TRANSFORMATION", False))

    def _runtime_filter_plans(self, nodes: list[PlanNode]) -> set[int]:
        """Nodes of the subquery plans that only compute run-time filters (their grouping and joins too)."""
        skip: set[int] = set()
        for node in nodes:
            if node.simple != "Filter":
                continue
            for root in node.expressions("condition"):
                for e in root.walk():
                    if e.simple not in _RUNTIME_FILTERS:
                        continue
                    for inner in e.walk():
                        plan = self._subplans.get(id(inner.fields))
                        if plan is not None:
                            skip.update(id(n) for n in plan.walk())
        return skip

    def _merge_rows_edges(self, node: PlanNode) -> None:
        # Each instruction (Keep, Split, Discard) holds its condition and the expressions of the row(s) it
        # writes, as indexes into its children: output column i is computed by output expression i.
        # A clause's condition decides which rows get its values: INDIRECT/FILTER, as for Delta's MERGE.
        outputs = self._named(node, "output")
        for field in _MERGE_INSTRUCTIONS:
            for instruction in node.expressions(field):
                self._instruction_edges(instruction, outputs)

    def _instruction_edges(self, instruction: Expr, outputs: list[Attribute]) -> None:
        children = instruction.children
        cond = instruction.fields.get("condition")
        if isinstance(cond, int) and 0 <= cond < len(children):
            self.indirect += [(i, "FILTER") for i in self._ids([children[cond]])]
        for key in ("output", "otherOutput"):
            positions = instruction.fields.get(key)
            if not isinstance(positions, list):
                continue
            for out, at in zip(outputs, positions, strict=False):
                if isinstance(at, int) and 0 <= at < len(children):
                    for source, trans in _direct_inputs(children[at], self._subplan_output):
                        self._edge(out.expr_id, source, trans)

    def _python_udf_edges(self, node: PlanNode) -> None:
        # The optimizer moves Python UDFs out of projections and filters into an eval node whose i-th
        # result attribute is the i-th UDF's value: it derives from the UDF's arguments. Nothing is known
        # about the function's body, so the arguments are a TRANSFORMATION even for a UDF that returns
        # its argument unchanged; a filter or join on the result makes them INDIRECT through these edges.
        for udf, result in zip(node.expressions("udfs"), self._named(node, "resultAttrs"), strict=False):
            for source, _ in _direct_inputs(udf, self._subplan_output):
                self._edge(result.expr_id, source, ("DIRECT", "TRANSFORMATION", False))

    def _python_function_edges(self, node: PlanNode) -> None:
        # The function gets rows (or groups of rows) and returns rows of its own: which input column
        # went into which output column is unknown, so every output column derives from every column
        # the function was given (its arguments: all the child's columns for the grouped forms) as an
        # opaque TRANSFORMATION. Grouping keys decide which rows meet, as for an aggregate: GROUP_BY.
        given = self._ids(node.expressions("functionExpr"))
        keys: list[int] = []
        for field in _GROUPINGS:
            keys += self._ids(node.expressions(field))
        for child, field in zip(node.children, _COGROUPINGS, strict=False):
            length = node.fields.get(field)
            if isinstance(length, int):
                keys += [a.expr_id for a in self.output(child)[:length]]
        self.indirect += [(i, "GROUP_BY") for i in keys]
        sources = list(dict.fromkeys(given + keys))
        for out in self._named(node, "output"):
            for source in sources:
                self._edge(out.expr_id, source, ("DIRECT", "TRANSFORMATION", False))

    def _expand_edges(self, node: PlanNode) -> None:
        outputs = self._named(node, "output")
        projections = node.fields.get("projections")
        if not isinstance(projections, list):
            return
        for projection in projections:
            if not isinstance(projection, list):
                continue
            for out, flat in zip(outputs, projection, strict=False):
                if isinstance(flat, list) and flat:
                    for source, trans in _direct_inputs(parse_expression(flat, node.attrs), self._subplan_output):
                        self._edge(out.expr_id, source, trans)

    def _synthetic(self) -> int:
        """A new attribute id for a column a command computes without an exprId (Delta's UPDATE, MERGE)."""
        self._next_synthetic -= 1
        return self._next_synthetic

    def add_update(self, node: PlanNode, target: PlanNode) -> list[tuple[str, int]]:
        """Columns of an UPDATE: column i of ``target`` gets ``updateExpressions[i]``; the WHERE is a FILTER."""
        cols = []
        for attr, expr in zip(self.output(target), node.expressions("updateExpressions"), strict=False):
            out = self._synthetic()
            for source, trans in _direct_inputs(expr, self._subplan_output):
                self._edge(out, source, trans)
            cols.append((attr.name, out))
        self.indirect += [(i, "FILTER") for i in self._ids(node.expressions("condition"))]
        return cols

    def add_delete(self, node: PlanNode, target: PlanNode) -> list[tuple[str, int]]:
        """Columns of a DELETE: the rows that stay keep every column of ``target``; the WHERE, which decides
        which rows stay, is INDIRECT/FILTER. Without a WHERE no row stays: no column comes from anything."""
        condition = node.expressions("condition")
        if all(e.simple == "Literal" and str(e.fields.get("value")).lower() == "true" for e in condition):
            return []  # DELETE with no WHERE: Spark's parser and DeltaTable.delete() make it WHERE true
        self.indirect += [(i, "FILTER") for i in self._ids(condition)]
        return [(attr.name, attr.expr_id) for attr in self.output(target)]

    def add_merge(self, node: PlanNode) -> list[tuple[str, int]]:
        """Columns of a MERGE: each SET / INSERT column from its expressions (in every clause that sets it);
        the ON condition is INDIRECT/JOIN, clause conditions INDIRECT/FILTER."""
        by_name: dict[str, int] = {}
        for field in ("matchedClauses", "notMatchedClauses", "notMatchedBySourceClauses"):
            for clause in node.expressions(field):
                for child in clause.children:
                    if child.simple != "DeltaMergeAction":  # the clause's own condition
                        self.indirect += [(i, "FILTER") for i in self._ids([child])]
                        continue
                    parts = child.fields.get("targetColNameParts")
                    name = ".".join(parts) if isinstance(parts, list) else str(parts).strip("[]")
                    out = by_name.setdefault(name, self._synthetic())
                    for value in child.children:
                        for source, trans in _direct_inputs(value, self._subplan_output):
                            self._edge(out, source, trans)
        self.indirect += [(i, "JOIN") for i in self._ids(node.expressions("condition"))]
        return list(by_name.items())

    def add_presolved(self, ident: int, sources: Sources) -> None:
        """Attribute ``ident``'s source columns, resolved elsewhere (``resolve`` adds them to its own)."""
        bucket = self.presolved.setdefault(ident, {})
        for key, transes in sources.items():
            bucket.setdefault(key, set()).update(transes)

    def add_indirect_fields(self, sources: Sources) -> None:
        """Source columns that decide which rows reach the output, resolved elsewhere."""
        for key, transes in sources.items():
            self.indirect_fields.setdefault(key, set()).update(transes)

    def resolved_indirect(self) -> Sources:
        """Every source column that decides which rows reach the output, and how."""
        indirect: Sources = {k: set(v) for k, v in self.indirect_fields.items()}
        for ident, subtype in self.indirect:
            for key, transes in self.resolve(ident).items():
                masking = any(t[2] for t in transes)
                indirect.setdefault(key, set()).add(("INDIRECT", subtype, masking))
        return indirect

    def add_source(self, attrs: list[Attribute], namespace: str, name: str) -> None:
        """Attributes of a leaf relation are the columns of dataset (namespace, name)."""
        for a in attrs:
            self.sources.setdefault(a.expr_id, []).append((namespace, name, a.name))

    # -- resolution ------------------------------------------------------------------------------

    def resolve(self, ident: int, _active: set[int] | None = None) -> dict[FieldKey, set[Trans]]:
        """Source columns of attribute ``ident`` and how they reach it."""
        done = self._resolved.get(ident)
        if done is not None:
            return done
        active = _active if _active is not None else set()
        if ident in active:
            return {}
        active.add(ident)
        self._check("resolving column lineage")
        result: dict[FieldKey, set[Trans]] = {}
        for key in self.sources.get(ident, []):
            result.setdefault(key, set()).add(IDENTITY)
        for key, transes in self.presolved.get(ident, {}).items():
            result.setdefault(key, set()).update(transes)
        for source, step in self.deps.get(ident, []):
            for key, transes in self.resolve(source, active).items():
                bucket = result.setdefault(key, set())
                for inner in transes:
                    bucket.add(combine(step, inner))
        active.discard(ident)
        self._resolved[ident] = result
        return result

    def lineage(self, namespace: str, name: str, columns: list[tuple[str, int]]) -> list[ColumnLineage]:
        """Column lineage of output dataset (namespace, name) whose column ``col`` is attribute ``id``."""
        indirect = self.resolved_indirect()
        # Every column shares the indirect inputs: build them once, in order.
        shared = {k: _input_field(k, v) for k, v in indirect.items()}
        shared_keys = sorted(shared)
        empty: frozenset[Trans] = frozenset()
        out: list[ColumnLineage] = []
        for column, ident in columns:
            direct = self.resolve(ident)
            if not direct and not shared:
                continue
            # Sorting the shared keys (a 20-join plan's 20-odd join keys) again for each of 1,000 columns
            # was most of this loop: only the column's own sources are sorted into them.
            own = [k for k in direct if k not in shared]
            keys = sorted(shared_keys + own) if own else shared_keys
            inputs: list[InputField] = [
                shared[key] if key not in direct else _input_field(key, direct[key] | indirect.get(key, empty))
                for key in keys]
            out.append({"namespace": namespace, "name": name, "field": column, "inputs": inputs})
        return out


def _input_field(key: FieldKey, transes: set[Trans]) -> InputField:
    return {"namespace": key[0], "name": key[1], "field": key[2],
            "transformations": [_transformation(t) for t in sorted(transes)]}


def _transformation(t: Trans) -> Transformation:
    return {"type": t[0], "subtype": t[1], "description": "", "masking": t[2]}  # type: ignore[typeddict-item,unused-ignore]
