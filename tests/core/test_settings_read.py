"""Every key docs/settings.md lists is read by the code (issue 43, item 1).

A setting nothing reads is a promise the code does not keep (``emitter.enabled`` was one). For each field of each
documented model (``settings_doc.MODELS``, nested models too), some module that may hold a value of the model
(its own, one that names its class, or one that imports either) must name the field outside the model's
definition: as an attribute (``cfg.queue_size``) or as a string that names what is read
(``getattr(cfg, "queue_size")``, ``data["queue_size"]``, ``data.get("queue_size")``); other strings (``__all__``,
messages) and keyword arguments do not count, nor do field declarations and validator decorators. A model whose
own method walks ``model_fields`` with ``getattr`` reads every field (``KafkaSecurity.as_librdkafka_dict``).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import pathlib
import sys

import pytest
from pydantic import BaseModel

from lineagewire.settings_doc import MODELS, _load, _model_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("lineagewire", "consumers", "producers", "schemas")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(parts if parts[0] == "lineagewire" else ["lineagewire", *parts])


@functools.cache
def _sources() -> dict[str, tuple[pathlib.Path, ast.Module]]:
    files = [f for pkg in PACKAGES for f in (ROOT / pkg).rglob("*.py")]
    return {_module_name(f): (f, ast.parse(f.read_text(encoding="utf-8"))) for f in files}


def _imports(module: str, tree: ast.Module, target: str) -> bool:
    is_package = _sources()[module][0].name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == target for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                               module if is_package else module.rpartition(".")[0]) \
                if node.level else node.module or ""
            if base == target or any(f"{base}.{a.name}" == target for a in node.names):
                return True
    return False


#: calls whose string argument names an attribute or a key to read: getattr(cfg, "x"), data.get("x")
_BY_NAME = {"getattr": 1, "hasattr": 1, "get": 0, "pop": 0, "setdefault": 0}


def _names(tree: ast.AST, skip: ast.ClassDef | None) -> set[str]:
    """The names ``tree`` reads a setting by: attributes (``cfg.queue_size``), and strings only where they name
    what is read (``getattr(cfg, "x")``, ``data["x"]``, ``data.get("x")``), never any other string (``__all__``,
    messages, docstrings). Keyword arguments pass a value in, they read nothing: ``DatedFolders(enabled=...)``
    beside ``EmitterConfig`` would otherwise read its ``enabled``. Decorators and the field declarations of the
    class ``skip`` are left out."""
    out: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body: list[ast.AST] = list(node.body)
            if node is skip:
                body = [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
            todo += body
            continue
        if isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.Subscript):
            out |= _strings([node.slice])
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in _BY_NAME:
                out |= _strings(node.args[_BY_NAME[name]:_BY_NAME[name] + 1])
        todo += list(ast.iter_child_nodes(node))
    return out


def _strings(nodes: list[ast.expr]) -> set[str]:
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _mentions(tree: ast.Module, name: str) -> bool:
    return any((isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.Constant) and isinstance(n.value, str)
               and name in n.value.split()) for n in ast.walk(tree))


def _reads_every_field(node: ast.AST) -> bool:
    """A method that walks ``model_fields`` and reads each with ``getattr`` (not one that only lists names)."""
    if not isinstance(node, ast.FunctionDef):
        return False
    calls = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return "model_fields" in _names(node, None) and "getattr" in calls


@functools.cache
def _read(model: type[BaseModel]) -> frozenset[str]:
    """The names that the modules using ``model``'s module read, beside its definition."""
    own_file = pathlib.Path(inspect.getsourcefile(model) or "")
    # where a value of the model may be: its module, and the modules that name its class (``config: EmitterConfig``
    # of a context object); a module that imports one of those may read it
    carriers = {_module_name(own_file)} | {m for m, (_, t) in _sources().items() if _mentions(t, model.__name__)}
    names: set[str] = set()
    for module, (_, tree) in _sources().items():
        if module not in carriers and not any(_imports(module, tree, c) for c in carriers):
            continue
        skip = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == model.__name__), None)
        found = _names(tree, skip)
        if skip is not None and any(_reads_every_field(f) for f in skip.body):
            found |= set(model.model_fields)
        names |= found
    return frozenset(names)


def _fields(model: type[BaseModel], path: str) -> list[tuple[type[BaseModel], str, str]]:
    out = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        out.append((model, name, f"{path}{name}"))
        nested = _model_of(field.annotation)
        if nested is not None:
            out += _fields(nested, f"{path}{name}.")
    return out


def unread_settings() -> list[str]:
    """The documented keys nothing reads: ``<section>.<key> (Model.field)``."""
    unread = []
    for _, target in MODELS:
        model = _load(target)
        section = f"{model.config_section}." if model.config_section else ""
        for owner, name, key in _fields(model, section):
            if name not in _read(owner):
                unread.append(f"{key} ({owner.__name__}.{name})")
    return unread


def test_every_documented_setting_is_read_by_the_code() -> None:
    assert unread_settings() == [], "documented in docs/settings.md but read nowhere in the package"


def test_names_are_the_reads_not_every_string() -> None:
    reads = ['cfg.enabled', 'getattr(cfg, "enabled")', 'data["enabled"]', 'data.get("enabled", False)']
    for code in reads:
        assert "enabled" in _names(ast.parse(code), None), code
    not_reads = ['__all__ = ["enabled"]', 'log.warning("enabled")', '"""enabled"""', 'x = {"enabled"}',
                 'DatedFolders(enabled=True)']
    for code in not_reads:
        assert "enabled" not in _names(ast.parse(code), None), code


class _WithoutEnabledReads(ast.NodeTransformer):
    """The activation module as if its reads of ``enabled`` were gone, its ``__all__`` left as it is."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:  # noqa: N802 - ast's name
        self.generic_visit(node)
        return ast.Attribute(node.value, "gone", node.ctx) if node.attr == "enabled" else node

    def visit_Call(self, node: ast.Call) -> ast.AST:  # noqa: N802 - ast's name
        self.generic_visit(node)
        node.args = [ast.Constant("gone") if isinstance(a, ast.Constant) and a.value == "enabled" else a
                     for a in node.args]
        return node


def test_a_setting_listed_only_in_all_is_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``emitter.enabled`` is read by activation alone, whose ``__all__`` also lists a function ``enabled``."""
    from lineagewire.producers.spark.config import EmitterConfig

    activation = "lineagewire.producers.spark._boot.lineagewire_activate"
    path, tree = _sources()[activation]
    assert "enabled" in ast.literal_eval(next(n.value for n in tree.body if isinstance(n, ast.Assign)
                                              and getattr(n.targets[0], "id", None) == "__all__"))
    assert "enabled" in _read(EmitterConfig)
    edited = {**_sources(), activation: (path, _WithoutEnabledReads().visit(ast.parse(path.read_text())))}
    monkeypatch.setattr(sys.modules[__name__], "_sources", lambda: edited)
    _read.cache_clear()
    try:
        assert "enabled" not in _read(EmitterConfig)
    finally:
        _read.cache_clear()
