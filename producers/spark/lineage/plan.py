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

The JVM writer's compact form (``java/PlanJson.java``) wraps that list as
``{"attrs": [...], "tree": [...]}``: every ``AttributeReference`` is written once
in ``attrs`` and, where it occurs in an expression, as the integer ``~i``
(``-(i + 1)``) for ``attrs[i]``. A node's ``attrs`` is that list (empty for
``toJSON()``'s form); ``parse_expression`` resolves the references.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .exceptions import PlanFormatError

__all__ = ["Attribute", "Expr", "PlanNode", "is_persisted_view", "parse_expression", "parse_plan", "parse_plan_json"]

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
    #: the document's distinct attributes, which expressions refer to as ``~index`` (compact form)
    attrs: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _exprs: dict[str, list[Expr]] = field(default_factory=dict, repr=False)
    #: expressions parsed from an item of a Seq field, by id() of the item's flat list
    _parsed: dict[int, Expr] = field(default_factory=dict, repr=False)

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
            first = value[0]
            if isinstance(first, list):
                parsed = [self.parse(flat) for flat in value if flat]
            elif isinstance(first, dict) or (type(first) is int and first < 0 and self.attrs):
                parsed = [parse_expression(value, self.attrs)]
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
        return [self.parse(flat) for flat in value
                if flat and type(flat[0]) is dict and flat[0].get("class") == _ALIAS]

    def parse(self, flat: list[Any]) -> Expr:
        """The expression of one item of a Seq field of this node, parsed once."""
        found = self._parsed.get(id(flat))
        if found is None:
            found = self._parsed[id(flat)] = parse_expression(flat, self.attrs)
        return found


_ALIAS = "org.apache.spark.sql.catalyst.expressions.Alias"


def is_persisted_view(node: PlanNode) -> bool:
    """A read of a catalog view (``View`` of the analyzed plan, not a temporary view's): a dataset of its own."""
    return node.simple == "View" and node.fields.get("isTempView") is False


def _is_plan_list(value: Any) -> bool:
    if not isinstance(value, list) or not value or not isinstance(value[0], dict):
        return False
    cls = value[0].get("class", "")
    return ".expressions." not in cls and (".plans.logical." in cls or ".execution." in cls)


def parse_plan_json(text: str) -> PlanNode:
    """Parse the string ``LogicalPlan.toJSON()`` returned, or the JVM writer's compact form."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise PlanFormatError(f"plan JSON: not valid JSON ({exc}); expected the output of toJSON()") from exc
    attrs: Any = []  # the compact form's attribute list (checked below)
    if isinstance(doc, dict) and "tree" in doc:
        attrs, doc = doc.get("attrs"), doc["tree"]
        if not isinstance(attrs, list):
            raise PlanFormatError(f"plan JSON: 'attrs' is {type(attrs).__name__}, expected a list of attributes")
    # Looking for subqueries means scanning every expression: skip it when the text has none.
    return parse_plan(doc, subqueries='"plan":[' in text, attrs=attrs)


def parse_plan(nodes: list[dict[str, Any]], path: tuple[Step, ...] = (), subqueries: bool = True,
               attrs: list[dict[str, Any]] | None = None) -> PlanNode:
    """Rebuild a plan tree from the flat pre-order node list of ``toJSON()`` (``attrs``: see the module doc)."""
    table = attrs if attrs is not None else []
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
        node = PlanNode(raw["class"], raw, at, attrs=table)
        subquery = 0
        for key, value in raw.items():
            if _is_plan_list(value):
                node.nested[key] = parse_plan(value, (*at, ("f", key)), subqueries, table)
                continue
            if not subqueries:
                continue
            # Subquery plans sit in their expressions' "plan" field, in the order the JVM's
            # QueryPlan.subqueries lists them (fields in order, each expression in pre-order).
            for expr in _expression_dicts(value):
                if _is_plan_list(expr.get("plan")):
                    sub = parse_plan(expr["plan"], (*at, ("s", subquery)), subqueries, table)
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


def parse_expression(flat: list[Any], attrs: list[dict[str, Any]] | None = None) -> Expr:
    """Rebuild one expression tree from its flat pre-order list (``attrs``: the compact form's attributes)."""
    # Iterative: wide plans have thousands of expressions, and recursion costs more here.
    root: Expr | None = None
    stack: list[tuple[Expr, int]] = []  # (node, children still expected)
    for raw in flat:
        if type(raw) is int and raw < 0 and attrs and ~raw < len(attrs):
            raw = attrs[~raw]
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
    if expr.simple == "Alias" and expr.children:
        child = expr.children[0].fields
        return attribute_of_fields(expr.fields, child.get("dataType", expr.fields.get("dataType")),
                                   bool(child.get("nullable", True)))
    return attribute_of_fields(expr.fields)


_UNSET: Any = object()


def attribute_of_fields(raw: dict[str, Any], data_type: Any = _UNSET, nullable: bool | None = None) -> Attribute | None:
    """The attribute of a named expression's JSON fields (its type and nullability unless given)."""
    ident = expr_id(raw)
    if ident is None:
        return None
    if data_type is _UNSET:
        data_type = raw.get("dataType")
    if nullable is None:
        nullable = bool(raw.get("nullable", True))
    comment = None
    meta = raw.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("comment"), str):
        comment = meta["comment"]
    return Attribute(ident, str(raw.get("name", "")), data_type, nullable, comment)
