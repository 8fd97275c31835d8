"""The plan as Spark's ``TreeNode.toJSON()`` writes it, turned back into trees.

``toJSON()`` writes a tree as a flat pre-order list of nodes, each with its
class and ``num-children``; a field naming a child holds the child's index
(``"child": 0``, ``"children": [0, 1]``). Expressions are flattened the same
way: a field holding one expression is a list of dicts, a field holding a
``Seq[Expression]`` a list of such lists. A plan held in a field that is not a
child (``CreateDataSourceTableAsSelectCommand.query``) is a nested list of
plan nodes. Values Spark cannot write (paths, maps, relations) come back as
null: ``PlanNode.path`` says how to reach the node on the JVM side to look
them up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .exceptions import PlanFormatError

__all__ = ["Attribute", "Expr", "PlanNode", "parse_expression", "parse_plan", "parse_plan_json"]

#: How to reach a node from the root on the JVM: ("c", i) = children().apply(i), ("f", name) = name(),
#: ("s", i) = subqueries().apply(i).
Step = tuple[str, Any]


@dataclass
class Expr:
    """One expression node: its class, its own fields and its children in order."""

    cls: str
    fields: dict[str, Any]
    children: list[Expr] = field(default_factory=list)

    @property
    def simple(self) -> str:
        return self.cls.rsplit(".", 1)[-1]

    def walk(self) -> Iterator[Expr]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True)
class Attribute:
    """An attribute a plan node outputs: Catalyst's exprId, its name and type (as JSON)."""

    expr_id: int
    name: str
    data_type: Any = None
    nullable: bool = True
    comment: str | None = None


@dataclass
class PlanNode:
    """One logical plan node."""

    cls: str
    fields: dict[str, Any]
    path: tuple[Step, ...]
    children: list[PlanNode] = field(default_factory=list)
    #: plans held in fields that are not children (e.g. a CTAS query), by field name
    nested: dict[str, PlanNode] = field(default_factory=dict)
    #: subquery plans by the id() of their expression's JSON dict (Expr.fields)
    subplans: dict[int, PlanNode] = field(default_factory=dict, repr=False)
    _exprs: dict[str, list[Expr]] = field(default_factory=dict, repr=False)

    @property
    def simple(self) -> str:
        return self.cls.rsplit(".", 1)[-1]

    def walk(self) -> Iterator[PlanNode]:
        """This node, its children and nested plans, depth first."""
        yield self
        for sub in self.nested.values():
            yield from sub.walk()
        for child in self.children:
            yield from child.walk()

    def expressions(self, name: str) -> list[Expr]:
        """The expressions of field ``name``: a Seq field gives many, a single one gives a list of one."""
        cached = self._exprs.get(name)
        if cached is not None:
            return cached
        value = self.fields.get(name)
        parsed: list[Expr] = []
        if isinstance(value, list) and value:
            if isinstance(value[0], list):
                parsed = [parse_expression(flat) for flat in value if flat]
            elif isinstance(value[0], dict):
                parsed = [parse_expression(value)]
        self._exprs[name] = parsed
        return parsed

    def aliases(self, name: str) -> list[Expr]:
        """The ``Alias`` expressions of Seq field ``name``, without parsing the others.

        A wide plan's projections are mostly bare attribute references (column pruning under
        every join): they define nothing, and parsing thousands of them only to skip them cost
        a fifth of an extraction on the 1,000-column plan.
        """
        cached = self._exprs.get(name)
        if cached is not None:
            return [e for e in cached if e.cls.endswith(".Alias")]
        value = self.fields.get(name)
        if not isinstance(value, list) or not value or not isinstance(value[0], list):
            return [e for e in self.expressions(name) if e.cls.endswith(".Alias")]
        return [parse_expression(flat) for flat in value
                if flat and type(flat[0]) is dict and flat[0].get("class") == _ALIAS]


_ALIAS = "org.apache.spark.sql.catalyst.expressions.Alias"


def _is_plan_list(value: Any) -> bool:
    if not isinstance(value, list) or not value or not isinstance(value[0], dict):
        return False
    cls = value[0].get("class", "")
    return ".expressions." not in cls and (".plans.logical." in cls or ".execution." in cls)


def parse_plan_json(text: str) -> PlanNode:
    """Parse the string ``LogicalPlan.toJSON()`` returned."""
    try:
        nodes = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise PlanFormatError(f"plan JSON: not valid JSON ({exc}); expected the output of toJSON()") from exc
    # Looking for subqueries means scanning every expression: skip it when the text has none.
    return parse_plan(nodes, subqueries='"plan":[' in text)


def parse_plan(nodes: list[dict[str, Any]], path: tuple[Step, ...] = (), subqueries: bool = True) -> PlanNode:
    """Rebuild a plan tree from the flat pre-order node list of ``toJSON()``."""
    if not isinstance(nodes, list) or not nodes:
        raise PlanFormatError(f"plan JSON: got {type(nodes).__name__}, expected a non-empty list of plan nodes")
    pos = 0

    def build(at: tuple[Step, ...]) -> PlanNode:
        nonlocal pos
        if pos >= len(nodes):
            raise PlanFormatError(f"plan JSON: {len(nodes)} nodes, but num-children asks for more")
        raw = nodes[pos]
        pos += 1
        if not isinstance(raw, dict) or "class" not in raw:
            raise PlanFormatError(f"plan JSON: node {pos - 1} is {raw!r:.80}, expected an object with 'class'")
        node = PlanNode(raw["class"], raw, at)
        subquery = 0
        for key, value in raw.items():
            if _is_plan_list(value):
                node.nested[key] = parse_plan(value, (*at, ("f", key)), subqueries)
                continue
            if not subqueries:
                continue
            # Subquery plans sit in their expressions' "plan" field, in the order the JVM's
            # QueryPlan.subqueries lists them (fields in order, each expression in pre-order).
            for expr in _expression_dicts(value):
                if _is_plan_list(expr.get("plan")):
                    sub = parse_plan(expr["plan"], (*at, ("s", subquery)), subqueries)
                    node.nested[f"subquery{subquery}"] = sub
                    node.subplans[id(expr)] = sub
                    subquery += 1
        for i in range(int(raw.get("num-children", 0))):
            node.children.append(build((*at, ("c", i))))
        return node

    root = build(path)
    return root


def _expression_dicts(value: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        return
    if isinstance(value[0], dict):
        if ".expressions." in str(value[0].get("class", "")):
            yield from (v for v in value if isinstance(v, dict))
        return
    for item in value:
        if isinstance(item, list) and item and isinstance(item[0], dict):
            yield from (v for v in item if isinstance(v, dict))


def parse_expression(flat: list[dict[str, Any]]) -> Expr:
    """Rebuild one expression tree from its flat pre-order list."""
    # Iterative: wide plans have thousands of expressions, and recursion costs more here.
    root: Expr | None = None
    stack: list[tuple[Expr, int]] = []  # (node, children still expected)
    for raw in flat:
        if not isinstance(raw, dict):
            raise PlanFormatError(f"expression JSON: node {raw!r:.80} is not an object")
        expr = Expr(raw.get("class", ""), raw)
        if stack:
            parent, left = stack[-1]
            parent.children.append(expr)
            if left == 1:
                stack.pop()
            else:
                stack[-1] = (parent, left - 1)
        elif root is None:
            root = expr
        else:
            break
        n = int(raw.get("num-children", 0))
        if n:
            stack.append((expr, n))
    if root is None or stack:
        raise PlanFormatError(f"expression JSON: {len(flat)} nodes, but num-children asks for more")
    return root


def expr_id(raw: dict[str, Any]) -> int | None:
    ref = raw.get("exprId")
    if isinstance(ref, dict) and isinstance(ref.get("id"), int):
        return ref["id"]
    return None


def attribute_of(expr: Expr) -> Attribute | None:
    """The attribute a named expression (AttributeReference or Alias) outputs, else None."""
    ident = expr_id(expr.fields)
    if ident is None:
        return None
    data_type = expr.fields.get("dataType")
    nullable = bool(expr.fields.get("nullable", True))
    if expr.simple == "Alias" and expr.children:
        child = expr.children[0]
        data_type = child.fields.get("dataType", data_type)
        nullable = bool(child.fields.get("nullable", True))
    comment = None
    meta = expr.fields.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("comment"), str):
        comment = meta["comment"]
    return Attribute(ident, str(expr.fields.get("name", "")), data_type, nullable, comment)
