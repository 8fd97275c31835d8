"""Every key docs/settings.md lists is read by the code (issue 43, item 1).

A setting nothing reads is a promise the code does not keep (``emitter.enabled`` was one). For each field of each
documented model (``settings_doc.MODELS``, nested models too), some module that may hold a value of the model
(its own, one that names its class, or one that imports either) must name the field outside the model's
definition: as an attribute (``cfg.queue_size``) or as a string (``getattr(cfg, "queue_size")``, a dict
key). Field declarations and validator decorators do not count; a model whose own method walks
``model_fields`` with ``getattr`` reads every field (``KafkaSecurity.as_librdkafka_dict``).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import pathlib

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


def _names(tree: ast.AST, skip: ast.ClassDef | None) -> set[str]:
    """Attribute names and string constants of ``tree``, leaving out decorators, and the field declarations of
    the class ``skip``."""
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
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)
        todo += list(ast.iter_child_nodes(node))
    return out


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
