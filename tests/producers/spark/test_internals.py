"""PySpark's and py4j's non-public names are used in one module only: ``producers/spark/internals.py``.

A PySpark or py4j upgrade then has one file to check. The scan needs no Spark: it reads the source
with ``ast`` and names file:line and the name of every use outside the door.
"""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOOR = ROOT / "producers" / "spark" / "internals.py"
SCANNED = ("consumers", "producers", "lineagewire", "bench")

#: Private attributes of PySpark's objects (SparkContext, SparkSession, DataFrame, readers, writers,
#: streaming) and of py4j's gateway, flagged whatever they are read from.
KNOWN = frozenset({
    "_jvm", "_jsc", "_gateway", "_jsparkSession", "_jdf", "_jconf", "_sc", "_jrdd", "_jreader", "_jwrite",
    "_jwriter", "_jsq", "_jsqm", "_jcatalog", "_jseq", "_jmap", "_jsparkContext", "_active_spark_context",
    "_instantiatedSession", "_activeSession", "_gateway_client", "_python_proxy_port", "_callback_server",
    "thread_connection", "get_thread_connection", "ensure_callback_server_started",
})
#: PySpark names its handles on JVM objects ``_j<thing>`` (``_jdf``, ``_jsc``, ``_jwrite`` ...): any such
#: attribute read from an object that is not the reader's own (``self``/``cls``) is one of them.
JAVA_HANDLE = re.compile(r"^_j[a-zA-Z]")
#: Modules of PySpark's that are not its public API.
PRIVATE_MODULES = ("pyspark.java_gateway",)
#: Environment variables PySpark sets for itself.
PRIVATE_STRINGS = frozenset({"SPARK_LOCAL_REMOTE"})
LIBRARIES = ("pyspark", "py4j")


def _private_attribute(name: str, receiver: ast.expr) -> bool:
    if name in KNOWN:
        return True
    own = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
    return not own and bool(JAVA_HANDLE.match(name))


def _from_library(module: str) -> bool:
    return module.split(".")[0] in LIBRARIES


def _import_findings(node: ast.Import | ast.ImportFrom) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if not _from_library(module):
            return found
        if module in PRIVATE_MODULES or any(part.startswith("_") for part in module.split(".")):
            found.append((node.lineno, f"from {module} import ..."))
        found += [(node.lineno, f"from {module} import {alias.name}") for alias in node.names
                  if alias.name.startswith("_")]
        return found
    for alias in node.names:
        parts = alias.name.split(".")
        if _from_library(alias.name) and (alias.name in PRIVATE_MODULES or any(p.startswith("_") for p in parts)):
            found.append((node.lineno, f"import {alias.name}"))
    return found


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, name) of every use of a PySpark or py4j non-public name in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private_attribute(node.attr, node.value):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found += _import_findings(node)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private_attribute(node.args[1].value, node.args[0])):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
        elif isinstance(node, ast.Constant) and node.value in PRIVATE_STRINGS:
            found.append((node.lineno, repr(node.value)))
    return sorted(found)


def _modules() -> list[pathlib.Path]:
    return sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py") if p != DOOR)


def test_no_module_but_the_door_uses_pyspark_or_py4j_internals() -> None:
    modules = _modules()
    assert len(modules) > 100, f"the scan found only {len(modules)} modules under {SCANNED}: wrong root {ROOT}?"
    outside = [f"{path.relative_to(ROOT)}:{line}: {name}" for path in modules
               for line, name in private_uses(path.read_text(encoding="utf-8"))]
    assert not outside, ("PySpark's or py4j's non-public names used outside producers/spark/internals.py "
                         "(go through a function there, listed in its docstring):\n" + "\n".join(outside))


def test_the_scan_sees_every_name_the_door_uses() -> None:
    # The door's own uses are what the rules must catch anywhere else.
    names = {name for _line, name in private_uses(DOOR.read_text(encoding="utf-8"))}
    assert {"_jvm", "_jsc", "_gateway", "_jsparkSession", "_active_spark_context", "thread_connection",
            "getattr(..., '_gateway_client')", "from pyspark.java_gateway import ...",
            "'SPARK_LOCAL_REMOTE'"} <= names, names


def test_the_scan_names_a_planted_use_with_its_line() -> None:
    planted = textwrap.dedent("""\
        from pyspark import SparkContext
        from pyspark.sql.session import _create_shell_session
        from py4j.java_gateway import JavaGateway

        def reach(spark, df, self=None):
            jvm = spark.sparkContext._jvm
            frame = df._jdf
            writer = df.write._jwrite
            client = getattr(SparkContext._gateway, "_gateway_client")
            mine = self._java_proxy
            env = "SPARK_LOCAL_REMOTE"
            return jvm, frame, writer, client, mine, env
        """)
    assert private_uses(planted) == [
        (2, "from pyspark.sql.session import _create_shell_session"),
        (6, "_jvm"), (7, "_jdf"), (8, "_jwrite"),
        (9, "_gateway"), (9, "getattr(..., '_gateway_client')"),
        (11, "'SPARK_LOCAL_REMOTE'"),
    ]
