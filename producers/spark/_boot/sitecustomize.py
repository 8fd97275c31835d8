"""Zero-code activation, loaded by Python at start-up in processes run by ``lineagewire instrument``.

``lineagewire instrument`` puts this folder first on PYTHONPATH and sets
``LINEAGEWIRE_INSTRUMENT=1``. Nothing is imported here beyond the standard
library: a one-shot import hook waits for ``pyspark.sql.session`` and wraps
``SparkSession.Builder.getOrCreate`` so the session it returns gets the
emitter installed. Processes that never build a SparkSession (PySpark's own
Python workers inherit the environment) pay only for this file.

A ``sitecustomize`` module that this one shadows (e.g. a distribution's) is
run afterwards, so instrumenting changes nothing else.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _patch(module):
    builder = module.SparkSession.Builder
    original = builder.getOrCreate
    if getattr(original, "_lineagewire", False):
        return

    def getOrCreate(self):  # noqa: N802 - PySpark's name
        session = original(self)
        try:
            from lineagewire.producers.spark.instrument import activate_on

            activate_on(session)
        except Exception as exc:  # noqa: BLE001 - instrumentation must never break the job
            sys.stderr.write(f"lineagewire: not instrumenting this SparkSession: {exc}\n")
        return session

    getOrCreate._lineagewire = True
    getOrCreate.__doc__ = original.__doc__
    builder.getOrCreate = getOrCreate


class _SessionModuleHook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "pyspark.sql.session":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            if module.__name__ != name:
                return
            try:
                del loader.exec_module  # back to the class's own method
                _patch(module)
            except Exception as exc:  # noqa: BLE001
                sys.stderr.write(f"lineagewire: cannot hook SparkSession: {exc}\n")

        loader.exec_module = exec_and_patch
        return spec


def _chain():
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("LINEAGEWIRE_INSTRUMENT") == "1":
    sys.meta_path.insert(0, _SessionModuleHook())
_chain()
